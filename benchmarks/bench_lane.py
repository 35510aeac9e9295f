"""Benchmark: one serving simulation (one lane) of the cluster engine, warm: CPU seconds, wall, iterations.

Simulates configurations of the packaged cluster at a workload's reference load, each as its own lane
(`sweepkit.serving.lanes.run_configs`), ``--repeats`` times after one warm-up call (which compiles), and prints
per lever the median and range of wall and process CPU seconds, the engine's iterations and steps, and CPU
microseconds per iteration. The reference simulator needs ~1.9 s for chat at 1.9375 sessions/s (1,947 requests,
34,343 passes) in one Python process on this class of machine.

``--vmap K`` measures instead why lanes are separate calls and not a ``vmap``: K loads of one lever (0.9-1.1x
``--rate``) run one after the other as single lanes, then as one ``jax.vmap`` of the engine over 2, 4, ... K
loads (a vmapped ``while_loop`` runs until its slowest lane ends and turns every ``lax.cond`` into both
branches), printing microseconds per iteration of each.

Usage: python benchmarks/bench_lane.py [--workload chat] [--rate 1.9375] [--levers baseline,mtp] [--repeats 5]
       python benchmarks/bench_lane.py --levers baseline --vmap 8
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="chat")
    ap.add_argument("--rate", type=float, default=1.9375, help="offered load, per second")
    ap.add_argument("--levers", default="baseline,mtp,disagg-1p1d")
    ap.add_argument("--device", default="H100")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--vmap", type=int, default=0, help="K: compare K single lanes with vmaps over 2..K loads")
    args = ap.parse_args()
    if args.vmap:
        return vmap_lanes(args)
    import numpy as np

    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.lanes import run_configs
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.metrics import lane_metrics
    from sweepkit.serving.workloads import load_workloads

    w, cl, lv = load_workloads()[args.workload], load_cluster(), load_levers()
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, {datetime.date.today()}: {args.workload} at "
          f"{args.rate} /s on {args.device}, {args.repeats} repeats after a warm-up")
    for name in args.levers.split(","):
        cfg = [Config(args.device, lv[name])]
        rate = np.full((1, 1), args.rate)
        run_configs(w, cl, cfg, rate, early_stop=False)
        walls, cpus = [], []
        for _ in range(args.repeats):
            t, c = time.perf_counter(), time.process_time()
            lanes = run_configs(w, cl, cfg, rate, early_stop=False)
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        m = lane_metrics(lanes, 0, 0, w, cl.gpus, 0.0, 1.0)
        cpu = statistics.median(cpus)
        print(f"{name:20s} wall {statistics.median(walls):6.2f} s ({min(walls):.2f}-{max(walls):.2f}), CPU "
              f"{cpu:6.2f} s ({min(cpus):.2f}-{max(cpus):.2f}), {m['iterations']:,} iterations, "
              f"{int(m['steps']):,} steps, {1e6 * cpu / m['iterations']:.0f} CPU-us/iteration, "
              f"{m['requests']:,} requests", flush=True)


def vmap_lanes(args) -> None:
    """K loads of one lever as K single-lane calls, then as vmaps of the engine over 2, 4, ... K loads."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from sweepkit.serving import lanes as L
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.engine import simulate
    from sweepkit.serving.config import Config
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads

    w, cl = load_workloads()[args.workload], load_cluster()
    cfg = Config(args.device, load_levers()[args.levers.split(",")[0]])
    rates = args.rate * np.linspace(0.9, 1.1, args.vmap)
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, {datetime.date.today()}: {args.workload}, "
          f"{cfg.lever.name} on {args.device}, {args.vmap} loads {rates[0]:.4g}-{rates[-1]:.4g} /s")
    with jax.enable_x64(True):
        pol, req, loads, shape = L.lane_inputs(w, cl, cfg, rates)
        one = jax.jit(lambda p, q, ld: simulate(p, q, ld, shape))
        jax.block_until_ready(one(pol, req, loads[0]))
        t, its = time.perf_counter(), 0
        for ld in loads:
            its += int(jax.block_until_ready(one(pol, req, ld)).iters)
        dt = time.perf_counter() - t
        print(f"single lanes, one after the other: {dt:.2f} s, {its:,} iterations, {1e6 * dt / its:.0f} us/iteration")
        k = 2
        while k <= args.vmap:
            many = jax.jit(jax.vmap(lambda p, q, ld: simulate(p, q, ld, shape), in_axes=(None, None, 0)))
            stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *loads[:k])
            jax.block_until_ready(many(pol, req, stacked))
            t = time.perf_counter()
            out = jax.block_until_ready(many(pol, req, stacked))
            dt, top = time.perf_counter() - t, int(out.iters.max())
            print(f"vmap over {k} loads: {dt:.2f} s, {top:,} iterations of the batch, {1e6 * dt / top:.0f} us each "
                  f"({1e6 * dt / int(out.iters.sum()):.0f} us per lane-iteration)", flush=True)
            k *= 2


if __name__ == "__main__":
    main()
