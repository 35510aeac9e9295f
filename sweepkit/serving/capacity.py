"""Capacity search: the highest load at which >= 90% of the window meets both SLOs, to within 5%.

Per configuration (the reference simulator's rule, github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim):

1. run at ``start`` (twice the workload's reference load where the grid knows it, else 1 per second);
2. if it passes, double until a load fails (up to :data:`MAX_LOAD`); if it fails, halve until one passes
   (down to ``start`` / :data:`MIN_FACTOR`; none passing means capacity 0);
3. bisect while (hi - lo) > tolerance x hi; the capacity is the highest passing load, lo.

Every round runs one probe (or ``rates_per_call`` probes) of every open configuration in one
:func:`sweepkit.serving.lanes.run_configs` call, so the configurations' probes share the cores; lanes that
have surely failed stop early (:func:`sweepkit.serving.cluster_sim.step`: misses so far plus requests already
waiting longer than the TTFT SLO, against the largest window still possible), so failing probes are cheap.
With ``rates_per_call`` R > 1 a round probes R loads: start x 2^j while expanding, R equally spaced interior
loads while bisecting (the bracket shrinks R + 1 times a round). Attainment is not strictly monotone in load
(finite samples): a pass above a fail does not move the bracket.

With ``fixed`` (the reference load), every configuration is also simulated there in the first round, whole
(no early stop), on a thread of its own beside the first probes; when the rule's next probe is that load
(``start`` / 2: the first probe failed), the search reads it instead of simulating it again (a whole run
passes or fails as an early-stopped one would). A point then needs one simulation less wherever twice the
reference load fails (26 of the H100 lever matrix's 92 online points).
"""

from __future__ import annotations

import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from sweepkit.serving.config import Config
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.metrics import SLO_ATTAINMENT, lane_metrics
from sweepkit.serving.workloads import Workload

TOLERANCE = 0.05
"""Relative width of the final bracket, (hi - lo) / hi (the reference simulator's 5%)."""
MAX_LOAD = 1e4
"""Doubling stops here (per second): a capacity above it is reported as this load."""
MIN_FACTOR = 64.0
"""Halving stops at start / MIN_FACTOR (the reference's floor): nothing passing there means capacity 0, which
the matrix reads as -100% goodput with undefined cost and energy, as the reference sweep does. A lever below
1/64 of twice the reference load has no useful capacity, and the probes down there are the dearest of a
search (a few rows decoding for a long time)."""


@dataclasses.dataclass
class Bracket:
    lo: float = 0.0            # highest passing load found (0: none yet)
    hi: float = math.inf       # lowest failing load above lo (inf: none yet)
    best: dict | None = None   # metrics at lo


def update(b: Bracket, rates: np.ndarray, passed: np.ndarray, metrics: list) -> Bracket:
    """The bracket after probing ``rates``: a pass inside (lo, hi) raises lo, a fail above lo lowers hi."""
    lo, hi, best = b.lo, b.hi, b.best
    for r, ok, m in sorted(zip(rates, passed, metrics), key=lambda x: x[0]):
        if ok and lo < r < hi:
            lo, best = float(r), m
    fails = [float(r) for r, ok in zip(rates, passed) if not ok and r > lo]
    if fails:
        hi = min(hi, min(fails))
    return Bracket(lo, hi, best)


def next_rates(b: Bracket, start: float, n: int = 1, growth: float = 2.0) -> np.ndarray:
    """The next ``n`` probes: start (and above) first, then growing or shrinking by ``growth`` (doubling or
    halving by default), then bisection."""
    j = np.arange(1, n + 1, dtype=np.float64)
    if b.lo <= 0 and not math.isfinite(b.hi):
        return start * growth ** (j - 1)
    if b.lo <= 0:
        return b.hi / growth ** j
    if not math.isfinite(b.hi):
        return np.minimum(b.lo * growth ** j, MAX_LOAD)
    return b.lo + (b.hi - b.lo) * j / (n + 1)


def converged(b: Bracket, start: float, tolerance: float = TOLERANCE) -> bool:
    """Bracket narrow enough, capacity at the load ceiling, or nothing passing at the floor."""
    if b.lo > 0 and math.isfinite(b.hi):
        return b.hi - b.lo <= tolerance * b.hi
    if b.lo >= MAX_LOAD:
        return True
    return b.lo <= 0 and b.hi <= start / MIN_FACTOR


def _passes(m: dict) -> bool:
    return m["attainment"] >= SLO_ATTAINMENT and not m["stopped_early"]


def search(w: Workload, cluster, configs: list[Config], prices: list[float], idle_w: list[float],
           start: float = 1.0, rates_per_call: int = 1, tolerance: float = TOLERANCE, progress=None,
           max_rounds: int = 40, first: np.ndarray | None = None, growth: float = 2.0,
           fixed: float | None = None):
    """Capacity of every configuration for workload ``w`` (not offline).

    Args:
      w, cluster: the workload and the cluster.  configs: (device, lever) points.
      prices, idle_w: per configuration, USD per GPU-hour and per-GPU idle watts.
      start: first probe, per second (the reference's start is twice the reference load).
      rates_per_call: probes per open configuration per round (>= 1).
      tolerance: final relative bracket width, (hi - lo) / hi.
      progress: callable(n_simulations) after each round.
      first: optional [C, K] loads of the first round (a search started near a known capacity: a draw of the
        grid's bands probes its point's final bracket first, :mod:`sweepkit.serving.draws`).
      growth: step of the expanding or shrinking rounds (2: doubling and halving).
      fixed: optional load (per second, > 0) every configuration is also simulated at, whole; its runs come
        back as "reference" rows, and serve as the search's probe where the rule reaches that load.

    Returns:
      (capacities [C], metrics at capacity [C] (None where capacity is 0), every probe as (config index, load,
      "search", metrics) rows, then with ``fixed`` one (config index, fixed, "reference", metrics) row each).

    Example:
      >>> b = update(Bracket(), np.array([2.0]), np.array([True]), [{}])
      >>> next_rates(b, 2.0).tolist(), converged(Bracket(1.0, 1.04), 2.0)
      ([4.0], True)
    """
    C, R = len(configs), max(int(rates_per_call), 1)
    brackets = [Bracket() for _ in range(C)]
    rows, at_fixed, pending = [], [None] * C, None
    side = ThreadPoolExecutor(1, thread_name_prefix="sweepkit-fixed")
    try:
        if fixed is not None:
            pending = side.submit(run_at, w, cluster, configs, prices, idle_w, fixed)
        for round_ in range(max_rounds):
            if pending is not None and round_ > 0 and (pending.done() or any(
                    _wants(b, fixed, start, R, growth, tolerance) for b in brackets)):
                at_fixed, pending = _read_fixed(brackets, pending, fixed, start, R, growth, tolerance, rows), None
                if progress:
                    progress(C)
            open_ = [c for c in range(C) if not converged(brackets[c], start, tolerance)]
            if not open_:
                break
            if round_ == 0 and first is not None:
                rates = np.asarray(first, np.float64).reshape(C, -1)[open_]
            else:
                rates = np.array([next_rates(brackets[c], start, R, growth) for c in open_])
            lanes = run_configs(w, cluster, [configs[c] for c in open_], rates, early_stop=True, cover=configs)
            for k, c in enumerate(open_):
                ms = [lane_metrics(lanes, k, r, w, cluster.gpus, idle_w[c], prices[c]) for r in range(rates.shape[1])]
                brackets[c] = update(brackets[c], rates[k], np.array([_passes(m) for m in ms]), ms)
                rows += [(c, float(rates[k, r]), "search", ms[r]) for r in range(rates.shape[1])]
            if progress:
                progress(rates.size)
        if pending is not None:
            at_fixed = pending.result()
            if progress:
                progress(C)
    finally:
        side.shutdown(wait=False, cancel_futures=True)
    rows += [(c, float(fixed), "reference", at_fixed[c]) for c in range(C)] if fixed is not None else []
    return [b.lo for b in brackets], [b.best for b in brackets], rows


def run_at(w: Workload, cluster, configs: list[Config], prices, idle_w, load: float) -> list[dict]:
    """Metrics of every configuration simulated whole (no early stop) at one ``load`` per second: the
    reference-load runs, or (``load`` = :data:`sweepkit.serving.lanes.OFFLINE_RATE`) every request at once."""
    lanes = run_configs(w, cluster, configs, np.full((len(configs), 1), load), early_stop=False, cover=configs)
    return [lane_metrics(lanes, c, 0, w, cluster.gpus, idle_w[c], prices[c]) for c in range(len(configs))]


def _read_fixed(brackets: list[Bracket], pending, load: float, start: float, R: int, growth: float,
                tolerance: float, rows: list) -> list[dict]:
    """The whole runs at ``load`` (waited for), read as the probe of every bracket whose next probe is that
    load (``brackets`` updated in place, a "search" row each)."""
    at_load = pending.result()
    for c, b in enumerate(brackets):
        if _wants(b, load, start, R, growth, tolerance):
            brackets[c] = update(b, np.array([load]), np.array([_passes(at_load[c])]), [at_load[c]])
            rows.append((c, float(load), "search", at_load[c]))
    return at_load


def _wants(b: Bracket, load: float, start: float, R: int, growth: float, tolerance: float) -> bool:
    """Whether the rule's next probe (one a round) is ``load``."""
    return (R == 1 and not converged(b, start, tolerance)
            and math.isclose(float(next_rates(b, start, 1, growth)[0]), load, rel_tol=1e-12))
