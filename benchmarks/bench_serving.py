"""Benchmark: the whole serving grid (grids/serving-seed.toml, 45 points, capacity searches included).

Reports wall time, simulations, simulated requests and simulated passes (prefill + decode steps) per
wall-second, per workload and in total. Reference (seed-system.md / the issue): the seed's pure-Python
simulator needs ~1 s per simulation (chat at the reference load: 1,947 requests, 34,343 passes), 11 s per
capacity search and 17-37 s per point: ~20 CPU-minutes for these 45 points.

Usage: python benchmarks/bench_serving.py [GRID] [--json OUT]
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
"""The seed simulator's CPU time for the same 45 points (the issue: ~20 CPU-minutes)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid", nargs="?", default="grids/serving-seed.toml")
    ap.add_argument("--json", default=None, help="write the figures to this JSON file")
    args = ap.parse_args()

    from sweepkit.jaxcache import enable_persistent_cache

    enable_persistent_cache()
    import jax

    jax.config.update("jax_enable_x64", True)
    from sweepkit.serving.run import load_serving_grid, run_workload

    grid = load_serving_grid(args.grid)
    rows, t_all = [], time.perf_counter()
    for w in grid.workloads:
        t0 = time.perf_counter()
        sims = [0]
        serving, capacity = run_workload(grid, w, progress=lambda n: sims.__setitem__(0, sims[0] + n))
        wall = time.perf_counter() - t0
        reqs = sum(r["requests"] for r in serving)
        passes = sum(r["decode_steps"] + r["prefill_steps"] for r in serving)
        rows.append(dict(workload=w.name, points=len(capacity), simulations=sims[0], wall_s=wall,
                         requests=reqs, passes=passes, requests_per_s=reqs / wall, passes_per_s=passes / wall))
        print(f"{w.name:18s} {len(capacity):3d} points {sims[0]:5d} sims {wall:7.1f} s "
              f"{reqs / wall:10,.0f} req/s {passes / wall:12,.0f} passes/s", flush=True)
    total = time.perf_counter() - t_all
    tot = dict(workload="total", points=sum(r["points"] for r in rows), simulations=sum(r["simulations"] for r in rows),
               wall_s=total, requests=sum(r["requests"] for r in rows), passes=sum(r["passes"] for r in rows))
    tot.update(requests_per_s=tot["requests"] / total, passes_per_s=tot["passes"] / total,
               speedup_vs_seed_cpu=SEED_CPU_S / total, cpus=os.cpu_count(), backend=jax.default_backend())
    rows.append(tot)
    print(f"total: {tot['points']} points, {tot['simulations']} simulations in {total:.1f} s wall "
          f"({tot['requests_per_s']:,.0f} simulated requests/s, {tot['passes_per_s']:,.0f} passes/s); "
          f"seed ~{SEED_CPU_S / 60:.0f} CPU-min -> {tot['speedup_vs_seed_cpu']:.1f}x, on {tot['cpus']} CPUs "
          f"({tot['backend']})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
