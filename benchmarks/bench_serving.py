"""Benchmark: a whole serving grid (default grids/serving-seed.toml; grids/tradeoffs.toml is the 350-point matrix).

Reports, per workload, the task seconds (each task's wall time, summed: the workloads' searches run
concurrently, ``--workers`` tasks in flight, and share the lane threads) and simulated requests and steps
(prefill, decode and mixed) per task second; in total, the process's CPU seconds (and per point),
the wall time and the same rates per wall-second, simulations per second, the programs compiled (or loaded
from the executable cache) and their seconds, and peak RSS. With ``--reference-wall-s S`` and
``--reference-cpu-s C`` (the reference simulator's wall and CPU seconds for the same points, measured on the
same machine) it prints the ratios too. Side by side on a 2-core x86_64 VM, 2026-12-02, the reference took
39.9 s wall and 78.4 CPU-s for the seed's 15 H100 points (``grids/serving-seed.toml`` with
``devices = ["H100"]``) and 187.1 s wall and 323.5 CPU-s for chat's 23 levers (``grids/levers-h100-chat.toml``),
on 2 worker processes (docs/performance.md).

Usage: python benchmarks/bench_serving.py [--grid GRID] [--json OUT] [--workers N] [--warehouse W]
``--warehouse W`` also commits the results there as a serving run (after the timing), so that one run of a long
grid gives both its figures and the matrix (``sweepkit matrix --warehouse W``,
``python benchmarks/compare_reference.py --warehouse W``).
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

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid", nargs="?", default=None)
    ap.add_argument("--grid", dest="grid_opt", default=None, help="the serving grid (default grids/serving-seed.toml)")
    ap.add_argument("--json", default=None, help="write the figures to this JSON file")
    ap.add_argument("--workers", type=int, default=None, help="tasks in flight (default: twice the lane threads, at least 4)")
    ap.add_argument("--reference-wall-s", type=float, default=None,
                    help="the reference simulator's wall seconds for the same points on this machine (prints the ratio)")
    ap.add_argument("--reference-cpu-s", type=float, default=None,
                    help="the reference simulator's CPU seconds for the same points on this machine (prints the ratio)")
    ap.add_argument("--warehouse", default=None, help="also commit the results to this warehouse (after the timing)")
    args = ap.parse_args()

    from sweepkit.jaxcache import enable_persistent_cache

    enable_persistent_cache()
    import jax

    import resource

    from sweepkit.serving.programs import COMPILE_STATS
    from sweepkit.serving.grid import load_serving_grid
    from sweepkit.serving.run import default_workers, run_workloads

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
    tot.update(requests_per_s=tot["requests"] / total, passes_per_s=tot["passes"] / total,
               simulations_per_s=tot["simulations"] / total, compile_programs=COMPILE_STATS["programs"],
               compile_s=COMPILE_STATS["seconds"], peak_rss_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
               cpus=os.cpu_count(),
               backend=jax.default_backend())
    rows.append(tot)
    print(f"total: {tot['points']} points, {tot['simulations']} simulations in {total:.1f} s wall "
          f"({tot['simulations_per_s']:.2f} simulations/s, {tot['requests_per_s']:,.0f} simulated requests/s, "
          f"{tot['passes_per_s']:,.0f} passes/s); {tot['compile_programs']} programs compiled or loaded in "
          f"{tot['compile_s']:.0f} s; peak RSS {tot['peak_rss_gib']:.2f} GiB; on {tot['cpus']} CPUs "
          f"({tot['backend']}, {workers} tasks in flight, {cpu_s:.0f} CPU-s: {cpu_s / tot['points']:.1f} a point)")
    if args.reference_wall_s or args.reference_cpu_s:
        tot.update(reference_wall_s=args.reference_wall_s, reference_cpu_s=args.reference_cpu_s)
        ratios = [f"{name} {ref / mine:.2f}x" for name, ref, mine in
                  (("wall", args.reference_wall_s, total), ("CPU", args.reference_cpu_s, cpu_s)) if ref]
        print(f"against the reference simulator on this machine: {', '.join(ratios)} "
              f"(its seconds / sweepkit's; above 1: sweepkit is faster)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    if args.warehouse:
        _commit(args.warehouse, grid, results, t_all)


def _commit(warehouse: str, grid, results: dict, since_s: float) -> None:
    """Commit the benchmark's results as a serving run, as ``sweepkit simulate`` would (no serving bands)."""
    import pyarrow as pa

    from sweepkit.cli.common import open_warehouse
    from sweepkit.serving.run import result_rows

    serving, capacity = result_rows(results)
    tables = {"serving": pa.Table.from_pylist(serving), "capacity": pa.Table.from_pylist(capacity)}
    run_id = open_warehouse(warehouse).write_run(
        kind="serving", grid_name=grid.name, grid_toml=grid.text, grid_sha256=grid.sha256,
        tables={k: iter(v.to_batches()) for k, v in tables.items()}, since_s=since_s)
    print(f"committed run {run_id} to {warehouse}", flush=True)


if __name__ == "__main__":
    main()
