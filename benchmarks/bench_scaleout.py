"""Overhead of the scale-out executors: local parts vs Ray with 1 and 2 workers, per task and in total.

    python benchmarks/bench_scaleout.py [--grid grids/seed.toml] [--chunk-points 1 8] [--repeats 3]

For each chunk size (1 point per part: 60 tasks on the seed grid; 8: 7 tasks) it runs the decode grid
into a fresh warehouse with the local executor and with Ray on a local cluster of 1 and 2 CPUs (the
cluster is started once per worker count and its start is timed apart), and prints the median and range
of the total wall time (plan -> committed), of the time a task spends inside its worker, and of the
per-task overhead ``(total - sum(task) / workers) / tasks``. The first Ray run of a cluster also loads JAX
and the compiled chunk in each worker; it is reported apart ("cold").
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _stats(xs: list[float]) -> str:
    return f"median {statistics.median(xs):8.3f}  range {min(xs):.3f}-{max(xs):.3f}"


def _once(spec, chunk_points: int, executor) -> tuple[float, list[float]]:
    from sweepkit.scale.coordinator import run_parts
    from sweepkit.scale.work import DecodeWork
    from sweepkit.store import Warehouse

    folder = tempfile.mkdtemp(prefix="bench-scaleout-")
    try:
        marks = [time.perf_counter()]
        t0 = marks[0]
        run_parts(DecodeWork(spec, chunk_points), Warehouse(folder), executor, grid_name=spec.name,
                  grid_toml=spec.toml_text, grid_sha256=spec.sha256,
                  on_done=lambda t: marks.append(time.perf_counter()))
        total = time.perf_counter() - t0
        timings = getattr(executor, "timings", None)
        if timings:
            per_task = [s for _, s, _ in timings]
            executor.timings = []
        else:
            per_task = [b - a for a, b in zip(marks, marks[1:])]
        return total, per_task
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _report(label: str, runs: list[tuple[float, list[float]]], workers: int) -> None:
    totals = [t for t, _ in runs]
    tasks = [x for _, xs in runs for x in xs]
    n = len(runs[0][1])
    overhead = [(t - sum(xs) / workers) / len(xs) for t, xs in runs]
    print(f"  {label:<22} tasks {n:3d}  total s {_stats(totals)}")
    print(f"  {'':<22}            task s  {_stats(tasks)}   overhead/task s {_stats(overhead)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default=str(ROOT / "grids" / "seed.toml"))
    ap.add_argument("--chunk-points", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import jax
    import ray

    from sweepkit.jaxcache import enable_persistent_cache
    from sweepkit.scale.executors import LocalExecutor, RayExecutor
    from sweepkit.sweep.grid import load_grid

    enable_persistent_cache()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    spec = load_grid(args.grid)
    print(f"bench_scaleout: {spec.name} ({spec.n_points} points), {platform.node()}, {os.cpu_count()} CPUs, "
          f"jax {jax.__version__} ({jax.default_backend()}), ray {ray.__version__}, "
          f"{dt.date.today().isoformat()}, {args.repeats} repeats")
    _once(spec, args.chunk_points[0], LocalExecutor())               # compile once (kept in the cache)
    for chunk in args.chunk_points:
        print(f"chunk_points {chunk}:")
        _report("local", [_once(spec, chunk, LocalExecutor()) for _ in range(args.repeats)], 1)
    for workers in (1, 2):
        t0 = time.perf_counter()
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        print(f"ray, {workers} worker(s): cluster start {time.perf_counter() - t0:.2f} s")
        try:
            for k, chunk in enumerate(args.chunk_points):
                ex = RayExecutor(workers=workers)
                if k == 0:
                    _report(f"ray {workers}w chunk {chunk} cold", [_once(spec, chunk, ex)], workers)
                _report(f"ray {workers}w chunk {chunk}", [_once(spec, chunk, ex) for _ in range(args.repeats)],
                        workers)
        finally:
            ray.shutdown()


if __name__ == "__main__":
    main()
