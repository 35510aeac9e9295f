"""Measured expert- and data-parallel rows priced by the serving engine, with and without their layouts.

Prints, for every packaged row with ep, dp or pp > 1: its layout (sweepkit.validation.row_layout), the
measured value, the value priced as tensor parallelism only (the row with ep = dp = 1) and with its layout,
then the median |error| of both over the rows each prices, and the wall time.

Usage: PYTHONPATH=. nice python benchmarks/bench_layouts.py [--requests 128]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from sweepkit.validation.measurements import load_measurements
from sweepkit.validation.row_layout import row_layout
from sweepkit.validation.serving_points import MODELLED, serving_status
from sweepkit.validation.serving_runs import evaluate_serving_points


def _price(rows):
    ok = [m for m in rows if serving_status(m) == MODELLED]
    values = evaluate_serving_points(ok) if ok else []
    return {m.row: v for m, v in zip(ok, values)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=128, help="requests simulated per row")
    args = ap.parse_args()
    points, _, _ = load_measurements()
    rows = [dataclasses.replace(m, requests=args.requests) for m in points if max(m.ep, m.dp, m.pp) > 1]
    t0 = time.perf_counter()
    tp_only = _price([dataclasses.replace(m, ep=1, dp=1, pp=1) for m in rows])
    t1 = time.perf_counter()
    laid = _price(rows)
    t2 = time.perf_counter()
    err = lambda v, m: abs(v / m.value_si - 1.0)
    print(f"{'row':>5} {'source':26} {'model':12} {'dev':6} {'metric':16} {'layout':22} {'measured':>10} "
          f"{'tp-only':>10} {'layout':>10}")
    for m in rows:
        try:
            lay = row_layout(m)
            desc = f"{lay.instances}x tp{lay.tp} dp{lay.dp} ep{lay.ep} pp{lay.pp} n{lay.nodes}"
        except Exception as exc:  # noqa: BLE001 - the reason is the report
            desc = "-"
            why = str(exc)
        a, b = tp_only.get(m.row), laid.get(m.row)
        fmt = lambda v: f"{v:10.4g}" if v is not None else f"{'-':>10}"
        print(f"{m.row:5d} {m.source[:26]:26} {m.model[:12]:12} {m.device[:6]:6} {m.metric[:16]:16} {desc:22} "
              f"{m.value_si:10.4g} {fmt(a)} {fmt(b)}")
        if b is None:
            print(f"      {serving_status(m)[:150] if desc != '-' else why[:150]}")
    for name, got in (("tp-only", tp_only), ("layout", laid)):
        errs = [err(v, m) for m in rows if (v := got.get(m.row)) is not None]
        med = statistics.median(errs) if errs else float("nan")
        print(f"{name:8}: {len(errs)} of {len(rows)} rows priced, median |error| {med:.1%}")
    both = [m for m in rows if m.row in tp_only and m.row in laid]
    if both:
        print(f"rows priced both ways ({len(both)}): median |error| tp-only "
              f"{statistics.median(err(tp_only[m.row], m) for m in both):.1%}, layout "
              f"{statistics.median(err(laid[m.row], m) for m in both):.1%}")
    print(f"wall: tp-only {t1 - t0:.0f} s, layout {t2 - t1:.0f} s ({args.requests} requests per row)")


if __name__ == "__main__":
    main()
