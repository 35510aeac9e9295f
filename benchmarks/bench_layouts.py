"""Measured expert- and data-parallel rows priced by the serving engine, with and without their layouts.

Prints, for every packaged row with ep, dp or pp > 1: its layout (sweepkit.validation.row_layout), the
measured value, the value priced as tensor parallelism only (the row with ep = dp = 1) and with its layout,
then the median |error| of both over the rows each prices, and the wall time. Then LMSYS's 96-H100
DeepSeek-V3 decode pool (EP72 over 9 nodes, 256 rows of 2,000 cached tokens per GPU: 22,282 output tok/s
per node, lmsys.org/blog/2025-05-05-large-scale-ep), which its rows cannot express (72 ranks do not divide
the 256 routed experts; the deployment adds 32 redundant ones), priced as one decode step of the nearest
layout that holds the same 4 expert slots per GPU: DEP64 over 8 nodes on InfiniBand NDR.

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


LMSYS_DECODE_TOK_S_PER_NODE = 22282.0
"""Output tokens/s per 8-GPU node of LMSYS's EP72 decode pool at 256 rows per GPU, 2,000-token inputs."""


def lmsys_decode() -> None:
    """One DEP64 decode step of DeepSeek-V3 FP8 on H100 at 256 rows per GPU, per-node tokens/s (module doc)."""
    import jax
    import jax.numpy as jnp

    from sweepkit.catalogue import get_device, get_model
    from sweepkit.costmodel.layout import IMBALANCE, IMBALANCE_EPLB, make_layout
    from sweepkit.costmodel.passes import decode_work
    from sweepkit.costmodel.steps import instance, target_pass_cost

    dev, model, ep, rows = get_device("H100"), get_model("deepseek-v3"), 64, 256
    with jax.enable_x64(True):
        f = jnp.float64
        for name, imb in (("EPLB", IMBALANCE_EPLB), ("no balancer", IMBALANCE)):
            lay = make_layout(dev, model, 1, dp=ep, ep=ep, imbalance=imb, compute_format="fp8", gpus_per_node=8,
                              dtype=f)
            inst = instance(dev, model, None, 1, "fp8", "fp8", "fp8", dtype=f, layout=lay)
            b = rows * ep
            t_s = float(target_pass_cost(inst, decode_work(f(b * 2000.0), f(b))).t_s)
            per_node = 8 * rows / t_s
            print(f"LMSYS decode, DEP64 proxy, I = {imb} ({name}): step {t_s * 1e3:.1f} ms, {per_node:,.0f} tok/s "
                  f"per node vs {LMSYS_DECODE_TOK_S_PER_NODE:,.0f} measured ({per_node / LMSYS_DECODE_TOK_S_PER_NODE - 1:+.1%})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=128, help="requests simulated per row")
    ap.add_argument("--lmsys-only", action="store_true", help="only the LMSYS decode figure")
    args = ap.parse_args()
    lmsys_decode()
    if args.lmsys_only:
        return
    points, _, _ = load_measurements()
    rows = [dataclasses.replace(m, requests=args.requests) for m in points if max(m.ep, m.dp, m.pp) > 1]
    t0 = time.perf_counter()
    tp_only = _price([dataclasses.replace(m, ep=1, dp=1, pp=1) for m in rows])
    t1 = time.perf_counter()
    laid = _price(rows)
    t2 = time.perf_counter()
    def err(v, m):
        return abs(v / m.value_si - 1.0)
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
        def fmt(v):
            return f"{v:10.4g}" if v is not None else f"{'-':>10}"
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
