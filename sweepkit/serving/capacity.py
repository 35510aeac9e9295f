"""Capacity search: the highest load at which >= 90% of the window meets both SLOs, to within 5%.

Per configuration (steps 1-2 and the bisecting rule are the reference simulator's,
github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim):

1. run at ``start`` (twice the workload's reference load where the grid knows it, else 1 per second);
2. if it passes, double until a load fails (up to :data:`MAX_LOAD`); if it fails, halve until one passes
   (down to ``start`` / :data:`MIN_FACTOR`; none passing means capacity 0);
3. narrow the bracket while (hi - lo) > tolerance x hi; the capacity is the highest passing load, lo.

Step 3 has two rules (``rule``; the grid's ``search``):

* ``"interpolate"`` (default): regula falsi on the logit of the SLO attainment. The next probe is where the
  line through (lo, logit of the attainment at lo) and (hi, logit at hi) crosses logit(0.9) (a logistic
  fall of attainment with load is a straight line there; attainments clipped to [0.001, 0.999]). Where that
  lands within the tolerance of an end, the probe goes to the load that closes the bracket if it lands on
  that end's side: lo / (1 - tolerance) (a fail there ends the search), hi x (1 - tolerance) (so does a
  pass). When the same end moves twice in a row, the other end's distance from the 90% line is halved (the
  Illinois rule: Dowell & Jarratt, BIT 11, 1971), so the probes cannot creep in from one side. On the H100
  lever grid its searches simulated 16% fewer passes than bisection's (docs/performance.md).
* ``"bisect"``: the reference's bisection, (lo + hi) / 2, whose probes fall on the same loads as its.

* ``"bracket"`` (a serving grid's default, :mod:`sweepkit.serving.run`): starts each configuration at its own
  load near capacity and narrows as ``"interpolate"`` does. The start and a ceiling come from the cost model
  (:func:`sweepkit.serving.bound.search_bracket`: the throughput bound under the SLOs, anchored on the
  reference baseline's start where the grid pins a reference load); the ceiling is the bracket's failing end
  before any probe, so the first pass closes a bracket at once.

Both end with the same guarantee: a passing load lo and a failing load hi within the tolerance of each other.
Under every rule a probe at or above a configuration's ``ceiling`` fails without a simulation, and a ceiling
of 0 (no load can meet the TTFT SLO) is a capacity of 0 without one; bisection keeps its probes' loads, so
it finds the reference's capacity in fewer simulations wherever the ceiling is right. Where it is not (a
bracket closes between a passing load and the unsimulated ceiling), that configuration's ceiling is dropped
and its search goes on from the passing load (:func:`unverified`, :func:`lifted`): the failing end of a
capacity's final bracket is always a simulated probe.

Every round runs one probe (or ``rates_per_call`` probes) of every open configuration in one
:func:`sweepkit.serving.lanes.run_configs` call, so the configurations' probes share the cores; lanes that
have surely failed stop early (:func:`sweepkit.serving.engine.loop.step`: misses so far plus requests already
waiting longer than the TTFT SLO, against the largest window still possible), so failing probes are cheap.
With ``rates_per_call`` R > 1 a round probes R loads: start x 2^j while expanding, R equally spaced interior
loads inside the bracket whatever the rule (the bracket shrinks R + 1 times a round). Attainment is not
strictly monotone in load (finite samples): a pass above a fail does not move the bracket.

With ``fixed`` (the reference load), every configuration is also simulated there in the first round, whole
(no early stop), on a thread of its own beside the first probes; when the rule's next probe is that load
(``start`` / 2: the first probe failed), the search reads it instead of simulating it again (a whole run
passes or fails as an early-stopped one would). A point then needs one simulation less wherever twice the
reference load fails (26 of the H100 lever matrix's 92 online points).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from sweepkit.serving.bracket import (MAX_LOAD, MIN_FACTOR, RULES, TOLERANCE, Bracket, converged, lifted, next_rates,
                                      opening, unverified, update)
from sweepkit.serving.config import Config
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.memory import release
from sweepkit.serving.metrics import SLO_ATTAINMENT, lane_metrics
from sweepkit.serving.workloads import Workload

__all__ = ["MAX_LOAD", "MIN_FACTOR", "RULES", "SLO_ATTAINMENT", "TOLERANCE", "Bracket", "converged", "lifted",
           "next_rates", "opening", "run_at", "search", "unverified", "update"]
def _passes(m: dict) -> bool:
    return m["attainment"] >= SLO_ATTAINMENT and not m["stopped_early"]


def search(w: Workload, cluster, configs: list[Config], prices: list[float], idle_w: list[float],
           start: float | np.ndarray = 1.0, rates_per_call: int = 1, tolerance: float = TOLERANCE, progress=None,
           max_rounds: int = 40, first: np.ndarray | None = None, growth: float = 2.0,
           fixed: float | None = None, rule: str = "interpolate", ceiling: np.ndarray | None = None,
           floor: float | None = None, cover: list[Config] | None = None, slots: int | None = None,
           sessions: int | None = None):
    """Capacity of every configuration for workload ``w`` (not offline).

    Args:
      w, cluster: the workload and the cluster.  configs: (device, lever) points.
      prices, idle_w: per configuration, USD per GPU-hour and per-GPU idle watts.
      start: first probe, per second (the reference's start is twice the reference load); one for every
        configuration or one each ([C]).
      rates_per_call: probes per open configuration per round (>= 1).
      tolerance: final relative bracket width, (hi - lo) / hi.
      progress: callable(n_simulations) after each round.
      first: optional [C, K] loads of the first round (a search started near a known capacity: a draw of the
        grid's bands probes its point's final bracket first, :mod:`sweepkit.serving.draws`).
      growth: step of the expanding or shrinking rounds (2: doubling and halving).
      fixed: optional load (per second, > 0) every configuration is also simulated at, whole; its runs come
        back as "reference" rows, and serve as the search's probe where the rule reaches that load.
      rule: how a bracket narrows, one of :data:`RULES` (see the module docstring).
      ceiling: optional [C] loads per second known to fail (:func:`sweepkit.serving.bound.search_bracket`):
        a probe at or above it fails without a simulation (attainment 0, no row), so "bisect" keeps its
        probes and capacity wherever the ceiling is right; with "bracket" it is also each bracket's failing
        end before any probe. A ceiling of 0: capacity 0 without a simulation. A ceiling a passing load comes
        within ``tolerance`` of is dropped and the search goes on above it (:func:`unverified`).
      floor: the load below which nothing passing means capacity 0 (default ``start`` / :data:`MIN_FACTOR`).
      cover, slots, sessions: what every call's program holds besides ``configs`` (configurations, rows per
        instance, sessions: :func:`sweepkit.serving.lanes.run_configs`), so that the searches of a plan share
        one program (the same capacities in a larger program).

    Returns:
      (capacities [C], metrics at capacity [C] (None where capacity is 0), every probe as (config index, load,
      "search", metrics) rows, then with ``fixed`` one (config index, fixed, "reference", metrics) row each).

    Example:
      >>> b = update(Bracket(), np.array([2.0]), np.array([True]), [{}])
      >>> next_rates(b, 2.0).tolist(), converged(Bracket(1.0, 1.04), 2.0)
      ([4.0], True)
    """
    if rule not in RULES:
        raise ValueError(f"capacity search rule {rule!r} is not one of {', '.join(RULES)}")
    C, R = len(configs), max(int(rates_per_call), 1)
    starts = np.broadcast_to(np.asarray(start, np.float64), (C,)).copy()
    floors = starts / MIN_FACTOR if floor is None else np.full(C, float(floor))
    ceil = np.full(C, math.inf) if ceiling is None else np.asarray(ceiling, np.float64).reshape(C)
    brackets = [Bracket(hi=float(ceil[c]), attain_hi=0.0) if rule == "bracket" else Bracket() for c in range(C)]
    done = lambda c: converged(brackets[c], starts[c], tolerance, floors[c])  # noqa: E731
    rows, at_fixed, pending = [], [None] * C, None
    side = ThreadPoolExecutor(1, thread_name_prefix="sweepkit-fixed")
    try:
        if fixed is not None:
            pending = side.submit(run_at, w, cluster, configs, prices, idle_w, fixed)
        for round_ in range(max_rounds):
            if pending is not None and round_ > 0 and (pending.done() or any(
                    _wants(b, fixed, s, R, growth, tolerance, rule) for b, s in zip(brackets, starts))):
                at_fixed, pending = _read_fixed(brackets, pending, fixed, starts, R, growth, tolerance, rule,
                                                rows), None
                if progress:
                    progress(C)
            for c in range(C):
                if unverified(brackets[c], ceil[c], done(c)):
                    ceil[c], brackets[c] = math.inf, lifted(brackets[c])
            open_ = [c for c in range(C) if not done(c)]
            if not open_:
                break
            if round_ == 0 and first is not None:
                rates = np.asarray(first, np.float64).reshape(C, -1)[open_]
            elif round_ == 0:
                rates = np.array([opening(starts[c], brackets[c], R, growth, tolerance) for c in open_])
            else:
                rates = np.array([next_rates(brackets[c], starts[c], R, growth, rule, tolerance) for c in open_])
            known = np.all(rates >= ceil[open_][:, None], axis=1)     # at or above the ceiling: fails, unsimulated
            for k in np.nonzero(known)[0]:
                brackets[open_[k]] = update(brackets[open_[k]], rates[k], np.zeros(rates.shape[1], bool),
                                            [None] * rates.shape[1])
            sim = [k for k in range(len(open_)) if not known[k]]
            if not sim:
                continue
            open_, rates = [open_[k] for k in sim], rates[sim]
            lanes = run_configs(w, cluster, [configs[c] for c in open_], rates, early_stop=True,
                                cover=configs + list(cover or []), slots=slots, sessions=sessions, lean=True)
            for k, c in enumerate(open_):
                ms = [lane_metrics(lanes, k, r, w, cluster.gpus, idle_w[c], prices[c]) for r in range(rates.shape[1])]
                brackets[c] = update(brackets[c], rates[k], np.array([_passes(m) for m in ms]), ms)
                rows += [(c, float(rates[k, r]), "search", ms[r]) for r in range(rates.shape[1])]
            del lanes                                   # the lanes' final states: only their metrics are kept
            release()
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
    lanes = run_configs(w, cluster, configs, np.full((len(configs), 1), load), early_stop=False, cover=configs,
                        lean=True)
    return [lane_metrics(lanes, c, 0, w, cluster.gpus, idle_w[c], prices[c]) for c in range(len(configs))]


def _read_fixed(brackets: list[Bracket], pending, load: float, starts: np.ndarray, R: int, growth: float,
                tolerance: float, rule: str, rows: list) -> list[dict]:
    """The whole runs at ``load`` (waited for), read as the probe of every bracket whose next probe is that
    load (``brackets`` updated in place, a "search" row each)."""
    at_load = pending.result()
    for c, b in enumerate(brackets):
        if _wants(b, load, starts[c], R, growth, tolerance, rule):
            brackets[c] = update(b, np.array([load]), np.array([_passes(at_load[c])]), [at_load[c]])
            rows.append((c, float(load), "search", at_load[c]))
    return at_load


def _wants(b: Bracket, load: float, start: float, R: int, growth: float, tolerance: float, rule: str) -> bool:
    """Whether the rule's next probe (one a round) is ``load``."""
    return (R == 1 and not converged(b, start, tolerance)
            and math.isclose(float(next_rates(b, start, 1, growth, rule, tolerance)[0]), load, rel_tol=1e-12))
