"""The decode explorer: one decode point and its speed-up-vs-batch curve, one compiled program.

For a device, target, draft, batch B, context S per row, gamma and alpha (i.i.d.), the JAX cost model
(:func:`sweepkit.costmodel.decode.decode_point`) gives

    s/token plain = t_decode(B S, B) / B
    s/token spec  = (t_verify(B S, B, gamma + 1) + sum_{j<gamma} t_draft(B S + j B, B)) / (B E[tokens])
    E[tokens]     = (1 - alpha^(gamma+1)) / (1 - alpha)          (Leviathan et al. 2023, Eq. 1)

evaluated at B and at every batch of :data:`CURVE_BATCHES` in ONE ``vmap``-ped call. The draft loop is
compiled for gamma <= :data:`GAMMA_MAX` (gamma is data), so any change costs an evaluation, not a compile.
The break-even batch is the first batch at which the speed-up falls to 1, interpolated in log2(batch)
between the curve's neighbouring points (None when speculation wins or loses at every batch).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.catalogue import get_device, get_draft, get_model
from sweepkit.costmodel.decode import DecodeInputs, decode_point
from sweepkit.costmodel.roofline import BOUNDS
from sweepkit.costmodel.steps import instance

GAMMA_MAX = 16
"""Longest draft the program prices (gamma in [0, 16])."""
CURVE_BATCHES = tuple(int(b) for b in np.unique(np.round(np.geomspace(1, 1024, 31))))
"""Batches of the speed-up-vs-batch curve, 1..1,024 geometric."""
FIELDS = ("s_per_token_plain", "s_per_token_spec", "speedup", "tokens_per_pass", "t_plain_pass_s",
          "t_verify_pass_s", "t_draft_s", "energy_per_token_plain_j", "energy_per_token_spec_j",
          "kv_capacity_tokens", "fits_in_memory", "plain_bound", "verify_bound")


@jax.jit
def _points(p: DecodeInputs):
    return jax.vmap(lambda b: decode_point(DecodeInputs(**{**p.__dict__, "batch": b}), GAMMA_MAX))(p.batch)


def explore(device: str, model: str, draft: str, batch: int, context: int, gamma: int, alpha: float,
            tp: int = 1) -> dict:
    """One decode point and the curve (validated names: catalogue device, model and draft).

    Args:
      device, model, draft: catalogue names (draft: none, mtp or a small model).  batch: rows.
      context: tokens per row.  gamma: drafted tokens per verify pass (0..16).  alpha: acceptance, 0..1.
      tp: tensor-parallel degree.

    Returns:
      dict with the point (ms-free base units: s/token, J/token, bounds as names), ``curve`` (batch,
      speedup lists) and ``break_even_batch``.

    Example:
      >>> r = explore("H100", "llama-3-8b", "mtp", 1, 512, 3, 0.7)
      >>> round(r["s_per_token_plain"] * 1e3, 3), round(r["s_per_token_spec"] * 1e3, 3), r["verify_bound"]
      (6.126, 3.076, 'memory')

    References:
      Leviathan, Kalman, Matias, "Fast Inference from Transformers via Speculative Decoding", ICML 2023
      (arXiv:2211.17192), Eq. 1 and Thm 3.8.
    """
    dev, target = get_device(device), get_model(model)
    drf = get_draft(draft, target)
    batches = np.array((batch,) + CURVE_BATCHES, np.float64)
    with jax.enable_x64(True):
        f = lambda x: jnp.asarray(x, jnp.float64)  # noqa: E731
        p = DecodeInputs(inst=instance(dev, target, drf, tp, "bf16", "bf16", "bf16", gamma, jnp.float64,
                                       pipelined=False),
                         batch=f(batches), context=f(context), alphas=jnp.full((GAMMA_MAX,), alpha, jnp.float64))
        out = jax.device_get(_points(p))
    point = {}
    for k in FIELDS:
        v = out[k][0]
        point[k] = BOUNDS[int(v)] if k.endswith("_bound") else bool(v) if k == "fits_in_memory" else float(v)
    speed = [float(x) for x in out["speedup"][1:]]
    return dict(point, curve=dict(batch=list(CURVE_BATCHES), speedup=speed,
                                  verify_bound=[BOUNDS[int(v)] for v in out["verify_bound"][1:]]),
                break_even_batch=break_even(CURVE_BATCHES, speed))


def break_even(batches, speedup) -> float | None:
    """First batch where the speed-up crosses 1 from above, log2-interpolated; None if it never does.

    Example:
      >>> break_even([1, 2, 4], [1.5, 1.2, 0.8])
      2.8284271247461903
    """
    for i in range(1, len(batches)):
        s0, s1 = speedup[i - 1], speedup[i]
        if s0 > 1.0 >= s1:
            x0, x1 = math.log2(batches[i - 1]), math.log2(batches[i])
            return float(2.0 ** (x0 + (s0 - 1.0) / (s0 - s1) * (x1 - x0)))
    return None
