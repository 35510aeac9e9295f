"""Benchmark: a whole serving grid (default grids/serving-seed.toml; grids/tradeoffs.toml is the 350-point matrix).

Reports, per workload, the task seconds (each task's wall time, summed: the workloads' searches run
concurrently, ``--workers`` tasks in flight, and share the lane threads) and simulated requests and steps
(prefill, decode and mixed) per task second; in total, the process's CPU seconds (and per point),
the wall time and the same rates per wall-second, simulations per second, the programs compiled (or loaded
from the executable cache) and their seconds, peak RSS, and the ratio to the reference simulator's ~18 CPU-s
per point on 2 worker processes (its pure-Python engine: ~1.9 s for one chat simulation at the reference
load, 1,947 requests, 34,343 passes).

Usage: python benchmarks/bench_serving.py [--grid GRID] [--json OUT] [--workers N]
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

REF_CPU_S_PER_POINT = 18.0
"""The reference simulator's CPU time per point (a capacity search and a reference-load run), measured side by
side on this class of 2-core machine: 270 CPU-s for 15 H100 points on 2 worker processes."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid", nargs="?", default=None)
    ap.add_argument("--grid", dest="grid_opt", default=None, help="the serving grid (default grids/serving-seed.toml)")
    ap.add_argument("--json", default=None, help="write the figures to this JSON file")
    ap.add_argument("--workers", type=int, default=None, help="tasks in flight (default: twice the lane threads, at least 4)")
    args = ap.parse_args()

    from sweepkit.jaxcache import enable_persistent_cache

    enable_persistent_cache()
    import jax

    import resource

    from sweepkit.serving.programs import COMPILE_STATS
    from sweepkit.serving.run import default_workers, load_serving_grid, run_workloads

    grid = load_serving_grid(args.grid_opt or args.grid or "grids/serving-seed.toml")
    workers = args.workers or default_workers()
    t_all, cpu0 = time.perf_counter(), time.process_time()
    results = run_workloads(grid, workers=workers)
    total, cpu_s = time.perf_counter() - t_all, time.process_time() - cpu0
    rows = []
    for w in grid.workloads:
        serving, capacity, busy, sims = results[w.name]
        reqs = sum(r["requests"] for r in serving)
        passes = sum(r["steps"] for r in serving)
        rows.append(dict(workload=w.name, points=len(capacity), simulations=sims, busy_s=busy, requests=reqs,
                         passes=passes, requests_per_s=reqs / busy, passes_per_s=passes / busy))
        print(f"{w.name:18s} {len(capacity):3d} points {sims:5d} sims {busy:7.1f} task-s "
              f"{reqs / busy:10,.0f} req/s {passes / busy:12,.0f} passes/s", flush=True)
    tot = dict(workload="total", points=sum(r["points"] for r in rows), simulations=sum(r["simulations"] for r in rows),
               wall_s=total, cpu_s=cpu_s, busy_s=sum(r["busy_s"] for r in rows), workers=workers,
               requests=sum(r["requests"] for r in rows), passes=sum(r["passes"] for r in rows))
    ref_wall = tot["points"] * REF_CPU_S_PER_POINT / 2.0          # its 2 worker processes on 2 cores
    tot.update(requests_per_s=tot["requests"] / total, passes_per_s=tot["passes"] / total,
               simulations_per_s=tot["simulations"] / total, compile_programs=COMPILE_STATS["programs"],
               compile_s=COMPILE_STATS["seconds"], peak_rss_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
               reference_wall_s=ref_wall, speedup_vs_reference=ref_wall / total, cpus=os.cpu_count(),
               backend=jax.default_backend())
    rows.append(tot)
    print(f"total: {tot['points']} points, {tot['simulations']} simulations in {total:.1f} s wall "
          f"({tot['simulations_per_s']:.2f} simulations/s, {tot['requests_per_s']:,.0f} simulated requests/s, "
          f"{tot['passes_per_s']:,.0f} passes/s); {tot['compile_programs']} programs compiled or loaded in "
          f"{tot['compile_s']:.0f} s; peak RSS {tot['peak_rss_gib']:.2f} GiB; the reference ~{ref_wall:.0f} s "
          f"wall on 2 workers -> {tot['speedup_vs_reference']:.2f}x, on {tot['cpus']} CPUs "
          f"({tot['backend']}, {workers} tasks in flight, {cpu_s:.0f} CPU-s: {cpu_s / tot['points']:.1f} a point)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
