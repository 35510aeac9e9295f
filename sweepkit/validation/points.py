"""Measured points priced by the cost model: one decode step at the measured batch and context.

For a point with B rows of S cached tokens on a device with efficiencies theta = (mfu, mbu, t_0, t_tok):

    t_step(theta) = pass_cost(decode_work(B S, B), model, device(theta), tp, formats).t_s
    step_time     = t_step                     decode_tok_s = B / t_step

(sweepkit.costmodel.steps). :func:`modelled_value` is written for ONE point and vmapped over a file's
points; it is differentiable in theta, which is what sweepkit.validation.fit uses. Throughput and latency
points are simulated by the serving engine at the measured load (sweepkit.validation.serving_points).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.catalogue import Device, get_device, get_format, get_model
from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays, device_arrays, model_arrays
from sweepkit.costmodel.passes import decode_work
from sweepkit.costmodel.steps import pass_cost
from sweepkit.validation.floor import below_floor, chunk_timed
from sweepkit.validation.measurements import PER_PASS, Measurement
from sweepkit.validation.profiles import priced_by_profile, steady_row
from sweepkit.validation.serving_points import MODELLED, serving_status
from sweepkit.validation.serving_runs import evaluate_serving_points
from sweepkit.validation.steady_rows import node_test

NEEDS_ACCEPTANCE = "not modelled yet (needs the draft's measured acceptance)"


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PointInputs:
    """One measured per-pass point as scalar arrays (stacked along a leading axis for many points).

    Attributes:
      device, model: the catalogue entries.  tp: n devices.  batch: B rows.  context: S tokens per row.
      weight_bytes, kv_bytes: bytes per value.  compute_speedup: k.  rate: 1 for decode_tok_s (B / t),
      0 for step_time (t).
    """

    device: DeviceArrays
    model: ModelArrays
    tp: jax.Array
    batch: jax.Array
    context: jax.Array
    weight_bytes: jax.Array
    kv_bytes: jax.Array
    compute_speedup: jax.Array
    rate: jax.Array


SPEEDUP = "not modelled: a published speed-up (levers are priced through measured pairs: pair_id)"


def status(m: Measurement) -> str:
    """Whether the cost model or the serving engine prices ``m`` (MODELLED) or why not."""
    if m.unknown:
        return f"not modelled: {m.unknown}"
    if m.metric == "speedup":
        return SPEEDUP
    if m.draft != "none":
        return NEEDS_ACCEPTANCE
    if floor := below_floor(m) or chunk_timed(m):
        return floor
    if m.metric not in PER_PASS and node_test(m):     # the steady state alone prices a pool's node test
        return MODELLED if steady_row(m) else serving_status(m)
    if m.metric not in PER_PASS:
        return serving_status(m)        # the serving engine prices pp / ep / dp layouts (row_layout)
    if m.pp > 1:
        return f"not modelled: pipeline parallelism (pp = {m.pp}) in a per-pass row"
    if m.ep > 1:
        return f"not modelled: expert parallelism (ep = {m.ep}) in a per-pass row"
    if m.dp > 1 and m.dp * m.tp != m.gpus:
        return f"not modelled: dp = {m.dp} with tp = {m.tp} on {m.gpus} GPUs (data-parallel attention) in a per-pass row"
    return MODELLED


def with_efficiency(dev: DeviceArrays, mfu: jax.Array, mbu: jax.Array, overhead_s: jax.Array,
                    token_overhead_s: jax.Array | None = None) -> DeviceArrays:
    """The device with its achievable compute fraction, HBM fraction and per-pass (and per-token) overhead
    replaced (``token_overhead_s`` None: kept)."""
    ones = jnp.ones_like(dev.flops_efficiency)
    tok = dev.token_overhead_s if token_overhead_s is None else token_overhead_s * ones
    return dataclasses.replace(dev, flops_efficiency=mfu * ones, bandwidth_efficiency=mbu * ones,
                               pass_overhead_s=overhead_s * ones, token_overhead_s=tok)


def modelled_value(p: PointInputs) -> jax.Array:
    """The cost model's value of ONE point: t_step (s) or B / t_step (tokens/s)."""
    cost = pass_cost(decode_work(p.batch * p.context, p.batch), p.model, p.device, p.tp, p.weight_bytes,
                     p.kv_bytes, p.compute_speedup)
    return jnp.where(p.rate > 0, p.batch / cost.t_s, cost.t_s)


def point_inputs(points: list[Measurement], devices: dict[str, Device] | None = None,
                 dtype=jnp.float64) -> PointInputs:
    """Stack per-pass points (each ``status`` MODELLED) into :class:`PointInputs` with a leading axis.

    ``devices`` maps names to :class:`Device` entries that replace the catalogue's (a calibrated file).
    """
    devices = devices or {}
    devs = [devices.get(m.device) or get_device(m.device) for m in points]

    def col(values):
        return jnp.asarray(np.asarray(values, dtype=np.float64), dtype=dtype)

    return PointInputs(
        device=device_arrays(devs, dtype), model=model_arrays([get_model(m.model) for m in points], dtype),
        tp=col([m.tp for m in points]), batch=col([m.batch for m in points]),
        context=col([m.context_tokens for m in points]),
        weight_bytes=col([get_format(m.weight_format).bytes_per_value for m in points]),
        kv_bytes=col([get_format(m.kv_format).bytes_per_value for m in points]),
        compute_speedup=col([d.speedup(m.compute_format) for d, m in zip(devs, points)]),
        rate=col([m.metric == "decode_tok_s" for m in points]))


@jax.jit
def modelled_values(p: PointInputs) -> jax.Array:
    """:func:`modelled_value` vmapped over the leading axis."""
    return jax.vmap(modelled_value)(p)


def evaluate_points(points: list[Measurement], devices: dict[str, Device] | None = None,
                    serving: bool = True, progress=None, profile=None,
                    by_profile: dict[int, float] | None = None) -> list[float | None]:
    """Modelled value (base SI) of every point, None where :func:`status` is not MODELLED.

    A simulated point whose run yields no value (no request completed) is None, like one not simulated.
    Per-pass points use ``devices`` (name -> Device) over the catalogue; max-throughput rows that an
    efficiency profile prices (``profile``: a :class:`~sweepkit.catalogue.efficiency.Profile`, "reference"
    for none, None for each row's framework's shipped profile; :mod:`sweepkit.validation.profiles`) take
    its analytic steady state; the other serving points (``serving``: simulate them) use
    :func:`sweepkit.catalogue.get_device`, so run them inside ``sweepkit.catalogue.devices_file`` for a
    calibrated device. ``progress(n)`` is called as serving points are priced (n rows at a time).
    ``by_profile``: :func:`~sweepkit.validation.profiles.priced_by_profile` of ``points`` and ``profile``
    where the caller has it (else computed here).
    """
    idx = [i for i, m in enumerate(points) if status(m) == MODELLED and m.metric in PER_PASS]
    out: list[float | None] = [None] * len(points)
    if idx:
        with jax.enable_x64(True):
            values = np.asarray(modelled_values(point_inputs([points[i] for i in idx], devices)))
        for i, v in zip(idx, values):
            out[i] = float(v)
    by_profile = priced_by_profile(points, profile) if by_profile is None else by_profile
    for i, v in by_profile.items():
        out[i] = v
    if serving:
        sidx = [i for i, m in enumerate(points)
                if m.metric not in PER_PASS and i not in by_profile and status(m) == MODELLED and not node_test(m)]
        for i, v in zip(sidx, evaluate_serving_points([points[i] for i in sidx], progress, profile)):
            out[i] = v if np.isfinite(v) and v > 0 else None
    return out
