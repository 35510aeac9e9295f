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

import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from sweepkit.serving.config import Config
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.memory import release
from sweepkit.serving.metrics import SLO_ATTAINMENT, lane_metrics
from sweepkit.serving.workloads import Workload

TOLERANCE = 0.05
"""Relative width of the final bracket, (hi - lo) / hi (the reference simulator's 5%)."""
MAX_LOAD = 1e4
"""Doubling stops here (per second): a capacity above it is reported as this load."""
RULES = ("interpolate", "bisect", "bracket")
"""Rules of a search (:func:`next_rates`; "bracket" narrows as "interpolate" does, from its own start and ceiling)."""
CLIP = 1e-3
"""Attainments are clipped to [CLIP, 1 - CLIP] before their logit (a whole pass often has attainment 1)."""
EDGE = 0.02
"""The interpolated probe keeps at least EDGE x (hi - lo) from either end of the bracket."""
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
    attain_lo: float = 1.0     # SLO attainment at lo (a whole run's)
    attain_hi: float = 0.0     # SLO attainment at hi (an early-stopped run's: of the requests it reached)
    moved: str = ""            # the end the last update moved: "lo", "hi" or "" (neither, or both)
    weight_lo: float = 1.0     # Illinois weights of each end's distance from the 90% line
    weight_hi: float = 1.0


def _attainment(m, default: float) -> float:
    return float(m["attainment"]) if isinstance(m, dict) and "attainment" in m else default


def update(b: Bracket, rates: np.ndarray, passed: np.ndarray, metrics: list) -> Bracket:
    """The bracket after probing ``rates``: a pass inside (lo, hi) raises lo, a fail above lo lowers hi."""
    lo, hi, best, a_lo, a_hi = b.lo, b.hi, b.best, b.attain_lo, b.attain_hi
    for r, ok, m in sorted(zip(rates, passed, metrics), key=lambda x: x[0]):
        if ok and lo < r < hi:
            lo, best, a_lo = float(r), m, _attainment(m, 1.0)
    fails = [(float(r), m) for r, ok, m in zip(rates, passed, metrics) if not ok and r > lo]
    if fails:
        r, m = min(fails, key=lambda x: x[0])
        if r < hi:
            hi, a_hi = r, _attainment(m, 0.0)
    moved = "" if (lo != b.lo) == (hi != b.hi) else ("lo" if lo != b.lo else "hi")
    w_lo = b.weight_lo / 2 if moved == b.moved == "hi" else 1.0
    w_hi = b.weight_hi / 2 if moved == b.moved == "lo" else 1.0
    return Bracket(lo, hi, best, a_lo, a_hi, moved, w_lo, w_hi)


def next_rates(b: Bracket, start: float, n: int = 1, growth: float = 2.0, rule: str = "interpolate",
               tolerance: float = TOLERANCE) -> np.ndarray:
    """The next ``n`` probes: start (and above) first, then growing or shrinking by ``growth`` (doubling or
    halving by default), then inside the bracket by ``rule`` (one probe: :func:`interpolated` or the
    midpoint; ``n`` > 1: n equally spaced loads)."""
    j = np.arange(1, n + 1, dtype=np.float64)
    if b.lo <= 0 and not math.isfinite(b.hi):
        return start * growth ** (j - 1)
    if b.lo <= 0:
        return b.hi / growth ** j
    if not math.isfinite(b.hi):
        return np.minimum(b.lo * growth ** j, MAX_LOAD)
    if n == 1 and rule in ("interpolate", "bracket"):
        return np.array([interpolated(b, tolerance)])
    return b.lo + (b.hi - b.lo) * j / (n + 1)


def interpolated(b: Bracket, tolerance: float = TOLERANCE) -> float:
    """The regula-falsi probe inside a bracket (lo > 0, hi finite, not yet within ``tolerance``).

    .. math::
        p = \\mathrm{lo} + (\\mathrm{hi} - \\mathrm{lo})\\,
            \\frac{w_{lo}(\\ell(a_{lo}) - \\ell(0.9))}{w_{lo}(\\ell(a_{lo}) - \\ell(0.9))
            + w_{hi}(\\ell(0.9) - \\ell(a_{hi}))}, \\qquad \\ell(a) = \\ln\\frac{a}{1 - a}

    with a clipped to [CLIP, 1 - CLIP], ``p`` kept EDGE x (hi - lo) inside the bracket; a ``p`` at or below
    lo / (1 - tolerance) becomes just under that load (a fail there closes the bracket), one at or above
    hi (1 - tolerance) just over it (a pass there closes it).

    Args:
      b: the bracket, with SLO attainment at each end (a share in [0, 1]) and the Illinois weights w.
      tolerance: the search's final relative width, (hi - lo) / hi, in (0, 1).

    Returns:
      The next load, per second, in (lo, hi).

    Example:
      >>> round(interpolated(Bracket(4.0, 8.0, None, 0.95, 0.10)), 4)   # the logit line crosses 0.9 here
      4.5813
      >>> round(interpolated(Bracket(4.0, 8.0, None, 0.91, 0.10)), 4)   # near lo: a fail there ends it
      4.2105

    References:
      Regula falsi with the Illinois modification: M. Dowell and P. Jarratt, "A modified regula falsi method
      for computing the root of an equation", BIT 11 (1971) 168-174, https://doi.org/10.1007/BF01934364
    """
    def logit(a: float) -> float:
        a = min(max(a, CLIP), 1.0 - CLIP)
        return math.log(a / (1.0 - a))

    f_lo = max(logit(b.attain_lo) - logit(SLO_ATTAINMENT), 0.0) * b.weight_lo
    f_hi = max(logit(SLO_ATTAINMENT) - logit(b.attain_hi), 0.0) * b.weight_hi
    width = b.hi - b.lo
    p = b.lo + width * (f_lo / (f_lo + f_hi) if f_lo + f_hi > 0 else 0.5)
    p = min(max(p, b.lo + EDGE * width), b.hi - EDGE * width)
    if p <= b.lo / (1.0 - tolerance):
        return b.lo / (1.0 - tolerance) * (1.0 - 1e-9)
    if p >= b.hi * (1.0 - tolerance):
        return b.hi * (1.0 - tolerance) * (1.0 + 1e-9)
    return p


def converged(b: Bracket, start: float, tolerance: float = TOLERANCE, floor: float | None = None) -> bool:
    """Bracket narrow enough, capacity at the load ceiling, or nothing passing at the floor (default
    ``start`` / :data:`MIN_FACTOR`)."""
    if b.lo > 0 and math.isfinite(b.hi):
        return b.hi - b.lo <= tolerance * b.hi
    if b.lo >= MAX_LOAD:
        return True
    return b.lo <= 0 and b.hi <= (start / MIN_FACTOR if floor is None else floor)


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


def unverified(b: Bracket, ceiling: float, closed: bool) -> bool:
    """Whether a closed bracket's failing end is an unsimulated ceiling above a passing load (the ceiling
    was below the capacity: the cost model's bound was not an upper bound there)."""
    return closed and b.lo > 0 and math.isfinite(ceiling) and b.hi >= ceiling


def lifted(b: Bracket) -> Bracket:
    """The bracket without its unsimulated failing end: the search goes on growing from its passing load.

    Example:
      >>> lifted(Bracket(4.0, 4.2, None, 0.95, 0.0)).hi
      inf
    """
    return Bracket(lo=b.lo, best=b.best, attain_lo=b.attain_lo)


def opening(start: float, b: Bracket, n: int = 1, growth: float = 2.0, tolerance: float = TOLERANCE) -> np.ndarray:
    """The first round's ``n`` probes: start x growth^j (j = 0..n-1); under a known failing end (a ceiling)
    the start and n - 1 loads spaced geometrically up to the ceiling x (1 - tolerance), all below it.

    Example:
      >>> opening(2.0, Bracket(), 2).tolist(), opening(2.0, Bracket(hi=1.0)).tolist()
      ([2.0, 4.0], [0.95])
      >>> opening(1.0, Bracket(hi=4.0 / 0.95), 3).round(6).tolist()
      [1.0, 2.0, 4.0]
    """
    j = np.arange(n, dtype=np.float64)
    if not math.isfinite(b.hi):
        return start * growth ** j
    top = b.hi * (1.0 - tolerance)
    start = min(start, top)
    return start * (top / start) ** (j / max(n - 1, 1)) if n > 1 and start > 0 else np.full(n, start)


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
