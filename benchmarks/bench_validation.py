"""Accuracy against the packaged public measurements, per slice, and the time `sweepkit validate` takes.

    python benchmarks/bench_validation.py [--measurements FILE] [--split test] [--requests N] [--table table.json]
                                          [--source trtllm-online-v0.14] [--profile reference|NAME|FILE]
    python benchmarks/bench_validation.py --pairs                      # the lever pairs alone
    python benchmarks/bench_validation.py --from-table table.json      # re-print without simulating

Prints the accuracy targets (docs/validation.md): median |error| over every modelled row and over the
TensorRT-LLM rows of the test split (not fitted on), per slice (device x model class x weight format x
framework x metric), latency-under-load median |error| on TTFT and on TPOT / ITL, and the sign agreement of
lever pairs whose measured change is beyond +-5 %, and per lever family the pairs expressed, their sign
agreement and median |size error| (predicted - measured change, percentage points). Then the wall and CPU time of pricing every row and the
rows not modelled, by reason. ``--table`` keeps the priced rows (JSON) for ``--from-table``. ``--source``
keeps the rows of one source; ``--profile`` as ``sweepkit validate --profile`` (default: each row's
framework's shipped profile, in the steady state and in the serving engine; ``reference``: none).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--measurements", default=None, help="measurement CSV (default: the packaged sets)")
    ap.add_argument("--requests", type=int, default=None, help="most requests simulated per serving point")
    ap.add_argument("--split", choices=["train", "test", "check"], default=None, help="only the rows of this split")
    ap.add_argument("--table", default=None, help="write the priced rows here (JSON)")
    ap.add_argument("--from-table", default=None, help="read priced rows from a --table file instead")
    ap.add_argument("--source", default=None, help="only the rows of this source")
    ap.add_argument("--pairs", action="store_true",
                    help="only the rows of lever pairs; the serving engine simulates only rows of frameworks with a "
                         "shipped profile (a pair switching to another framework is not expressed whatever its value)")
    ap.add_argument("--profile", default=None, help="reference, a profile file, or a shipped framework's name "
                                                      "(default: each row's framework's shipped profile)")
    args = ap.parse_args(argv)

    from sweepkit.validation.summary import by_slice, framework_family, markdown, pair_families, pairs, targets

    if args.from_table:
        with open(args.from_table, encoding="utf-8") as f:
            table = json.load(f)
        wall = cpu = float("nan")
    else:
        import dataclasses

        from sweepkit.cli.validate import RowProgress
        from sweepkit.validation import MODELLED, evaluate_points, load_measurements, status
        from sweepkit.validation.measurements import PER_PASS
        from sweepkit.validation.store import rows

        t0, c0 = time.perf_counter(), time.process_time()
        points, name, sha = load_measurements(args.measurements)
        points = [m for m in points if args.split in (None, m.split) and args.source in (None, m.source)]
        if args.requests:
            points = [dataclasses.replace(m, requests=min(m.requests or args.requests, args.requests))
                      for m in points]
        progress = RowProgress(sum(m.metric not in PER_PASS and status(m) == MODELLED for m in points))
        from sweepkit.serving.profile import REFERENCE, resolve_profile

        profile = args.profile if args.profile in (None, REFERENCE) else resolve_profile(args.profile)[0]
        if args.pairs:
            from sweepkit.catalogue.efficiency import SHIPPED, framework_key

            points = [m for m in points if m.pair_id]
            simulated = [framework_key(m.framework) in SHIPPED for m in points]
            values = [None] * len(points)
            for flag in (True, False):
                idx = [i for i, s in enumerate(simulated) if s == flag]
                for i, v in zip(idx, evaluate_points([points[i] for i in idx], serving=flag, profile=profile)):
                    values[i] = v
        else:
            values = evaluate_points(points, progress=progress, profile=profile)
        table = rows(points, values, name, sha, profile=profile)
        if args.pairs:
            from sweepkit.validation.store import NO_VALUE, NOT_SIMULATED

            for r, sim in zip(table, simulated):
                r["status"] = NOT_SIMULATED if (not sim and r["status"] == NO_VALUE) else r["status"]
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if args.table:
            with open(args.table, "w", encoding="utf-8") as f:
                json.dump(table, f)

    t = targets(table)
    print(f"rows {len(table)} (split {args.split or 'all'}), modelled {t['overall']['n']}; wall {wall:.0f} s, "
          f"CPU {cpu:.0f} s (requests cap {args.requests or 'default'}, {os.cpu_count()} CPUs)")
    for label, key in (("overall", "overall"), ("TensorRT-LLM test split", "tensorrt_llm_test"),
                       ("TTFT under load", "ttft"), ("TPOT / ITL under load", "tpot_itl")):
        s = t[key]
        med = "-" if s["median_abs_error_pct"] is None else f"{s['median_abs_error_pct']:.1f}%"
        bias = "-" if s["bias_pct"] is None else f"{s['bias_pct']:+.1f}%"
        print(f"  {label:28s} n={s['n']:4d}  median |error| {med:>7s}  bias {bias:>7s}")
    print(f"  lever pairs: signs agree {t['pairs_sign_agree']} of {t['pairs_counted']} (|measured change| > 5%); "
          f"{t['pairs_expressed']} of {t['pairs']} pairs expressed")
    for f in pair_families(pairs(table)):
        size = "-" if f["median_abs_size_error_pct"] is None else f"{f['median_abs_size_error_pct']:.1f} pts"
        print(f"    {f['lever_family']:40s} pairs {f['pairs']:3d}  expressed {f['expressed']:3d}  "
              f"signs agree {f['agree']:3d} of {f['counted']:3d}  median |size error| {size}")
    print("\nTensorRT-LLM test split, per slice:")
    trt = [r for r in table if framework_family(r["framework"]) == "TensorRT-LLM" and r["split"] == "test"]
    for s in by_slice(trt):
        print(f"  {s['device']:6s} {s['model_class']:5s} {s['weight_format']:5s} {s['metric']:22s} n={s['n']:4d}  "
              f"median |error| {s['median_abs_error_pct']:6.1f}%  bias {s['bias_pct']:+6.1f}%")
    print("\nNot modelled, by reason:")
    for why, n in collections.Counter(r["status"] for r in table if r["status"] != "modelled").most_common():
        print(f"  {n:4d} {why}")
    print("\n" + markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
