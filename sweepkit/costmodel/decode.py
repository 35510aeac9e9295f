"""One decode point: plain decoding against speculative decoding on the same hardware.

For B rows of S tokens each (total cached context C = B S), a draft of length gamma and acceptance alpha
(seed-system.md sec. 3, "How the chapter's decode table is computed"):

    s/token plain = t_decode(C, B) / B
    s/token spec  = (t_verify(C, B, gamma + 1) + sum_{j<gamma} t_draft(C + j B, B)) / (B E[tokens])

E[tokens] = (1 - alpha^(gamma+1)) / (1 - alpha) (Leviathan et al. 2023, Eq. 1). Target passes pay the
per-pass overhead and tensor-parallel all-reduces; draft passes pay neither and run on the instance's
n devices. Leviathan's c is measured on this hardware: one draft pass over one plain target pass.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp

from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays
from sweepkit.costmodel.memory import kv_capacity_tokens, resident_bytes
from sweepkit.costmodel.passes import decode_work, pass_cost, verify_work
from sweepkit.costmodel.roofline import PassCost
from sweepkit.speculative import expected_tokens


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class DecodeInputs:
    """One grid point, all scalar arrays (B batch, S context per row, gamma, alpha; formats as numbers)."""

    device: DeviceArrays
    target: ModelArrays
    draft: ModelArrays
    tp: jax.Array
    batch: jax.Array
    context: jax.Array
    gamma: jax.Array
    alpha: jax.Array
    weight_bytes: jax.Array
    kv_bytes: jax.Array
    compute_speedup: jax.Array


def draft_passes(p: DecodeInputs, ctx: jax.Array, gamma_max: int) -> PassCost:
    """gamma sequential draft decode passes at contexts C + j B, j = 0..gamma-1 (masked up to gamma_max)."""
    j = jnp.arange(gamma_max, dtype=ctx.dtype)

    def one(jj):
        return pass_cost(decode_work(ctx + jj * p.batch, p.batch), p.draft, p.device, p.tp, p.weight_bytes,
                         p.kv_bytes, p.compute_speedup, target=False)

    each = jax.vmap(one)(j)
    mask = (j < p.gamma).astype(ctx.dtype)
    bound = each.bound[0]
    return PassCost(jnp.sum(each.t_s * mask), jnp.sum(each.energy_j * mask), bound,
                    jnp.sum(each.flops * mask), jnp.sum(each.bytes * mask))


def decode_point(p: DecodeInputs, gamma_max: int) -> dict[str, jax.Array]:
    """Evaluate one decode point (see the module docstring); ``gamma_max`` >= gamma is static.

    Returns:
      A dict of scalar arrays: tokens_per_pass, t_plain_pass_s, t_draft_s, t_verify_pass_s,
      s_per_token_plain, s_per_token_spec, speedup, plain_bound, verify_bound (codes into BOUNDS),
      energy_per_token_plain_j, energy_per_token_spec_j, draft_cost_ratio, kv_capacity_tokens,
      weight_bytes_per_device, fits_in_memory (bool).
    """
    ctx = p.batch * p.context
    present = p.draft.present > 0
    plain = pass_cost(decode_work(ctx, p.batch), p.target, p.device, p.tp, p.weight_bytes, p.kv_bytes,
                      p.compute_speedup)
    verify = pass_cost(verify_work(ctx, p.batch, p.gamma + 1.0), p.target, p.device, p.tp, p.weight_bytes,
                       p.kv_bytes, p.compute_speedup)
    drafts = draft_passes(p, ctx, gamma_max)
    first_draft = pass_cost(decode_work(ctx, p.batch), p.draft, p.device, p.tp, p.weight_bytes, p.kv_bytes,
                            p.compute_speedup, target=False)
    tokens = jnp.where(present, expected_tokens(p.alpha, p.gamma), 1.0)
    t_verify = jnp.where(present, verify.t_s, plain.t_s)
    e_verify = jnp.where(present, verify.energy_j, plain.energy_j)
    s_plain = plain.t_s / p.batch
    s_spec = (t_verify + drafts.t_s) / (p.batch * tokens)
    capacity = kv_capacity_tokens(p.device, p.tp, p.target, p.draft, p.weight_bytes, p.kv_bytes)
    positions = jnp.where(present, p.gamma + 1.0, 1.0)
    return {
        "tokens_per_pass": tokens,
        "t_plain_pass_s": plain.t_s,
        "t_draft_s": drafts.t_s,
        "t_verify_pass_s": t_verify,
        "s_per_token_plain": s_plain,
        "s_per_token_spec": s_spec,
        "speedup": s_plain / s_spec,
        "plain_bound": plain.bound,
        "verify_bound": jnp.where(present, verify.bound, plain.bound),
        "energy_per_token_plain_j": plain.energy_j / p.batch,
        "energy_per_token_spec_j": (e_verify + drafts.energy_j) / (p.batch * tokens),
        "draft_cost_ratio": first_draft.t_s / plain.t_s,
        "kv_capacity_tokens": capacity,
        "weight_bytes_per_device": resident_bytes(p.target, p.draft, p.weight_bytes) / p.tp,
        "fits_in_memory": (capacity > 0) & (p.batch * (p.context + positions) <= capacity),
    }


@partial(jax.jit, static_argnames="gamma_max")
def decode_point_jit(p: DecodeInputs, gamma_max: int) -> dict[str, jax.Array]:
    return decode_point(p, gamma_max)
