"""A profile's per-kernel time fitted on rows the serving engine prices (a request rate or a concurrency sweep).

Rows at a request rate (TTFT, ITL, throughput under load) are priced by the serving engine, not the analytic
steady state ``calibrate --framework`` fits through, so their profile's one free term, the fixed time t_k of
each kernel a decoder layer launches (:mod:`sweepkit.costmodel.kernels`), is fitted by a search over a grid of
t_k, every other field held:

    t_k* = argmin_{t_k in grid} median_i |ln(model_i(t_k) / measured_i)|

(the median of |log error|: the validation figures are medians, and a few rows far off, such as a saturated
load, must not pull t_k). A median is piecewise constant in t_k, so a grid, not a gradient; ties go to the
smaller t_k.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sweepkit.catalogue.efficiency import CONTEXT_KERNEL_FIELD, KERNEL_FIELD, Profile
from sweepkit.errors import InputError
from sweepkit.validation.measurements import Measurement


@dataclasses.dataclass(frozen=True)
class KernelFit:
    """The grid searched (s), the loss at each point (median |ln error|), the best t_k (s) and the rows used."""

    grid_s: tuple[float, ...]
    loss: tuple[float, ...]
    kernel_s: float
    rows: int


def with_kernel(profile: Profile, kernel_s: float, source: str, field: str = KERNEL_FIELD) -> Profile:
    """``profile`` with ``kernel_s`` (seconds per kernel) in its framework table as ``field`` (``kernel_s``, or
    ``context_kernel_s``: the kernels of a pass carrying prompt tokens), ``source`` saying where ``kernel_s``
    comes from."""
    if field not in (KERNEL_FIELD, CONTEXT_KERNEL_FIELD):
        raise InputError(f"kernel field {field!r}: not allowed; allowed: {KERNEL_FIELD}, {CONTEXT_KERNEL_FIELD}")
    if not (np.isfinite(kernel_s) and 0.0 <= kernel_s <= 1e-3):
        raise InputError(f"{field} {kernel_s!r}: not allowed; allowed: seconds in [0, 1e-3]")
    return dataclasses.replace(profile, overheads={**profile.overheads, field: float(kernel_s)},
                               kernel_source=source if field == KERNEL_FIELD else profile.kernel_source)


def median_log_error(model: list[float | None], rows: list[Measurement]) -> float:
    """median_i |ln(model_i / measured_i)| over the rows with a positive modelled value (inf when none)."""
    errs = [abs(np.log(v / m.value_si)) for v, m in zip(model, rows) if v is not None and v > 0 and m.value_si > 0]
    return float(np.median(errs)) if errs else float("inf")


def refit_kernel(rows: list[Measurement], profile: Profile, grid_s, price, field: str = KERNEL_FIELD) -> KernelFit:
    """The t_k of ``grid_s`` whose profile prices ``rows`` with the smallest median |ln error| (module docstring).

    Args:
      rows: measured rows of one framework (value_si in tokens/s or s).
      profile: the profile whose other fields are held.
      grid_s: candidate t_k values, seconds, each in [0, 1e-3].
      price: ``price(rows, profile) -> list[float | None]``, the modelled values in base SI
        (:func:`sweepkit.validation.evaluate_points` with ``profile=``).
      field: the per-kernel time searched, ``kernel_s`` (every pass) or ``context_kernel_s`` (passes carrying
        prompt tokens).

    Returns:
      :class:`KernelFit`.

    Example:
      Four Llama-3.1-8B rows whose measured values are the steady state's own at t_k = 2 us refit to 2 us on a
      0.5 us grid, with zero loss there and a positive one elsewhere (tests/validation/test_kernel_fit.py); the
      shipped TensorRT-LLM + Triton profile's header names its fit.
    """
    grid = tuple(float(g) for g in grid_s)
    if not rows or not grid:
        raise InputError("kernel fit: no rows or an empty grid; allowed: at least one row and one t_k")
    loss = tuple(median_log_error(price(rows, with_kernel(profile, g, "grid", field)), rows) for g in grid)
    best = grid[int(np.argmin(loss))]
    return KernelFit(grid, loss, best, len(rows))
