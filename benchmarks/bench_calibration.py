"""Calibration benchmark: held-out error of the measured profile per slice, before and after the fit.

Usage:  python benchmarks/bench_calibration.py [MEASUREMENTS.csv] [--framework TensorRT-LLM] [--engine N]
                                              [--loss l2|cauchy] [--hold DEVICE:FORMAT:FIELD=VALUE ...]

Rows: the framework's steady-state rows that sweepkit prices (default: the packaged corpus; for
TensorRT-LLM its perf-overview v0.17 and v0.20 max-throughput rows, for another framework its max-throughput
and loaded rows, never MLPerf v5.x, InferenceX or TensorRT-LLM >= 1.0; the version scheme is TensorRT-LLM's
only). Two
held-out schemes, each of two folds, so every row is predicted once by a profile not fitted on it:

    version   fit on v0.17, test on v0.20; fit on v0.20, test on v0.17 (a slice in one release only is
              then never fitted: it keeps the seed)
    pairs     fit on half of the (ISL, OSL) pairs, test on the other half, and the reverse

and a third of one fold per device:

    device    fit on every other device, test on this one: the device has no fitted entry and is priced
              by the family rule (sweepkit/catalogue/families.toml: B200 from Hopper, GH200 from H200/H100,
              A100 and L40S from nothing, i.e. the seed)

Per slice (device x dense/MoE x compute format) it prints the rows and median |error| % (signed median in
brackets) of: the reference roofline at the reference constants in the steady state (what the serving
engine computes for these rows, within a few % on a sample: --engine), the seed profile (the same
constants, priced by operator class), and the fitted profile on held-out rows. --engine N also simulates N
rows with the serving engine (reference constants; minutes on a CPU) beside the steady state.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402

from sweepkit.catalogue.efficiency import packaged_profile  # noqa: E402
from sweepkit.validation import load_measurements  # noqa: E402
from sweepkit.validation.framework_fit import (calibrate_framework, errors_pct, fittable,  # noqa: E402
                                               framework_rows, slice_of)
from sweepkit.errors import InputError  # noqa: E402
from sweepkit.validation.profile_fit import LOSSES, parse_held  # noqa: E402
from sweepkit.validation.serving_points import MAX_BATCH, TOKEN_BUDGET  # noqa: E402
from sweepkit.validation.serving_runs import evaluate_serving  # noqa: E402
from sweepkit.validation.steady import reference_throughput  # noqa: E402
from sweepkit.validation.steady_rows import row_inputs  # noqa: E402


def reference_pct(rows) -> np.ndarray:
    """Error % of the reference roofline in the steady state, with the serving engine's KV rule (max-throughput
    rows; NaN for loaded rows)."""
    with jax.enable_x64(True):
        r = row_inputs(rows, MAX_BATCH, TOKEN_BUDGET)
        r = dataclasses.replace(r, kv_free_fraction=r.kv_free_fraction * 0.0)
        v = np.asarray(jax.vmap(reference_throughput)(r))
    v = np.where([m.metric == "max_output_throughput" for m in rows], v, np.nan)
    return 100.0 * (v / np.array([m.value_si for m in rows]) - 1.0)


def held_out(rows, folds, framework, loss="l2", held=None) -> tuple[np.ndarray, float]:
    """Error % of every row under the profile fitted (under ``loss``, ``held`` fields kept) on the other fold;
    seconds of fitting."""
    out, spent = np.full(len(rows), np.nan), 0.0
    for k in sorted(set(folds)):
        pts = [dataclasses.replace(m, split="test" if f == k else "train") for m, f in zip(rows, folds)]
        t0 = time.perf_counter()
        fit = calibrate_framework(pts, framework, file="bench", sha256="-", loss=loss, held=held)
        spent += time.perf_counter() - t0
        test = [i for i, f in enumerate(folds) if f == k]
        out[test] = errors_pct([rows[i] for i in test], fit.profile)
    return out, spent


def _cell(e) -> str:
    return f"{np.median(np.abs(e)):5.1f} ({np.median(e):+5.1f})"


def report(rows, columns: dict[str, np.ndarray]) -> None:
    groups: dict[str, list[int]] = {}
    for i, m in enumerate(rows):
        groups.setdefault(slice_of(m), []).append(i)
    print(f"{'slice':<20} {'rows':>4}  " + "  ".join(f"{c:>15}" for c in columns))
    for name, idx in sorted(groups.items()) + [("all", list(range(len(rows))))]:
        print(f"{name:<20} {len(idx):>4}  " + "  ".join(f"{_cell(v[idx]):>15}" for v in columns.values()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measurements", nargs="?", default=None)
    ap.add_argument("--framework", default="TensorRT-LLM")
    ap.add_argument("--engine", type=int, default=0, help="rows to simulate with the serving engine")
    ap.add_argument("--loss", choices=LOSSES, default="l2", help="the held-out fits' data loss (calibrate --loss)")
    ap.add_argument("--hold", action="append", default=[], metavar="DEVICE:FORMAT:FIELD=VALUE",
                    help="hold a field at a value in every fit (a measured kernel table's; calibrate --hold); "
                         "repeatable")
    args = ap.parse_args()
    try:
        held = parse_held(args.hold)
    except InputError as exc:
        raise SystemExit(str(exc)) from None
    points, name, _ = load_measurements(args.measurements)
    trt = args.framework.lower().startswith("tensorrt")
    sources = ("trtllm-perf-overview-v0.17", "trtllm-perf-overview-v0.20") if trt else ()
    rows = [m for m in framework_rows(points, args.framework, sources) if fittable(m)]
    print(f"{len(rows)} {args.framework} steady-state rows of {name}; held-out fits under the {args.loss} loss"
          + (f", held: {held}" if held else ""))
    seed = errors_pct(rows, packaged_profile())
    ref = reference_pct(rows)
    version, t_v = held_out(rows, ["v0.17" in m.source for m in rows], args.framework, args.loss, held) if trt \
        else (np.full(len(rows), np.nan), 0.0)
    pairs = sorted({(m.input_tokens, m.output_tokens) for m in rows})
    parity = {p: i % 2 for i, p in enumerate(pairs)}
    by_pair, t_p = held_out(rows, [parity[(m.input_tokens, m.output_tokens)] for m in rows], args.framework, args.loss,
                            held)
    by_device, t_d = held_out(rows, [m.device for m in rows], args.framework, args.loss, held)
    print(f"median |error| % (signed median %); fits {t_v:.1f} s (version folds), {t_p:.1f} s (pair folds), "
          f"{t_d:.1f} s (device folds)")
    report(rows, {"reference": ref, "seed profile": seed, "held-out:version": version, "held-out:pairs": by_pair,
                  "held-out:device": by_device})
    if args.engine:
        print(f"\nserving engine (reference constants) on {args.engine} rows vs the steady state:")
        for i in np.linspace(0, len(rows) - 1, args.engine).astype(int):
            m, t0 = rows[i], time.perf_counter()
            v = evaluate_serving(m)
            print(f"  {m.setup}: measured {m.value_si:.0f}, engine {v:.0f} ({100 * (v / m.value_si - 1):+.1f}%), "
                  f"steady state {m.value_si * (1 + ref[i] / 100):.0f} ({ref[i]:+.1f}%), "
                  f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
