"""Benchmark: one serving simulation (one lane) of the cluster engine, warm: CPU seconds, wall, iterations.

Simulates configurations of the packaged cluster at a workload's reference load, each as its own lane
(`sweepkit.serving.lanes.run_configs`), ``--repeats`` times after one warm-up call (which compiles), and prints
per lever the median and range of wall and process CPU seconds, the engine's iterations and steps, and CPU
microseconds per iteration. The reference simulator needs ~1.9 s for chat at 1.9375 sessions/s (1,947 requests,
34,343 passes) in one Python process on this class of machine.

Usage: python benchmarks/bench_lane.py [--workload chat] [--rate 1.9375] [--levers baseline,mtp] [--repeats 5]
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
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
