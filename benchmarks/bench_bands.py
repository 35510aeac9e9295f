"""Bands benchmark: a decode grid with N draws per point against the same grid without bands.

Usage:  python benchmarks/bench_bands.py [--grid GRID.toml] [--draws 256] [--repeats 3]

Without --grid: MID_GRID below (16,200 points: 3 devices x 2 models x 3 drafts x 2 TP x 10 batches x
3 contexts x 5 gammas x 3 alphas).

Prints, for the grid as it is and with a ``[bands]`` table of --draws draws (alpha offset +-0.05, HBM
bandwidth and compute efficiency factors 0.9..1.1) appended: the time to evaluate the grid into Arrow
batches (compile excluded: one warm-up pass first) and the time of a full run into a fresh warehouse
(evaluate, write Parquet, commit); medians of --repeats, and the ratio banded / plain, to be set against
--draws (the bands evaluate every point N more times in the same vmapped program).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweepkit.store import Warehouse  # noqa: E402
from sweepkit.sweep.engine import iter_decode_chunks  # noqa: E402
from sweepkit.sweep.grid import parse_grid  # noqa: E402

MID_GRID = """name = "mid"
description = "a mid-size decode grid for the bands benchmark"
[axes]
device = ["H100", "A100", "B200"]
model = ["llama-3-8b", "llama-3-70b"]
draft = ["none", "mtp", "llama-3.2-1b"]
tp = [1, 2]
batch = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
context = [512, 2048, 8192]
gamma = [1, 2, 3, 4, 5]
alpha = [0.6, 0.7, 0.8]
"""

BANDS = """
[bands]
draws = {draws}
seed = 0
alpha = {{ low = -0.05, high = 0.05 }}
bandwidth_efficiency = {{ low = 0.9, high = 1.1 }}
flops_efficiency = {{ low = 0.9, high = 1.1 }}
"""


def timed(spec, repeats: int) -> tuple[float, float]:
    """(median s to evaluate into batches, median s of a full run into a new warehouse)."""
    sum(b.num_rows for b in iter_decode_chunks(spec))                         # compile, once
    evaluate, run = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        sum(b.num_rows for b in iter_decode_chunks(spec))
        evaluate.append(time.perf_counter() - t)
        with tempfile.TemporaryDirectory() as root:
            t = time.perf_counter()
            Warehouse(root).write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text,
                                      grid_sha256=spec.sha256, tables={"decode": iter_decode_chunks(spec)})
            run.append(time.perf_counter() - t)
    return median(evaluate), median(run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default=None, help="a decode grid file (default: MID_GRID)")
    ap.add_argument("--draws", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    text = MID_GRID if args.grid is None else Path(args.grid).read_text(encoding="utf-8")
    where = args.grid or "MID_GRID"
    plain = parse_grid(text, where)
    banded = parse_grid(text + BANDS.format(draws=args.draws), where)
    e0, r0 = timed(plain, args.repeats)
    e1, r1 = timed(banded, args.repeats)
    print(f"grid {where}: {plain.n_points:,} points; bands: {args.draws} draws per point")
    print(f"evaluate into batches   plain {e0:8.3f} s   banded {e1:8.3f} s   ratio {e1 / e0:6.1f}x")
    print(f"full run (commit)       plain {r0:8.3f} s   banded {r1:8.3f} s   ratio {r1 / r0:6.1f}x")
    print(f"against {args.draws}x: the banded grid costs {r1 / r0 / args.draws:.3f} of {args.draws} plain grids")


if __name__ == "__main__":
    main()
