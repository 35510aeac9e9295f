"""Benchmark: the whole serving grid (grids/serving-seed.toml, 45 points, capacity searches included).

Reports, per workload, the busy seconds (summed over its tasks: the workloads' searches run concurrently on
``--workers`` threads) and simulated requests and steps (prefill, decode and mixed) per busy second; in total,
the wall time and the same rates per wall-second. Reference: the reference simulator's pure-Python
implementation needs ~1 s per simulation (chat at the reference load: 1,947 requests, 34,343 passes), 11 s per
capacity search and 17-37 s per point: ~20 CPU-minutes for these 45 points.

Usage: python benchmarks/bench_serving.py [GRID] [--json OUT] [--workers N]
The first run includes XLA compilation; JAX's persistent cache (~/.cache/sweepkit/jax) makes later runs of
the same shapes skip it (set SWEEPKIT_JAX_CACHE=off for a cold measurement).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SEED_CPU_S = 20 * 60.0
"""The reference simulator's CPU time for the same 45 points (~20 CPU-minutes, as its sweep reports)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid", nargs="?", default="grids/serving-seed.toml")
    ap.add_argument("--json", default=None, help="write the figures to this JSON file")
    ap.add_argument("--workers", type=int, default=None, help="concurrent simulator calls (default: one per core on CPU)")
    args = ap.parse_args()

    from sweepkit.jaxcache import enable_persistent_cache

    enable_persistent_cache()
    import jax

    jax.config.update("jax_enable_x64", True)
    from sweepkit.serving.run import default_workers, load_serving_grid, run_workloads

    grid = load_serving_grid(args.grid)
    workers = args.workers or default_workers()
    t_all = time.perf_counter()
    results = run_workloads(grid, workers=workers)
    total = time.perf_counter() - t_all
    rows = []
    for w in grid.workloads:
        serving, capacity, busy, sims = results[w.name]
        reqs = sum(r["requests"] for r in serving)
        passes = sum(r["steps"] for r in serving)
        rows.append(dict(workload=w.name, points=len(capacity), simulations=sims, busy_s=busy, requests=reqs,
                         passes=passes, requests_per_s=reqs / busy, passes_per_s=passes / busy))
        print(f"{w.name:18s} {len(capacity):3d} points {sims:5d} sims {busy:7.1f} s busy "
              f"{reqs / busy:10,.0f} req/s {passes / busy:12,.0f} passes/s", flush=True)
    tot = dict(workload="total", points=sum(r["points"] for r in rows), simulations=sum(r["simulations"] for r in rows),
               wall_s=total, busy_s=sum(r["busy_s"] for r in rows), workers=workers,
               requests=sum(r["requests"] for r in rows), passes=sum(r["passes"] for r in rows))
    tot.update(requests_per_s=tot["requests"] / total, passes_per_s=tot["passes"] / total,
               speedup_vs_seed_cpu=SEED_CPU_S / total, cpus=os.cpu_count(), backend=jax.default_backend())
    rows.append(tot)
    print(f"total: {tot['points']} points, {tot['simulations']} simulations in {total:.1f} s wall "
          f"({tot['requests_per_s']:,.0f} simulated requests/s, {tot['passes_per_s']:,.0f} passes/s); "
          f"seed ~{SEED_CPU_S / 60:.0f} CPU-min -> {tot['speedup_vs_seed_cpu']:.1f}x, on {tot['cpus']} CPUs "
          f"({tot['backend']}, {workers} worker threads, {tot['busy_s']:.0f} busy s)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
