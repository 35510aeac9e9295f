"""Vectorized capacity search: the highest load at which >= 90% of the window meets both SLOs, to within 2%.

Every round simulates R candidate loads for every configuration in ONE compiled call, then narrows each
configuration's bracket [highest passing load, lowest failing load above it]:

1. 12 loads geometric over [1/32, 32] per second with at most 1,024 sessions per run (enough to overload
   the cluster at high loads; fewer would hold only a harmless burst): a coarse bracket. A capped run is
   optimistic (a shorter run builds a shorter queue), so only its lowest failing load carries over, as an
   upper bound that a full-size run must confirm;
2. R = 5 loads geometric strictly inside the bracket (full sessions per run), repeated until
   (hi - lo) / hi <= 2% (a 1.9x coarse bracket converges in two rounds: 1.9^(1/36) - 1 = 1.8%).

A round whose every load fails steps one coarse ratio (1.878x) down: R loads inside (hi / 1.878, hi); one whose
every load passes below an open-ended bracket goes up to 8x. Lanes that have surely failed stop early
(:func:`sweepkit.serving.cluster_sim.step`: the cluster's misses so far plus requests already waiting longer
than the TTFT SLO, against the largest window still possible), so overloaded candidates are cheap. Attainment is not strictly monotone in load (finite
samples); the bracket takes the lowest failing load above the highest passing one below it, and noise
bounds are checked in the tests.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sweepkit.serving.config import Config
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.workloads import Workload

SLO_ATTAINMENT = 0.90
"""Share of the measured window that must meet both SLOs (DistServe's goodput rule)."""
TOLERANCE = 0.02
"""Relative width of the final bracket: (hi - lo) / hi."""
COARSE_STEP = 1024.0 ** (1.0 / 11.0)
"""Ratio between neighbouring loads of the coarse round (12 loads over [1/32, 32]): 1.878."""


@dataclasses.dataclass
class Bracket:
    lo: float             # highest passing load found (0: none yet)
    hi: float             # lowest failing load above lo (inf: none yet)
    best: dict | None     # metrics at lo
    verified: bool = True  # hi failed a full-size run (False: hi comes from the coarse round only)


def _update(b: Bracket, rates: np.ndarray, passed: np.ndarray, metrics: list[dict]) -> Bracket:
    order = np.argsort(rates)
    rates, passed = rates[order], passed[order]
    metrics = [metrics[i] for i in order]
    lo, hi, best, verified = b.lo, b.hi, b.best, b.verified
    for r, ok, m in zip(rates, passed, metrics):
        if ok and r > lo and r < hi:
            lo, best = r, m
    fails = [r for r, ok in zip(rates, passed) if not ok and r > lo]
    if fails and min(fails) <= hi:
        hi, verified = min(fails), True
    return Bracket(lo, hi, best, verified)


def _next_rates(b: Bracket, n: int, widen: float = COARSE_STEP) -> np.ndarray:
    """The next round's loads: ``n`` geometric inside the bracket; a one-sided bracket steps ``widen`` x out.

    Nothing passed yet: n loads strictly inside (hi / widen, hi) (a capped coarse run over-states capacity by
    less than one coarse step in practice, so the next bracket is usually that interval's sixth root).
    Everything passed: n loads up to lo x 8. A bracket narrow enough whose hi only the coarse round failed
    simulates hi itself at full size.
    """
    if b.lo <= 0:   # nothing passed yet: go lower
        return np.geomspace(b.hi / widen, b.hi, n + 2)[1:-1]
    if not np.isfinite(b.hi):  # everything passed: go higher
        return np.geomspace(b.lo, b.lo * 8.0, n + 1)[1:]
    if not b.verified and (b.hi - b.lo) / b.hi <= TOLERANCE:
        return np.geomspace(b.lo, b.hi, n + 1)[1:]
    return np.geomspace(b.lo, b.hi, n + 2)[1:-1]


def _passes(m: dict) -> bool:
    return m["attainment"] >= SLO_ATTAINMENT and not m["stopped_early"]


def _converged(b: Bracket) -> bool:
    return b.lo > 0 and np.isfinite(b.hi) and b.verified and (b.hi - b.lo) / b.hi <= TOLERANCE


def search(w: Workload, cluster, configs: list[Config], prices: list[float], idle_w: list[float],
           rates_per_call: int = 5, coarse_rates: int = 12, progress=None, max_rounds: int = 8):
    """Capacity of every configuration for workload ``w`` (not offline).

    Args:
      w, cluster: the workload and the cluster.  configs: (device, lever) points.
      prices, idle_w: per configuration, USD per GPU-hour and per-GPU idle watts.
      rates_per_call: candidate loads per configuration per full round (each round shrinks the bracket's
        ratio to its (rates_per_call + 1)-th root).
      coarse_rates: loads of the first, coarse round over [1/32, 32] (min_sessions sessions per run).
      progress: callable(n_simulations) after each round.

    Returns:
      (capacities [C], metrics at capacity [C], every simulated load as (config index, load, purpose,
      metrics) rows). Converged configurations ride along later rounds as idle lanes (load 0), so every
      round has the same shape.
    """
    C, R = len(configs), rates_per_call
    rows = []
    grid = np.tile(np.geomspace(1.0 / 32.0, 32.0, coarse_rates), (C, 1))
    lanes = run_configs(w, cluster, configs, grid, early_stop=True, cap_sessions=True)
    rates, brackets = [], []
    for c in range(C):
        ok = np.array([_passes(lane_metrics(lanes, c, r, w, cluster.gpus, idle_w[c], prices[c]))
                       for r in range(coarse_rates)])
        b = _update(Bracket(0.0, np.inf, None), grid[c], ok, [None] * coarse_rates)
        rates.append(_next_rates(b, R))
        # a capped coarse run is optimistic (a shorter run builds a shorter queue): its fail bounds capacity
        # from above (hi, to be confirmed at full size), its pass does not bound it from below
        brackets.append(Bracket(0.0, b.hi, None, verified=False))
    if progress:
        progress(grid.size)
    for _ in range(max_rounds):
        open_ = [c for c in range(C) if not _converged(brackets[c])]
        if not open_:
            break
        grid = np.array([rates[c] if c in open_ else np.zeros(R) for c in range(C)])
        lanes = run_configs(w, cluster, configs, grid, early_stop=True)
        for c in open_:
            ms = [lane_metrics(lanes, c, r, w, cluster.gpus, idle_w[c], prices[c]) for r in range(R)]
            brackets[c] = _update(brackets[c], grid[c], np.array([_passes(m) for m in ms]), ms)
            rows += [(c, float(grid[c, r]), "search", ms[r]) for r in range(R)]
            rates[c] = _next_rates(brackets[c], R)
        if progress:
            progress(len(open_) * R)
    return [b.lo for b in brackets], [b.best for b in brackets], rows
