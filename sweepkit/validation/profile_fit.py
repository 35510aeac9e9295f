"""Fit a framework's efficiency profile to max-throughput rows through the analytic steady state.

With loaded rows (``fit_token_budget``) the step token budget N_tok of :mod:`sweepkit.validation.steady`
is fitted too (one per framework, range 128-32768 tokens): a loaded row's throughput and TPOT together fix how
many requests run at once (n = output tokens/s x TPOT), which the burst sizes of the sources leave unstated.

Parameters: the eight per-format fields of :class:`sweepkit.costmodel.efficiency.Efficiency` for every
(device, compute format) slice the training rows hold, and the framework's two host overheads. Each is
kept in a physical range by theta = lo + (hi - lo) sigmoid(u), and pulled toward its starting value u_0 (the
profile it starts from) by a Gaussian prior of width :data:`PRIOR_WIDTH` in u:

    minimise  sum_i rho(log(model_i(theta(u)) / measured_i) / sigma) + sum_j ((u_j - u_0,j) / s)^2

with rho(z) = z^2 (least squares, the default) or Cauchy's robust c^2 log(1 + (z / c)^2) (:func:`robust`), so
that the prior keeps a field the rows do not constrain (link efficiency at tp = 1, MoE fields without MoE rows)
at its start, and slices with no training row are not fitted at all. A field on which no training row depends at the
fitted point (max_i |d log model_i / d u_j| <= :data:`IDENTIFIED`: weight streaming of a slice whose rows are
all compute-bound, the link of a tp = 1 slice) is reported as not identified (``ProfileFit.identified``), so a
profile can leave it to its family instead of writing its start value as if it were fitted. model_i is
:func:`sweepkit.validation.steady.row_value`. :func:`fit_problem` builds the stacked residuals;
:func:`sweepkit.validation.lm.levenberg_marquardt` minimises them, with the Jacobian from ``jax.jacfwd`` (the
same damping rule as :mod:`sweepkit.validation.fit`).

References:
  Levenberg (1944), Marquardt (1963); Nocedal & Wright, "Numerical Optimization", sec. 10.3;
  MacKay, "Information Theory, Inference, and Learning Algorithms", ch. 27 (a Gaussian prior as ridge).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.catalogue import get_device, get_format
from sweepkit.catalogue.efficiency import (CONTEXT_KERNEL_FIELD, FIELDS, FRAMEWORK_FIELDS, KEPT_FIELDS, KERNEL_FIELD,
                                           VECTOR_FIELD, Profile)
from sweepkit.costmodel.efficiency import Efficiency
from sweepkit.errors import InputError
from sweepkit.validation.lm import levenberg_marquardt
from sweepkit.validation.steady import row_value
from sweepkit.validation.steady_rows import RowInputs

BOUNDS = {"gemm_eff_max": (0.05, 1.0), "gemm_tokens_half": (0.0, 4096.0), "moe_eff_max": (0.05, 1.0),
          "moe_tokens_half": (0.0, 4096.0), "attn_prefill_eff": (0.05, 1.5), "weight_bw_eff": (0.3, 1.0),
          "kv_bw_eff": (0.1, 1.0), "link_eff": (0.1, 1.0), "allreduce_overhead_s": (0.0, 1e-4), "tp_loss": (0.0, 0.5),
          "step_overhead_s": (0.0, 0.02),
          "token_overhead_s": (0.0, 1e-5), "token_budget": (128.0, 32768.0)}
"""Physical range of every fitted field (fractions of peak; tokens; seconds)."""
PRIOR_WIDTH = 3.0
"""s: width of the prior in the unconstrained coordinate (a logit of 1 moves a fraction 0.5 -> 0.73)."""
ROW_SIGMA = 0.05
"""sigma: the log misfit expected of one row (5 %: run-to-run spread and what the model leaves out); the data
residuals are divided by it, so the prior weighs against rows in their units."""
LOSSES = ("l2", "cauchy")
"""Data losses :func:`fit_profile` takes: least squares, or Cauchy's (a robust loss)."""
CAUCHY_SCALE = 3.0
"""c: the scale of the Cauchy loss in units of ROW_SIGMA (a row 3 sigma = 15 % off weighs half what least squares
gives it)."""
IDENTIFIED = 1e-9
"""Least max_i |d log model_i / d u_j| over the training rows for field j to count as identified by them (a
field no row depends on has an exactly zero column: its term never binds in the rows' roofline maxima)."""


@dataclasses.dataclass(frozen=True)
class ProfileFit:
    """Fitted fields per slice ((device, format) -> {field: value}), the framework overheads, the log
    residuals of the training rows before and after, and the iterations used."""

    slices: dict
    overheads: dict
    residuals_before: np.ndarray
    residuals_after: np.ndarray
    iterations: int
    token_budget: float = 0.0
    identified: dict = dataclasses.field(default_factory=dict)
    """(device, format) -> the fields of :data:`FIELDS` some training row depends on at the fitted point."""


def _limits(names):
    lo = np.array([BOUNDS[k][0] for k in names])
    hi = np.array([BOUNDS[k][1] for k in names])
    return lo, hi


def _to_u(theta, lo, hi):
    width = hi - lo                       # 0 for a held field: theta is lo whatever u is
    x = np.clip(np.divide(np.asarray(theta, np.float64) - lo, width, out=np.full(width.shape, 0.5), where=width > 0),
                0.05, 0.95)
    return np.log(x) - np.log1p(-x)


def _to_theta(u, lo, hi):
    return lo + (hi - lo) * jax.nn.sigmoid(u)


def _kernel_times(start: Profile) -> tuple[float, float]:
    """The start profile's per-kernel times (``kernel_s``, ``context_kernel_s``; 0 where absent), held in a fit."""
    return float(start.overheads.get(KERNEL_FIELD, 0.0)), float(start.overheads.get(CONTEXT_KERNEL_FIELD, 0.0))


def _efficiency(u, slice_of_row, n_slices, lo, hi, kernel_s: float = 0.0, context_kernel_s: float = 0.0) -> Efficiency:
    """Per-row :class:`Efficiency` from the parameter vector (slices x FIELDS, then FRAMEWORK_FIELDS); the
    per-kernel times ``kernel_s`` and ``context_kernel_s`` are the start profile's, held fixed (data, not fitted)."""
    theta = _to_theta(u, lo, hi)
    per = theta[: n_slices * len(FIELDS)].reshape(n_slices, len(FIELDS))[slice_of_row]
    fw = theta[n_slices * len(FIELDS):]
    cols = {k: per[:, j] for j, k in enumerate(FIELDS)}
    cols.update({k: jnp.full(slice_of_row.shape, fw[j]) for j, k in enumerate(FRAMEWORK_FIELDS)})
    cols[KERNEL_FIELD] = jnp.full(slice_of_row.shape, kernel_s, dtype=per.dtype)
    cols[VECTOR_FIELD] = jnp.zeros(slice_of_row.shape, dtype=per.dtype)   # fitted rows: tensor-core decode
    cols[CONTEXT_KERNEL_FIELD] = jnp.full(slice_of_row.shape, context_kernel_s, dtype=per.dtype)
    for k in KEPT_FIELDS:      # kept-format GEMMs at the row's own slice's fields while fitting
        cols[k] = jnp.zeros(slice_of_row.shape, dtype=per.dtype)
    return Efficiency(**cols)


def _identified(rows: RowInputs, keys: list[tuple[str, str]], slices: list, per, overheads: dict) -> dict:
    """{slice: fields with max_i |d log model_i / d theta_j| > IDENTIFIED} at per-slice values ``per``."""
    index = {k: i for i, k in enumerate(slices)}
    with jax.enable_x64(True):
        slice_of_row = jnp.asarray([index[k] for k in keys])
        fw = {f: jnp.full(slice_of_row.shape, float(overheads.get(f, 0.0)))
              for f in FRAMEWORK_FIELDS + (KERNEL_FIELD, VECTOR_FIELD, CONTEXT_KERNEL_FIELD) + KEPT_FIELDS}

        def log_model(theta):
            cols = {f: theta[slice_of_row, j] for j, f in enumerate(FIELDS)}
            return jnp.log(jax.vmap(row_value)(rows, Efficiency(**cols, **fw)))

        jac = np.asarray(jax.jit(jax.jacfwd(log_model))(jnp.asarray(per, jnp.float64)))   # rows x slices x fields
    sens = np.max(np.abs(jac), axis=0)
    return {k: {f for j, f in enumerate(FIELDS) if sens[i, j] > IDENTIFIED} for i, k in enumerate(slices)}


def identified_fields(rows: RowInputs, keys: list[tuple[str, str]], profile: Profile) -> dict:
    """The per-format fields some row depends on, per (device, format) slice, at ``profile``'s values.

    Field j of slice k is identified when max_i |d log model_i / d theta_j| > :data:`IDENTIFIED` over the rows
    i of slice k (``keys`` gives each row's slice); a field whose term never binds in those rows' roofline
    maxima (weight streaming where every row is compute-bound, the link at tp = 1) has an exactly zero column.

    Example:
      At tp = 1 no row depends on the link: ``"link_eff" not in identified_fields(rows, keys, p)[k]``
      (tests/validation/test_profile_fit.py).
    """
    slices = sorted(set(keys))
    per = [[profile.fields(*k)[f] for f in FIELDS] for k in slices]
    return _identified(rows, keys, slices, per, profile.overheads)


def parse_held(specs: list[str] | tuple[str, ...]) -> dict:
    """``DEVICE:FORMAT:FIELD=VALUE`` strings -> {(device, format): {field: value}}: fields a fit holds at given
    values (a measured kernel table's), each checked against the catalogue and its physical range (:data:`BOUNDS`).

    Example:
      >>> parse_held(["H100:bf16:gemm_eff_max=0.79", "H100:bf16:gemm_tokens_half=0"])
      {('H100', 'bf16'): {'gemm_eff_max': 0.79, 'gemm_tokens_half': 0.0}}
    """
    out: dict = {}
    for spec in specs:
        where, _, text = spec.partition("=")
        parts = where.split(":")
        try:
            value = float(text)
        except ValueError:
            value = None
        if len(parts) != 3 or value is None:
            raise InputError(f"--hold {spec!r}: expected DEVICE:FORMAT:FIELD=VALUE, e.g. H100:bf16:gemm_eff_max=0.79")
        device, fmt, field = (x.strip() for x in parts)
        try:
            device, fmt = get_device(device).name, get_format(fmt, "format").name
        except InputError as exc:
            raise InputError(f"--hold {spec!r}: {exc}") from None
        if field not in FIELDS:
            raise InputError(f"--hold {spec!r}: field {field!r} is not one of {', '.join(FIELDS)}")
        lo, hi = BOUNDS[field]
        if not lo <= value <= hi:
            raise InputError(f"--hold {spec!r}: {field} = {value:g} is outside its range [{lo:g}, {hi:g}]")
        out.setdefault((device, fmt), {})[field] = value
    return out


def robust(z, loss: str, c: float = CAUCHY_SCALE):
    """Residuals whose squares are the loss: z itself (``l2``), or Cauchy's z sqrt(log(1 + (z/c)^2) / (z/c)^2),
    whose square is c^2 log(1 + (z / c)^2).

    Near 0 it is z (the same fit as least squares for rows that fit); far out a row's weight falls as c^2 / z^2,
    so rows the model cannot express (a benchmark's front end, not the GPU, setting the pace) do not pull every
    field toward them. Levenberg-Marquardt on these residuals minimises the robust loss (Triggs et al.'s square-root form).

    Args:
      z: residuals in units of their sigma.  loss: one of :data:`LOSSES`.  c: Cauchy's scale, same units.

    Returns:
      The residuals to square and sum.

    Example:
      >>> round(float(robust(jnp.asarray(3.0), "cauchy", c=3.0) ** 2), 3)     # c^2 log 2 = 6.238
      6.238

    References:
      Triggs, McLauchlan, Hartley, Fitzgibbon, "Bundle Adjustment - A Modern Synthesis" (2000), sec. 3.3;
      Hampel et al., "Robust Statistics" (1986).
    """
    if loss == "l2":
        return z
    q = (z / c) ** 2
    safe = jnp.where(q > 1e-12, q, 1.0)
    return z * jnp.sqrt(jnp.where(q > 1e-12, jnp.log1p(safe) / safe, 1.0 - q / 2.0))


@dataclasses.dataclass(frozen=True)
class FitProblem:
    """One profile fit's least-squares problem in the unconstrained coordinate u (module docstring).

    Attributes:
      slices: the (device, format) slices fitted, in parameter order.  extra: ["token_budget"] or [].
      lo, hi: each parameter's range (lo = hi for a held field).  u0: the start (and prior centre).
      data: u -> log(model_i / measured_i) per row.  residuals: u -> the stacked residuals whose sum of
        squares is minimised (the data's under the loss, then the prior's).
    """

    slices: list
    extra: list
    lo: np.ndarray
    hi: np.ndarray
    u0: jax.Array
    data: object
    residuals: object

    @property
    def n_fw(self) -> int:
        """Parameters before the token budget (slices x FIELDS, then FRAMEWORK_FIELDS)."""
        return len(self.slices) * len(FIELDS) + len(FRAMEWORK_FIELDS)


def fit_problem(rows: RowInputs, measured, keys: list[tuple[str, str]], start: Profile, *,
                fit_token_budget: bool = False, loss: str = "l2", held: dict | None = None) -> FitProblem:
    """The :class:`FitProblem` of :func:`fit_profile`'s arguments; call it, and its functions, under
    ``jax.enable_x64(True)``."""
    if loss not in LOSSES:
        raise InputError(f"loss {loss!r} is not one of {', '.join(LOSSES)}")
    slices = sorted(set(keys))
    index = {k: i for i, k in enumerate(slices)}
    extra = ["token_budget"] if fit_token_budget else []
    names = [f for _ in slices for f in FIELDS] + list(FRAMEWORK_FIELDS) + extra
    lo, hi = _limits(names)
    fixed = [(held or {}).get(k, {}).get(f) for k in slices for f in FIELDS]
    theta0 = [start.fields(*k)[f] for k in slices for f in FIELDS]
    theta0 = [t if v is None else v for t, v in zip(theta0, fixed)]
    theta0 += [start.overheads[f] for f in FRAMEWORK_FIELDS]
    for j, v in enumerate(fixed):
        if v is not None:
            lo[j] = hi[j] = float(v)
    theta0 += [start.token_budget or float(np.max(np.asarray(rows.token_budget)))] * len(extra)
    n_fw = len(slices) * len(FIELDS) + len(FRAMEWORK_FIELDS)
    kernel_s, context_kernel_s = _kernel_times(start)
    u0 = jnp.asarray(_to_u(theta0, lo, hi))
    slice_of_row = jnp.asarray([index[k] for k in keys])
    meas = jnp.asarray(np.asarray(measured, np.float64))

    @jax.jit
    def data(u):
        eff = _efficiency(u[:n_fw], slice_of_row, len(slices), lo[:n_fw], hi[:n_fw], kernel_s, context_kernel_s)
        r = rows
        if extra:
            budget = _to_theta(u[n_fw:], lo[n_fw:], hi[n_fw:])[0]
            r = dataclasses.replace(rows, token_budget=jnp.full(rows.token_budget.shape, budget))
        return jnp.log(jax.vmap(row_value)(r, eff) / meas)

    def residuals(u):
        return jnp.concatenate([robust(data(u) / ROW_SIGMA, loss), (u - u0) / PRIOR_WIDTH])

    return FitProblem(slices=slices, extra=extra, lo=lo, hi=hi, u0=u0, data=data, residuals=residuals)


def fit_profile(rows: RowInputs, measured, keys: list[tuple[str, str]], start: Profile, *,
                iterations: int = 200, fit_token_budget: bool = False, loss: str = "l2",
                held: dict | None = None) -> ProfileFit:
    """Fit the slices of ``keys`` (one (device, format) per row of ``rows``) and the overheads to ``measured``
    (per row what it measures, SI: :func:`~sweepkit.validation.steady.row_value`), starting from (and pulled toward) ``start``.
    ``held`` ((device, format) -> {field: value}) keeps fields at given values (measured kernel tables:
    data, not fitted). The problem is :func:`fit_problem`'s, solved by :func:`levenberg_marquardt`.

    Example:
      Rows generated by the measured model at known fields are fitted back to < 1 % error
      (tests/validation/test_profile_fit.py).
    """
    with jax.enable_x64(True):
        prob = fit_problem(rows, measured, keys, start, fit_token_budget=fit_token_budget, loss=loss, held=held)
        before = np.asarray(prob.data(prob.u0))
        u, used = levenberg_marquardt(prob.residuals, prob.u0, iterations)
        theta = np.asarray(_to_theta(u, prob.lo, prob.hi))
        after = np.asarray(prob.data(u))
    slices, n_fw, extra = prob.slices, prob.n_fw, prob.extra
    kernel_s, context_kernel_s = _kernel_times(start)
    per = theta[: len(slices) * len(FIELDS)].reshape(len(slices), len(FIELDS))
    fitted_rows = dataclasses.replace(rows, token_budget=jnp.full(rows.token_budget.shape, theta[n_fw])) if extra else rows
    kept = {f: float(start.overheads[f]) for f in (KERNEL_FIELD, CONTEXT_KERNEL_FIELD) if f in start.overheads}
    return ProfileFit(slices={k: dict(zip(FIELDS, map(float, per[i]))) for i, k in enumerate(slices)},
                      overheads={**dict(zip(FRAMEWORK_FIELDS, map(float, theta[len(slices) * len(FIELDS):n_fw]))),
                                 **kept},
                      residuals_before=before, residuals_after=after, iterations=used,
                      token_budget=float(theta[n_fw]) if extra else 0.0,
                      identified=_identified(fitted_rows, keys, slices, per,
                                             {**dict(zip(FRAMEWORK_FIELDS, theta[len(slices) * len(FIELDS):n_fw])),
                                              KERNEL_FIELD: kernel_s, CONTEXT_KERNEL_FIELD: context_kernel_s}))
