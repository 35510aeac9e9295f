"""Time and energy of the simulator's steps, from the per-pass cost model (sweepkit.costmodel.passes).

A decode step over b rows holding ctx cached tokens (seed-system.md sec. 3-4):

    plain:        t = T_target(decode_work(ctx, b))                    (= verify_work(ctx, b, 1))
    speculative:  t = sum_{j<gamma} T_draft(decode_work(ctx + j b, b)) + T_target(verify_work(ctx, b, gamma + 1))

A prefill step of whole prompts p_i: one target pass over combine(chunk_work(0, p_i)) plus the draft's prefill
over the same prompts. Target passes pay the step overhead and the TP all-reduces; draft passes neither.
Energies add the same way (each pass's energy includes idle power over its time).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.arrays import ModelArrays
from sweepkit.costmodel.passes import Work, decode_work, pass_cost, verify_work
from sweepkit.serving.state import Hardware


def _cost(work: Work, net: ModelArrays, hw: Hardware, target: bool):
    c = pass_cost(work, net, hw.device, hw.tp, hw.weight_bytes, hw.kv_bytes, hw.compute_speedup, target=target)
    return c.t_s, c.energy_j


def decode_step_cost(hw: Hardware, ctx: jax.Array, batch: jax.Array, gamma_max: int):
    """One decode step: (seconds, joules). ``gamma_max`` >= gamma draft passes are priced, masked to gamma.

    Args:
      hw: configuration (its ``gamma`` is 0 and its draft absent for plain decoding).
      ctx: cached tokens over all rows.  batch: b rows.  gamma_max: static bound on gamma.

    Returns:
      (t_s, energy_j) of the step.
    """
    t_v, e_v = _cost(verify_work(ctx, batch, hw.gamma + 1.0), hw.target, hw, True)
    for j in range(gamma_max):
        t, e = _cost(decode_work(ctx + j * batch, batch), hw.draft, hw, False)
        on = (j < hw.gamma).astype(t.dtype)
        t_v = t_v + t * on
        e_v = e_v + e * on
    return t_v, e_v


def prefill_step_cost(hw: Hardware, prompts: jax.Array, mask: jax.Array):
    """A prefill step of the ``mask``-ed whole prompts (target + draft prefill): (seconds, joules); 0 if empty."""
    p = prompts * mask
    work = Work(tokens=jnp.sum(p), attn_pairs=jnp.sum(p * (p + 1.0)), kv_tokens=jnp.sum(p))
    t_t, e_t = _cost(work, hw.target, hw, True)
    t_d, e_d = _cost(work, hw.draft, hw, False)
    any_ = jnp.sum(mask) > 0
    return jnp.where(any_, t_t + t_d, 0.0), jnp.where(any_, e_t + e_d, 0.0)
