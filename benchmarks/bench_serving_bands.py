"""Serving bands benchmark: a tiny serving grid with N draws per point against the same grid without bands.

Usage:  python benchmarks/bench_serving_bands.py [--draws 8] [--repeats 3] [--seeds N]

The grid: tests/grids/bands-workloads.toml's tiny-ok workload (single-turn, 64-token prompts, 24-token
outputs) on tests/grids/tiny-cluster.toml (Llama-3-8B, one H100), baseline against MTP, tolerance 0.1.
The bands: alpha offset +-0.1, HBM bandwidth efficiency 0.9..1.1, price 0.8..1.2.

Prints the wall time of ``run_grid`` (simulations only, nothing written; compiled programs warm: one pass of
each first) without bands and with ``--draws`` draws, medians of ``--repeats``, and their ratio. With
``--seeds N`` it also runs the bands at N draws under seeds 0 and 1, commits both to a scratch warehouse and
prints each matrix cell's share of draws agreeing with its verdict under the two seeds.
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

GRID = f"""name = "bench-bands"
[serving]
workloads = ["tiny-ok"]
levers = ["baseline", "mtp"]
devices = ["H100"]
workloads_file = "{ROOT / 'tests/grids/bands-workloads.toml'}"
cluster_file = "{ROOT / 'tests/grids/tiny-cluster.toml'}"
rates_per_call = 2
tolerance = 0.1
"""
BANDS = """[serving.bands]
draws = {draws}
seed = {seed}
alpha = {{ low = -0.1, high = 0.1 }}
bandwidth_efficiency = {{ low = 0.9, high = 1.1 }}
price = {{ low = 0.8, high = 1.2 }}
"""


def grid(folder: Path, draws: int | None, seed: int = 0):
    from sweepkit.serving.grid import load_serving_grid

    path = folder / f"g-{draws}-{seed}.toml"
    path.write_text(GRID + ("" if draws is None else BANDS.format(draws=draws, seed=seed)))
    return load_serving_grid(path)


def timed(g, repeats: int) -> float:
    """Median wall seconds of run_grid(g), after one warm-up pass."""
    from sweepkit.serving.run import run_grid

    run_grid(g)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run_grid(g)
        times.append(time.perf_counter() - t)
    return median(times)


def shares(folder: Path, draws: int) -> None:
    """Each matrix cell's share of draws agreeing with its verdict under seeds 0 and 1."""
    from sweepkit.serving.run import run_grid
    from sweepkit.store import Warehouse, run_query

    wh = Warehouse(folder / "wh")
    out = {}
    for seed in (0, 1):
        g = grid(folder, draws, seed)
        tables = run_grid(g)
        run_id = wh.write_run(kind="serving", grid_name=g.name, grid_toml=g.text, grid_sha256=g.sha256,
                              tables={k: iter(v.to_batches()) for k, v in tables.items()})
        out[seed] = {(r["metric"]): r for r in run_query(wh, "matrix", {"run_id": run_id}).to_pylist()}
    for metric, a in out[0].items():
        b = out[1][metric]
        print(f"{metric:18s} seed 0: {a['verdict_text']:14s} seed 1: {b['verdict_text']:14s} "
              f"share_better {a['share_better']:.3f} / {b['share_better']:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=0, help="also compare two seeds' shares at this many draws")
    args = ap.parse_args()
    from sweepkit.jaxcache import enable_persistent_cache

    enable_persistent_cache()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain = timed(grid(folder, None), args.repeats)
        banded = timed(grid(folder, args.draws), args.repeats)
        print(f"no bands: {plain:.2f} s; {args.draws} draws: {banded:.2f} s; ratio {banded / plain:.2f} "
              f"(median of {args.repeats}, programs warm)")
        if args.seeds:
            shares(folder, args.seeds)


if __name__ == "__main__":
    main()
