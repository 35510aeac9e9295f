"""Refit one per-format field of a fitted profile on a slice's training rows, every other field held fixed.

For the slice k = (device, compute format) and field f, with the training rows i of k (the rows
``calibrate --framework`` fits on: :func:`sweepkit.validation.framework_fit.framework_rows`, split train,
:func:`~sweepkit.validation.framework_fit.fittable`), the value minimises the data term of the calibrate loss
(:mod:`sweepkit.validation.profile_fit`, whose prior only pulls toward a start):

    f* = argmin_{f in [lo, hi]}  sum_i log(model_i(f) / measured_i)^2

by a grid of ``n_grid`` points over [lo, hi], then golden-section search in the two cells around the grid's
best. Each log residual is monotone in an efficiency, so the sum is unimodal where the rows agree; the grid
guards against a flat or kinked stretch.

References:
  Kiefer (1953), "Sequential minimax search for a maximum", Proc. AMS 4(3) (golden-section search).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sweepkit.catalogue.efficiency import FIELDS, Profile
from sweepkit.errors import InputError
from sweepkit.validation.measurements import Measurement
from sweepkit.validation.profiles import profile_values

GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0
"""1 / phi: the fraction of the bracket golden-section search keeps per step."""


@dataclasses.dataclass(frozen=True)
class FieldRefit:
    """The refitted value, the value it replaced, the summed squared log residuals before and after, and the
    rows fitted on."""

    value: float
    previous: float
    loss_before: float
    loss_after: float
    rows: list


def with_field(profile: Profile, key: tuple[str, str], field: str, value: float) -> Profile:
    """``profile`` with ``field`` of entry ``key`` set to ``value`` (the entry is created when absent)."""
    entries = {**profile.entries, key: {**profile.entries.get(key, {}), field: float(value)}}
    return dataclasses.replace(profile, entries=entries)


def slice_loss(rows: list[Measurement], profile: Profile, key: tuple[str, str], field: str, value: float) -> float:
    """sum_i log(model_i / measured_i)^2 of ``rows`` under ``profile`` with ``field`` of ``key`` at ``value``."""
    p = with_field(profile, key, field, value)
    model = profile_values(rows, [p] * len(rows))
    return float(np.sum(np.log(model / np.array([m.value_si for m in rows])) ** 2))


def refit_field(rows: list[Measurement], profile: Profile, key: tuple[str, str], field: str = "attn_prefill_eff", *,
                lo: float = 0.1, hi: float = 2.0, n_grid: int = 39, tol: float = 1e-4) -> FieldRefit:
    """Refit ``field`` of ``profile``'s entry ``key`` on the rows of ``rows`` in that slice, holding every other
    field fixed; raises InputError when the slice has no row or ``field`` is not a per-format field.

    Args:
      rows: measured rows (value_si in tokens/s or s); those of slice ``key`` are used.
      profile: the profile whose other fields are held.
      key: (device, compute format) of the entry.
      field: one of :data:`sweepkit.catalogue.efficiency.FIELDS`.
      lo, hi: search range of the field (fraction of peak for an efficiency).
      n_grid: grid points over [lo, hi] before the golden-section search.
      tol: width of the final bracket.

    Returns:
      :class:`FieldRefit`.

    Example:
      Rows whose measured values are the profile's own at attn_prefill_eff = 0.7 refit to 0.7 within 1e-3
      (tests/validation/test_field_refit.py).
    """
    if field not in FIELDS:
        raise InputError(f"field {field!r}: not a per-format profile field; allowed: {', '.join(FIELDS)}")
    mine = [m for m in rows if (m.device, m.compute_format) == key]
    if not mine:
        raise InputError(f"slice {key[0]} {key[1]}: no row to refit {field} on")
    loss = lambda x: slice_loss(mine, profile, key, field, x)  # noqa: E731
    grid = np.linspace(lo, hi, n_grid)
    best = int(np.argmin([loss(x) for x in grid]))
    a, b = grid[max(best - 1, 0)], grid[min(best + 1, n_grid - 1)]
    c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    fc, fd = loss(c), loss(d)
    while b - a > tol:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - GOLDEN * (b - a)
            fc = loss(c)
        else:
            a, c, fc = c, d, fd
            d = a + GOLDEN * (b - a)
            fd = loss(d)
    value = 0.5 * (a + b)
    previous = profile.fields(*key)[field]
    return FieldRefit(value=float(value), previous=float(previous), loss_before=loss(previous),
                      loss_after=loss(value), rows=mine)
