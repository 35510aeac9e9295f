"""Dense GEMM efficiency of a device x format from NVIDIA AIConfigurator's measured kernel tables.

aiconfigurator-core (github.com/ai-dynamo/aiconfigurator, Apache-2.0) ships measured per-kernel latency
tables per GPU, framework and format under ``aiconfigurator_core/systems/data/<gpu>/gemm/<framework>/
<version>/gemm_perf.parquet`` (columns gemm_dtype, m, n, k, latency in ms). This script reads one such
table from a path given on the command line (aiconfigurator is not a dependency of sweepkit; without a
path it says so and exits 0), prices a model's per-layer GEMM shapes at each token count m, and fits the
measured profile's dense GEMM fields (sweepkit/costmodel/efficiency.py) to the summed latency:

    t(m) = max(2 m sum(n k) / (P k_fmt e_max m / (m + T_half)),  sum(n k) w / (B weight_bw_eff))

P: the device's dense bf16 peak, k_fmt its native speed-up for the format, w bytes per weight, B its HBM
bandwidth (sweepkit/catalogue). e_max and T_half minimise the squared log error over the table's m values
(grid search); weight_bw_eff is held at the profile's value. It prints the achieved FLOP/s per m, the share
of the format's peak, and the catalogue values it suggests.

Example:
  AIC=/tmp/aic/lib/python3.11/site-packages/aiconfigurator_core
  python benchmarks/data/aic_efficiency.py --dtype nvfp4 \
      --table $AIC/systems/data/b200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb
import numpy as np

from sweepkit.catalogue.devices import get_device
from sweepkit.catalogue.formats import load_formats

DTYPES = {"nvfp4": "nvfp4", "fp8": "fp8", "bfloat16": "bf16"}
"""AIC gemm_dtype -> sweepkit format."""
SHAPES = {"llama-70b": (8192, 28672, 1280), "llama-405b": (16384, 53248, 1024)}
"""Model -> (d_model, ffn, kv width = kv heads x head dim): Llama-3.3-70B and Llama-3.1-405B config.json."""
POINTS = ("llama-70b:1", "llama-70b:2", "llama-70b:4", "llama-70b:8", "llama-405b:4", "llama-405b:8")
"""Default (model, tp) shapes: the layouts TensorRT-LLM's perf-overview serves these models with."""


def layer_shapes(d_model: int, ffn: int, kv: int, tp: int) -> list[tuple[int, int]]:
    """(n, k) of one decoder layer's four GEMMs on one of ``tp`` devices: qkv, o, gate+up, down."""
    return [((d_model + 2 * kv) // tp, d_model), (d_model, d_model // tp), (2 * ffn // tp, d_model),
            (d_model, ffn // tp)]


def measured(table: str, dtype: str, shapes: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, float]:
    """Token counts m, summed latency (s) of ``shapes`` at each m (each shape at its nearest table n, k,
    latency scaled by n k / (n' k')), and the summed n k."""
    con = duckdb.connect()
    rows = con.execute("select m, n, k, latency from read_parquet(?) where gemm_dtype = ?",
                       [table, dtype]).fetchall()
    if not rows:
        raise SystemExit(f"{table}: no rows with gemm_dtype = {dtype!r}")
    arr = np.array(rows, dtype=float)
    ns, ks = np.unique(arr[:, 1]), np.unique(arr[:, 2])
    ms = np.unique(arr[:, 0])
    total = np.zeros(len(ms))
    for n, k in shapes:
        n2, k2 = ns[np.argmin(abs(np.log(ns / n)))], ks[np.argmin(abs(np.log(ks / k)))]
        sel = arr[(arr[:, 1] == n2) & (arr[:, 2] == k2)]
        lat = dict(zip(sel[:, 0], sel[:, 3]))
        total += np.array([lat.get(m, np.nan) for m in ms]) * 1e-3 * (n * k) / (n2 * k2)
    ok = np.isfinite(total)
    return ms[ok], total[ok], float(sum(n * k for n, k in shapes))


def fit(ms: np.ndarray, t_s: np.ndarray, nk: float, peak: float, hbm: float, w: float,
        bw_eff: float) -> tuple[float, float]:
    """(e_max, T_half) minimising the squared log error of t(m) (module docstring) by grid search."""
    e = np.linspace(0.05, 1.0, 96)[:, None, None]
    h = np.arange(0.0, 4096.0 + 1, 8.0)[None, :, None]
    m = ms[None, None, :]
    t = np.maximum(2 * m * nk / (peak * e * m / (m + h)), nk * w / (hbm * bw_eff))
    err = ((np.log(t) - np.log(t_s)[None, None, :]) ** 2).sum(-1)
    i, j = np.unravel_index(np.argmin(err), err.shape)
    return float(e[i, 0, 0]), float(h[0, j, 0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Example: python benchmarks/data/aic_efficiency.py --table "
                                        "AIC/systems/data/b200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet")
    ap.add_argument("--table", help="an AIConfigurator gemm_perf.parquet (skips when not given)")
    ap.add_argument("--dtype", default="nvfp4", choices=sorted(DTYPES))
    ap.add_argument("--device", default="B200", help="sweepkit device whose peak and bandwidth apply")
    ap.add_argument("--points", nargs="+", default=list(POINTS),
                    help="MODEL:TP shapes to price (default: %(default)s)")
    ap.add_argument("--weight-bw-eff", type=float, default=0.8)
    args = ap.parse_args(argv)
    if not args.table:
        print("no AIConfigurator table given (--table not set): nothing to do")
        return 0
    if not Path(args.table).is_file():
        raise SystemExit(f"--table: no such file {args.table} (an AIConfigurator gemm_perf.parquet)")
    dev = get_device(args.device)
    fmt = DTYPES[args.dtype]
    speedup = dev.compute_speedup.get(fmt, 1.0) if fmt != "bf16" else 1.0
    peak = dev.peak_flops_per_s * speedup
    w = load_formats()[fmt].bytes_per_value
    print(f"{args.device} {fmt}: peak {peak / 1e15:.2f} PFLOP/s dense, HBM {dev.hbm_bytes_per_s / 1e12:.1f} TB/s, "
          f"{w} B/weight; table {args.table}")
    fits = []
    for point in args.points:
        model, _, tp = point.partition(":")
        if model not in SHAPES or not tp.isdigit() or int(tp) < 1:
            raise SystemExit(f"--points: {point!r} is not MODEL:TP with MODEL one of {', '.join(SHAPES)}")
        ms, t_s, nk = measured(args.table, args.dtype, layer_shapes(*SHAPES[model], int(tp)))
        e_max, t_half = fit(ms, t_s, nk, peak, dev.hbm_bytes_per_s, w, args.weight_bw_eff)
        fits.append((e_max, t_half))
        print(f"{model} tp{tp}: gemm_eff_max = {e_max:.2f}, gemm_tokens_half = {t_half:.0f}")
        for m in (1, 64, 256, 1024, 4096, 16384):
            if m in ms:
                f = 2 * m * nk / t_s[ms == m][0]
                print(f"  m {m:6d}: {f / 1e15:6.3f} PFLOP/s = {f / peak:5.1%} of peak")
    e_med, h_med = np.median(fits, axis=0)
    print(f"suggested (median of {len(fits)} shapes):\n[efficiency.\"{args.device}\".{fmt}]\n"
          f"gemm_eff_max = {e_med:.2f}\ngemm_tokens_half = {h_med:.0f}.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
