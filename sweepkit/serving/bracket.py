"""A capacity search's bracket and its rules: where the next probes go and when the search is done.

A :class:`Bracket` holds the highest passing load lo and the lowest failing load hi above it, with the SLO
attainment at each end. :func:`update` folds a round's probes in, :func:`next_rates` and :func:`opening`
place the next ones (doubling or halving until a bracket forms, then regula falsi on the logit of the
attainment, bisection, or equally spaced loads), :func:`converged` says when (hi - lo) <= tolerance x hi.
Pure functions of numbers, no simulation: :mod:`sweepkit.serving.capacity` runs the probes (its docstring
gives the rules in full).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from sweepkit.serving.metrics import SLO_ATTAINMENT

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
