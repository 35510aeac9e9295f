"""Coverage: how many of the TensorRT-LLM 1.0-1.2 perf-overview max-throughput configurations sweepkit expresses.

Reads benchmarks/data/trtllm_perf_overview_configs.csv (configurations only: model, checkpoint, GPU, GPUs,
trtllm-bench --tp / --pp / --ep, attention DP, formats, ISL / OSL; the measured values are an independent
check and are not recorded) and asks sweepkit, row by row, whether it can express each one
(:func:`sweepkit.validation.coverage.why_not`: the model and device resolve, the layout is valid, the serving
engine accepts the cluster with the weights in memory, one attention rank's KV holds a request, one decode
pass at that layout is priced). Prints the share expressible by release, model, device and layout label, the
failures by reason (with the distinct details), which path ``sweepkit validate`` would price the expressible
ones by (the analytic steady state, or the serving engine's simulation for pipeline-parallel rows), and the
total (target >= 80 %), then the wall time. ``--price N`` then prices every expressible row by that path (the
steady state under the framework's shipped profile; the serving engine at N requests a row, reference
constants) and counts the finite positive values, with the time of each path.

Usage: PYTHONPATH=. nice python benchmarks/bench_coverage.py [--file CSV] [--rows] [--price 128]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import math
import time
from pathlib import Path

from sweepkit.validation.coverage import EXPRESSIBLE, as_measurement, parse_deployments, why_not
from sweepkit.validation.profiles import priced_by_profile, steady_row
from sweepkit.validation.serving_runs import evaluate_serving_points

DATA = Path(__file__).parent / "data" / "trtllm_perf_overview_configs.csv"


def _table(title: str, keyed: dict[str, list[bool]]) -> None:
    print(f"\n{title:<44} {'rows':>5} {'expr.':>6} {'share':>7}")
    for key in sorted(keyed):
        ok = keyed[key]
        print(f"{key:<44} {len(ok):>5} {sum(ok):>6} {100.0 * sum(ok) / len(ok):>6.1f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", default=str(DATA), help="configurations CSV (default: %(default)s)")
    ap.add_argument("--rows", action="store_true", help="print every row not expressible")
    ap.add_argument("--price", type=int, default=0, metavar="N",
                    help="price every expressible row as sweepkit validate would (N requests a simulated row)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = parse_deployments(Path(args.file).read_text(encoding="utf-8"), args.file)
    results = [why_not(d, i) for i, d in enumerate(rows, 1)]
    groups = {"release": collections.defaultdict(list), "model": collections.defaultdict(list),
              "device": collections.defaultdict(list), "layout (label)": collections.defaultdict(list)}
    reasons = collections.Counter()
    details = collections.defaultdict(collections.Counter)
    for d, (kind, detail) in zip(rows, results):
        ok = kind == EXPRESSIBLE
        groups["release"][d.release].append(ok)
        groups["model"][d.model].append(ok)
        groups["device"][d.device].append(ok)
        groups["layout (label)"][d.label or f"tp{d.tp} pp{d.pp} ep{d.ep} adp{d.attention_dp}"].append(ok)
        if not ok:
            reasons[kind] += 1
            details[kind][detail] += 1
    for name, keyed in groups.items():
        _table(f"by {name}", keyed)
    print("\nnot expressible, by reason")
    for kind, n in reasons.most_common():
        print(f"  {kind}: {n}")
        for detail, k in details[kind].most_common():
            print(f"    {k:>4} x {detail}")
    paths = collections.Counter("analytic steady state" if steady_row(as_measurement(d)) else "serving engine"
                                for d, (kind, _) in zip(rows, results) if kind == EXPRESSIBLE)
    print("\nexpressible rows, by the path sweepkit validate prices them by")
    for path, n in paths.most_common():
        print(f"  {path}: {n}")
    if args.rows:
        print("\nrows not expressible")
        for i, (d, (kind, detail)) in enumerate(zip(rows, results), 1):
            if kind != EXPRESSIBLE:
                print(f"  {i:>4} {d.release} {d.model} {d.gpus}x{d.device} {d.label} {d.isl}/{d.osl}: {kind}: {detail}")
    ok = sum(kind == EXPRESSIBLE for kind, _ in results)
    print(f"\ntotal: {ok} / {len(rows)} expressible ({100.0 * ok / len(rows):.1f}%; target >= 80%)")
    print(f"wall: {time.perf_counter() - t0:.1f} s")
    if args.price:
        _price([as_measurement(d, i) for i, (d, (kind, _)) in enumerate(zip(rows, results), 1)
                if kind == EXPRESSIBLE], args.price)


def _price(points, requests: int) -> None:
    """Price ``points`` as sweepkit validate would; count the finite positive values of each path."""
    t0 = time.perf_counter()
    steady = priced_by_profile(points, None)
    t1 = time.perf_counter()
    rest = [dataclasses.replace(m, requests=requests) for i, m in enumerate(points) if i not in steady]
    simulated = evaluate_serving_points(rest, None, "reference") if rest else []
    t2 = time.perf_counter()
    good = lambda vs: sum(math.isfinite(v) and v > 0 for v in vs)  # noqa: E731
    print(f"\npriced: steady state {good(steady.values())} / {len(steady)} finite ({t1 - t0:.1f} s), "
          f"serving engine {good(simulated)} / {len(simulated)} finite at {requests} requests ({t2 - t1:.1f} s)")


if __name__ == "__main__":
    main()
