"""Uncertainty bands on a serving grid: the ``[serving.bands]`` table and its draws, run as extra lanes.

A serving grid can say how uncertain its inputs are (the syntax and the design of :mod:`sweepkit.sweep.bands`)::

    [serving.bands]
    draws = 16                                         # N draws per (device, lever, workload) point
    seed = 0
    alpha = { low = -0.05, high = 0.05 }               # added to every alpha_i of a speculative lever, clipped
    bandwidth_efficiency = { low = 0.9, high = 1.05 }  # factor on the device's value
    price = { low = 0.8, high = 1.2 }                  # factor on the device's price (cost only)

Draw d is the same for every point (common random numbers), so a lever and its baseline are compared
under the same draw. Each draw of a point is one more configuration of the point's compiled programs (a
draw changes only Policy and Instance data, :class:`sweepkit.serving.config.Draw`):

* online workloads: a capacity search per draw whose first round probes the point's final bracket (lo, the
  highest passing load, and hi, the lowest failing one); a draw whose capacity lies in that bracket is done
  after that round, others grow or shrink by :data:`GROWTH` and bisect as usual. Then one run per draw at
  the workload's reference load (the point's: the offered load does not change with the draw).
* offline workloads: one saturated run per draw.
* ``price`` rescales the cost after the run; a table with ``price`` alone simulates nothing.

With a zero-width range every draw equals its point (the same lanes run on the same data).
The rows go to the ``serving_draws`` table; ``queries/matrix.sql`` turns them into the share of
draws in which a lever is better, worse or the same as the baseline.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from sweepkit.serving.capacity import SLO_ATTAINMENT, search
from sweepkit.serving.config import Config, Draw, grid_points
from sweepkit.serving.lanes import OFFLINE_RATE, run_configs
from sweepkit.serving.metrics import capacity_row, lane_metrics
from sweepkit.sweep.bands import FACTORS, OFFSETS, Bands, parse_bands

PRICE = "price"
SERVING_FACTORS = FACTORS + (PRICE,)
"""Factor parameters of ``[serving.bands]``: the device's (:data:`sweepkit.sweep.bands.FACTORS`) and its price."""
PARAMS = OFFSETS + SERVING_FACTORS
GROWTH = 1.25
"""Step of a draw's capacity search outside its point's bracket (the point's search doubles)."""
MIN_FACTOR = 0.01
"""Drawn factors are clipped to at least this (a normal draw far in its tail would be negative)."""
DRAW_COLUMNS = ("draw", "alpha_offset", "price_factor") + tuple(f"{f}_factor" for f in FACTORS)
"""Columns of a ``serving_draws`` row beyond the ``capacity`` table's."""


def parse_serving_bands(raw: Any, where: str) -> Bands | None:
    """Validate a serving grid's ``[serving.bands]`` table (None when absent); one-line InputErrors otherwise.

    Example:
      >>> b = parse_serving_bands({"draws": 4, "price": {"low": 0.9, "high": 1.1}}, "g.toml")
      >>> b.draws, sorted(b.params), simulates(b)
      (4, ['price'], False)
    """
    return parse_bands(raw, where, table="serving.bands", factors=SERVING_FACTORS)


def simulates(bands: Bands) -> bool:
    """Whether a draw changes the simulation (any parameter but ``price``)."""
    return any(name != PRICE for name in bands.params)


def draws_of(bands: Bands) -> list[Draw]:
    """The N draws of the bands' seeded low-discrepancy design, in order.

    Example:
      >>> d = draws_of(parse_serving_bands({"draws": 2, "alpha": {"low": 0.0, "high": 0.0}}, "g.toml"))
      >>> [(x.index, x.alpha_offset, x.factors) for x in d]
      [(0, 0.0, ()), (1, 0.0, ())]
    """
    s = bands.samples()
    clip = lambda v: max(float(v), MIN_FACTOR)  # noqa: E731
    return [Draw(index=n, alpha_offset=float(s["alpha"][n]) if "alpha" in s else 0.0,
                 factors=tuple((f, clip(s[f][n])) for f in FACTORS if f in s),
                 price_factor=clip(s[PRICE][n]) if PRICE in s else 1.0) for n in range(bands.draws)]


def draw_columns(draw: Draw) -> dict:
    """A draw's columns of a ``serving_draws`` row (:data:`DRAW_COLUMNS`)."""
    factors = dict(draw.factors)
    return dict(draw=draw.index, alpha_offset=draw.alpha_offset, price_factor=draw.price_factor,
                **{f"{f}_factor": float(factors.get(f, 1.0)) for f in FACTORS})


def _drawn(cfg: Config, price: float, idle_w: float, draw: Draw) -> tuple[Config, float, float]:
    """A point's configuration under ``draw``, with its drawn price and idle power."""
    idle_factor = dict(draw.factors).get("idle_w", 1.0)
    return Config(cfg.device, cfg.lever, draw), price * draw.price_factor, idle_w * idle_factor


def brackets(serving: list[dict], capacity: list[dict]) -> dict[tuple, tuple[float, float]]:
    """(device, lever, workload) -> the point search's final bracket (lo, hi) from its rows: lo the capacity,
    hi the lowest failing probe above it (inf when none)."""
    out = {(r["device"], r["lever"], r["workload"]): [r["capacity_per_s"], math.inf] for r in capacity}
    for r in serving:
        key, load = (r["device"], r["lever"], r["workload"]), r["load_per_s"]
        fails = r["slo_attainment"] < SLO_ATTAINMENT or r["stopped_early"]
        if r["purpose"] == "search" and fails and load > out[key][0]:
            out[key][1] = min(out[key][1], load)
    return {k: (lo, hi) for k, (lo, hi) in out.items()}


def first_probes(lo: float, hi: float) -> tuple[float, float]:
    """A draw's first two probes: its point's bracket (hi / 2 when nothing passed, lo twice at the ceiling)."""
    return (lo if lo > 0 else hi / 2.0), (hi if math.isfinite(hi) else lo)


def _device_draws(grid, w, dev: str, draws: list[Draw], bounds: dict, ref_load: float, progress=None) -> list:
    """``serving_draws`` rows of one device's configurations on an online workload."""
    configs, prices, idle = grid_points(grid)
    pts = [i for i, c in enumerate(configs) if c.device == dev]
    drawn = [_drawn(configs[i], prices[i], idle[i], d) for d in draws for i in pts]
    first = np.array([first_probes(*bounds[configs[i].device, configs[i].lever.name, w.name])
                      for _ in draws for i in pts])
    ref = grid.reference_loads.get(w.name)
    caps, best, _ = search(w, grid.cluster, [c for c, _, _ in drawn], [p for _, p, _ in drawn],
                           [i for _, _, i in drawn], start=2.0 * ref if ref else 1.0,
                           rates_per_call=grid.rates_per_call, tolerance=grid.tolerance, progress=progress,
                           first=first, growth=GROWTH, rule=grid.search)
    lanes = run_configs(w, grid.cluster, [c for c, _, _ in drawn], np.full((len(drawn), 1), ref_load),
                        early_stop=False, lean=True)
    if progress:
        progress(len(drawn))
    rows = []
    for k, (cfg, price, idle_w) in enumerate(drawn):
        at_ref = lane_metrics(lanes, k, 0, w, grid.cluster.gpus, idle_w, price)
        rows.append({**capacity_row(w, cfg, caps[k], ref_load, best[k], at_ref, saturated=False),
                     **draw_columns(cfg.draw)})
    return rows


def _offline_draws(grid, w, draws: list[Draw], progress=None) -> list:
    """``serving_draws`` rows of an offline workload: one saturated run per configuration and draw."""
    configs, prices, idle = grid_points(grid)
    drawn = [_drawn(configs[i], prices[i], idle[i], d) for d in draws for i in range(len(configs))]
    lanes = run_configs(w, grid.cluster, [c for c, _, _ in drawn], np.full((len(drawn), 1), OFFLINE_RATE),
                        early_stop=False, lean=True)
    if progress:
        progress(len(drawn))
    rows = []
    for k, (cfg, price, idle_w) in enumerate(drawn):
        m = lane_metrics(lanes, k, 0, w, grid.cluster.gpus, idle_w, price)
        rows.append({**capacity_row(w, cfg, float("nan"), OFFLINE_RATE, m, m, saturated=True),
                     **draw_columns(cfg.draw)})
    return rows


def _priced(capacity: list[dict], draws: list[Draw]) -> list[dict]:
    """Draws of a price-only band: every point's row with its cost scaled by the draw's price factor."""
    return [{**r, "cost_per_mtok_usd": r["cost_per_mtok_usd"] * d.price_factor, **draw_columns(d)}
            for d in draws for r in capacity]


def run_draws(grid, serving: list[dict], capacity: list[dict], progress=None, workers: int = 1) -> list[dict]:
    """The ``serving_draws`` rows of a serving grid with bands, from its point rows (``serving`` and
    ``capacity`` of :func:`sweepkit.serving.run.run_grid`): one row per point and draw.

    Args:
      grid: a :class:`sweepkit.serving.grid.ServingGrid` with ``bands``.
      serving, capacity: the point run's rows (its capacity brackets and reference loads).
      progress: callable(n_simulations).  workers: tasks (a device of a workload) run at once.

    Returns:
      list of dicts: the ``capacity`` columns plus :data:`DRAW_COLUMNS`, ordered by workload, device, draw.
    """
    draws = draws_of(grid.bands)
    if not simulates(grid.bands):
        return _priced(capacity, draws)
    bounds = brackets(serving, capacity)
    ref = {r["workload"]: r["reference_load_per_s"] for r in capacity}
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="sweepkit-draws") as pool:
        jobs = [pool.submit(_offline_draws, grid, w, draws, progress) if w.offline else
                pool.submit(_device_draws, grid, w, dev, draws, bounds, ref[w.name], progress)
                for w in grid.workloads for dev in (("",) if w.offline else grid.devices)]
        return [row for job in jobs for row in job.result()]
