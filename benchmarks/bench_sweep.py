"""Sweep benchmark: JAX engine vs plain numpy (compute only), and `sweepkit run` vs pyarrow writing alone.

Usage:  python benchmarks/bench_sweep.py [--grid grids/large.toml] [--repeats 3] [--compute-points 4000000]

Prints, measured in one run on the same grid:
  1. compute-only points/s of the JAX engine (jit + vmap, results left on the device) against a numpy
     implementation of the same maths broadcasting over the same axes (sweepkit/sweep/numpy_reference.py),
     on the same leading points of the grid; medians over --repeats, and their ratio (target >= 1.5x);
  2. the end-to-end time of `sweepkit run GRID --force` (grid to committed Parquet, as the CLI reports it,
     into one warehouse; the first run, with empty compilation caches and a new warehouse, is shown apart
     as "cold") against
     the time pyarrow alone needs to write the same result table to Parquet with the same settings
     (the run's own batches, already in memory): as pyarrow writes a table, one ParquetWriter on one
     thread (the target's measure, <= 1.25x), and, stricter, the same batches split over two files on two
     threads as the run itself writes them; the ratios, and the peak resident memory of each process.
These machines are noisy: every figure is a median of --repeats runs, and each ratio the median of the
per-repeat ratios (a run against the writes measured right after it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from statistics import median

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from sweepkit.sweep.numpy_reference import _tables, evaluate_numpy  # noqa: E402
from sweepkit.sweep import engine  # noqa: E402
from sweepkit.sweep.grid import load_grid  # noqa: E402


def compute_only(axes, points: int, repeats: int, chunk_points: int):
    """(jax points/s, numpy points/s) on the first ``points`` grid points, median of ``repeats``."""
    inner = len(axes["gamma"]) * len(axes["alpha"])
    k = max(1, chunk_points // inner)
    radices = tuple(len(axes[a]) for a in engine.OUTER)
    n_outer = min(points // inner, engine.grid_size(axes) // inner)
    n_chunks = max(1, n_outer // k)
    tables = engine.build_tables(axes)
    gmax = engine.gamma_bucket(int(max(axes["gamma"])))

    def run_jax():
        out = None
        for c in range(n_chunks):
            digits = jnp.asarray(engine.mixed_radix_digits(c * k, radices), jnp.int32)
            out = engine.compiled_chunk(tables, digits, radices=radices, k=k, gamma_max=gmax)(tables, digits)
        jax.block_until_ready(out)

    run_jax()                                            # compile once, outside the timing
    jax_s = []
    for _ in range(repeats):
        t = time.perf_counter()
        run_jax()
        jax_s.append(time.perf_counter() - t)

    np_tables = _tables(axes)                            # per-axis lookup tables: built once, like the engine's
    np_s = []
    for _ in range(repeats):
        t = time.perf_counter()
        for c in range(n_chunks):
            evaluate_numpy(axes, c * k, k, dtype=np.float32, tables=np_tables)
        np_s.append(time.perf_counter() - t)
    n = n_chunks * k * inner
    return n / median(jax_s), n / median(np_s), n


def _run_measured(cmd: list[str], env=None) -> tuple[float, float, str]:
    """Run a subprocess; return (wall seconds, peak RSS in GiB, stdout)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    out, err = proc.communicate()
    wall = time.perf_counter() - t
    # ru_maxrss of the children reaped so far is a running max; use a fresh interpreter per measurement.
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err}")
    peak = _child_peak_rss_gib(out)
    return wall, peak, out + err          # the CLI's progress and summary lines go to stderr


def _child_peak_rss_gib(out: str) -> float:
    for line in out.splitlines()[::-1]:
        if line.startswith("PEAK_RSS_KIB="):
            return int(line.split("=")[1]) / 2**20
    return float("nan")


RUN_SCRIPT = textwrap.dedent("""
    import resource, sys
    from sweepkit.cli import main
    try:
        main(sys.argv[1:], standalone_mode=False)
    finally:
        print("PEAK_RSS_KIB=%d" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
""")

WRITE_SCRIPT = textwrap.dedent("""
    import resource, sys, threading, time
    import pyarrow as pa, pyarrow.parquet as pq
    from sweepkit.sweep.engine import iter_decode_chunks
    from sweepkit.sweep.grid import load_grid
    from sweepkit.store import writer as W
    spec = load_grid(sys.argv[1]); out = sys.argv[2]; threads = int(sys.argv[3])
    batches = list(iter_decode_chunks(spec, chunks_multiple_of=W.WRITER_THREADS))   # the run's batches (not timed)
    schema = batches[0].schema
    strings = [f.name for f in schema if W.is_string(f.type)]
    def write(part, path):
        with pq.ParquetWriter(path, schema, compression=W.COMPRESSION, use_dictionary=strings) as w:
            for b in part:
                w.write_batch(b, row_group_size=max(b.num_rows, W.ROW_GROUP_ROWS))   # as the run: one group each
    t = time.perf_counter()
    parts = [batches[i::threads] for i in range(threads)]
    ts = [threading.Thread(target=write, args=(p, f"{out}/part-{i}.parquet")) for i, p in enumerate(parts)]
    [x.start() for x in ts]; [x.join() for x in ts]
    print("WRITE_S=%.6f" % (time.perf_counter() - t))
    print("ROWS=%d" % sum(b.num_rows for b in batches))
    print("PEAK_RSS_KIB=%d" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
""")


def _committed_seconds(out: str) -> float:
    """The CLI's own figure: "N points in X s" = from reading the grid to every file written and the run committed."""
    return float(out.split(" points in ")[1].split(" s")[0])


def end_to_end(grid: Path, repeats: int):
    """(cold run s, warm run s, process wall s, pyarrow 1-thread s, pyarrow 2-thread s, peak RSS by label,
    median of per-repeat ratios, the spread as text)."""
    runs, walls, writes1, writes2, peaks = [], [], [], [], {}
    cold = float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "SWEEPKIT_JAX_CACHE": str(Path(tmp) / "jax-cache")}   # starts empty: run 0 is cold
        wh = Path(tmp) / "wh"            # one warehouse, as a project has: run 0 creates it, later runs add to it
        for r in range(repeats + 1):
            wall, peak, out = _run_measured([sys.executable, "-c", RUN_SCRIPT, "run", str(grid), "--warehouse",
                                             str(wh), "--force", "--limit", "1"], env=env)
            if r == 0:
                cold = _committed_seconds(out)
                continue
            runs.append(_committed_seconds(out))
            walls.append(wall)
            peaks["sweepkit run"] = peak
            for threads, store in ((1, writes1), (2, writes2)):
                out = Path(tmp) / f"pa{r}-{threads}"
                out.mkdir()
                _, peak, text = _run_measured([sys.executable, "-c", WRITE_SCRIPT, str(grid), str(out), str(threads)])
                store.append(float(text.split("WRITE_S=")[1].split()[0]))
                peaks[f"pyarrow write ({threads} thread{'s' if threads > 1 else ''})"] = peak
                shutil.rmtree(out, ignore_errors=True)
    pair1 = median(r / a for r, a in zip(runs, writes1))      # each run against the writes right after it
    pair2 = median(r / b for r, b in zip(runs, writes2))
    spread = (f"runs {min(runs):.2f}-{max(runs):.2f} s, pyarrow 1 thread {min(writes1):.2f}-{max(writes1):.2f} s, "
              f"2 threads {min(writes2):.2f}-{max(writes2):.2f} s")
    return cold, median(runs), median(walls), median(writes1), median(writes2), peaks, (pair1, pair2), spread


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default=str(ROOT / "grids" / "large.toml"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compute-points", type=int, default=4_000_000)
    ap.add_argument("--chunk-points", type=int, default=engine.DEFAULT_CHUNK_POINTS)
    ap.add_argument("--skip-e2e", action="store_true")
    args = ap.parse_args(argv)
    spec = load_grid(args.grid)
    n_total = engine.grid_size(spec.axes)
    print(f"grid {spec.name}: {n_total:,} points; backend {jax.default_backend()}; {os.cpu_count()} CPUs")
    jax_pts, np_pts, n = compute_only(spec.axes, args.compute_points, args.repeats, args.chunk_points)
    print(f"\n1. compute only ({n:,} points, float32, median of {args.repeats})")
    print(f"   {'JAX engine (jit+vmap)':32s} {jax_pts / 1e6:8.1f} M points/s")
    print(f"   {'numpy, same maths and axes':32s} {np_pts / 1e6:8.1f} M points/s")
    print(f"   {'ratio JAX / numpy':32s} {jax_pts / np_pts:8.2f} x   (target >= 1.5x)")
    if args.skip_e2e:
        return
    cold, run_s, wall, w1, w2, peaks, (pair1, pair2), spread = end_to_end(Path(args.grid), args.repeats)
    print(f"\n2. end to end ({n_total:,} rows, median of {args.repeats})")
    print(f"   {'sweepkit run, grid -> committed':36s} {run_s:7.2f} s  {n_total / run_s / 1e6:6.1f} M rows/s"
          f"  peak RSS {peaks['sweepkit run']:.2f} GiB  (compile cache warm)")
    print(f"   {'  same, first run (cold compile)':36s} {cold:7.2f} s")
    print(f"   {'  whole process (imports, headline)':36s} {wall:7.2f} s")
    for label, w in (("pyarrow write (1 thread)", w1), ("pyarrow write (2 threads)", w2)):
        print(f"   {label:36s} {w:7.2f} s  {n_total / w / 1e6:6.1f} M rows/s  peak RSS {peaks[label]:.2f} GiB"
              "  (table held in memory)")
    print(f"   {'ratio run / pyarrow, 1 file':36s} {pair1:7.2f} x   (target <= 1.25x; pyarrow's own write of the "
          f"table: one ParquetWriter, one thread)")
    print(f"   {'ratio run / pyarrow, 2 files':36s} {pair2:7.2f} x   (stricter: the same table split over two "
          f"writer threads, as the run writes it; cold: {cold / w2:.2f} x)")
    print(f"   {'':36s} (ratios: median of the per-repeat ratios, each run against the writes measured right "
          f"after it; {spread})")


if __name__ == "__main__":
    main()
