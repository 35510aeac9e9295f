"""One decode point: plain decoding against speculative decoding on the same hardware.

For B rows of S tokens each (total cached context C = B S), a draft of length gamma and acceptance alpha
(github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim, "How the chapter's decode table is computed"):

    s/token plain = t_decode(C, B) / B
    s/token spec  = (t_verify(C, B, gamma + 1) + sum_{j<gamma} t_draft(C + j B, B)) / (B E[tokens])

E[tokens] = 1 + sum_{k<=gamma} prod_{i<=k} alpha_i for per-position acceptance alpha_1..alpha_P, which is
(1 - alpha^(gamma+1)) / (1 - alpha) when every alpha_i is alpha (Leviathan et al. 2023, Eq. 1; computed by
that closed form then, :func:`tokens_per_pass`). Every pass is priced by the pricing API of the serving
engine and the trace (:func:`sweepkit.costmodel.steps.target_pass_cost` and
:func:`~sweepkit.costmodel.steps.draft_pass_cost` on the point's :class:`~sweepkit.costmodel.steps.Instance`):
target passes pay the per-pass overhead and tensor-parallel all-reduces; draft passes pay neither and run on
the instance's n devices. Leviathan's c is measured on this hardware: one draft pass over one plain target pass.

The point is computed in three stages so a grid can share work: :func:`hardware_stage` (independent of
gamma and alpha: the plain pass and the cumulative cost of up to gamma_max draft passes),
:func:`verify_stage` (depends on gamma) and :func:`finish` (combines them with alpha). :func:`decode_point`
chains them for ONE point; the sweep engine vmaps each stage over its own axes.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp

from sweepkit.costmodel.memory import kv_capacity_tokens, resident_bytes, sequence_positions
from sweepkit.costmodel.passes import decode_work, verify_work
from sweepkit.costmodel.roofline import PassCost
from sweepkit.costmodel.steps import Instance, draft_pass_cost, target_pass_cost
from sweepkit.speculative import expected_tokens, expected_tokens_positional


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class DecodeInputs:
    """One grid point: the replica, B rows of S tokens, and the acceptance of its draft positions.

    Attributes:
      inst: the replica (:class:`~sweepkit.costmodel.steps.Instance`, not pipelined; its gamma is the point's).
      batch: B rows.  context: S cached tokens per row.
      alphas: [P] conditional acceptance of draft positions 1..P (P >= gamma; all equal for i.i.d. alpha).
    """

    inst: Instance
    batch: jax.Array
    context: jax.Array
    alphas: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class HardwareStage:
    """What a point costs before gamma and alpha are chosen.

    Attributes:
      plain: the plain decode pass.
      draft_cum_t_s, draft_cum_energy_j: [gamma_max + 1] cumulative time / energy of the first j draft
        passes (index 0 is 0).
      first_draft_t_s: one draft pass at context C (Leviathan's c numerator).
      kv_capacity_tokens, weight_bytes_per_device: memory fit.
    """

    plain: PassCost
    draft_cum_t_s: jax.Array
    draft_cum_energy_j: jax.Array
    first_draft_t_s: jax.Array
    kv_capacity_tokens: jax.Array
    weight_bytes_per_device: jax.Array


def hardware_stage(p: DecodeInputs, gamma_max: int) -> HardwareStage:
    """Plain pass and the cumulative cost of draft passes j = 0..gamma_max-1 at contexts C + j B."""
    inst, ctx = p.inst, p.batch * p.context
    plain = target_pass_cost(inst, decode_work(ctx, p.batch))
    j = jnp.arange(max(gamma_max, 1), dtype=ctx.dtype)
    each = jax.vmap(lambda jj: draft_pass_cost(inst, decode_work(ctx + jj * p.batch, p.batch)))(j)
    zero = jnp.zeros((1,), ctx.dtype)
    capacity = kv_capacity_tokens(inst.device, inst.devices, inst.target, inst.draft, inst.weight_bytes,
                                  inst.kv_bytes)
    return HardwareStage(
        plain=plain,
        draft_cum_t_s=jnp.concatenate([zero, jnp.cumsum(each.t_s)]),
        draft_cum_energy_j=jnp.concatenate([zero, jnp.cumsum(each.energy_j)]),
        first_draft_t_s=each.t_s[0],
        kv_capacity_tokens=capacity,
        weight_bytes_per_device=resident_bytes(inst.target, inst.draft, inst.weight_bytes) / inst.devices)


def verify_stage(p: DecodeInputs, gamma: jax.Array) -> PassCost:
    """The target's verify pass over gamma + 1 positions per row."""
    return target_pass_cost(p.inst, verify_work(p.batch * p.context, p.batch, gamma + 1.0))


def finish_outer(p: DecodeInputs, hw: HardwareStage) -> dict[str, jax.Array]:
    """Outputs that depend on neither gamma nor alpha (one value per outer point)."""
    present = p.inst.draft.present > 0
    return {
        "t_plain_pass_s": hw.plain.t_s,
        "s_per_token_plain": hw.plain.t_s / p.batch,
        "plain_bound": hw.plain.bound,
        "energy_per_token_plain_j": hw.plain.energy_j / p.batch,
        "draft_cost_ratio": hw.first_draft_t_s * present / hw.plain.t_s,
        "kv_capacity_tokens": hw.kv_capacity_tokens,
        "weight_bytes_per_device": hw.weight_bytes_per_device,
    }


def finish_gamma(p: DecodeInputs, hw: HardwareStage, verify: PassCost, gamma: jax.Array) -> dict[str, jax.Array]:
    """Outputs that depend on gamma but not alpha: the verify pass, the draft passes, the memory fit."""
    present = p.inst.draft.present > 0
    g = gamma.astype(jnp.int32)
    positions = jnp.where(present, gamma + 1.0, 1.0)
    return {
        "t_draft_s": hw.draft_cum_t_s[g] * present,
        "t_verify_pass_s": jnp.where(present, verify.t_s, hw.plain.t_s),
        "verify_bound": jnp.where(present, verify.bound, hw.plain.bound),
        "fits_in_memory": (hw.kv_capacity_tokens > 0)
        & (p.batch * sequence_positions(p.inst.target, p.inst.draft, p.context + positions, p.inst.kv_bytes)
           <= hw.kv_capacity_tokens),
        # carried to finish_point, not an output column:
        "_energy_pass_j": jnp.where(present, verify.energy_j, hw.plain.energy_j) + hw.draft_cum_energy_j[g] * present,
    }


def finish_point(p: DecodeInputs, outer: dict, per_gamma: dict, tokens: jax.Array) -> dict[str, jax.Array]:
    """Outputs of one (gamma, alpha): per-token time and energy with speculation, and the speed-up.

    ``tokens`` is E[tokens per pass] (:func:`tokens_per_pass`); it is forced to 1 without a draft.
    """
    tokens = jnp.where(p.inst.draft.present > 0, tokens, 1.0)
    s_spec = (per_gamma["t_verify_pass_s"] + per_gamma["t_draft_s"]) / (p.batch * tokens)
    return {
        "tokens_per_pass": tokens,
        "s_per_token_spec": s_spec,
        "speedup": outer["s_per_token_plain"] / s_spec,
        "energy_per_token_spec_j": per_gamma["_energy_pass_j"] / (p.batch * tokens),
    }


def tokens_per_pass(alphas: jax.Array, gamma: jax.Array) -> jax.Array:
    """E[tokens per verify pass] for per-position alphas [P] and gamma <= P: Leviathan's closed form (Eq. 1)
    when every alpha_i is equal, so i.i.d. points give exactly the i.i.d. result, else 1 + sum prod alpha_i."""
    equal = jnp.all(alphas == alphas[0])
    return jnp.where(equal, expected_tokens(alphas[0], gamma), expected_tokens_positional(alphas, gamma))


def finish(p: DecodeInputs, hw: HardwareStage, verify: PassCost, gamma: jax.Array,
           alphas: jax.Array) -> dict[str, jax.Array]:
    """All outputs of one (gamma, alphas) point: :func:`finish_outer`, :func:`finish_gamma`, :func:`finish_point`."""
    outer = finish_outer(p, hw)
    per_gamma = finish_gamma(p, hw, verify, gamma)
    point = finish_point(p, outer, per_gamma, tokens_per_pass(alphas, gamma))
    per_gamma = {k: v for k, v in per_gamma.items() if not k.startswith("_")}
    return {**outer, **per_gamma, **point}


def decode_point(p: DecodeInputs, gamma_max: int) -> dict[str, jax.Array]:
    """Evaluate one decode point (see the module docstring); static ``gamma_max`` >= gamma.

    Returns:
      A dict of scalar arrays: tokens_per_pass, t_plain_pass_s, t_draft_s, t_verify_pass_s,
      s_per_token_plain, s_per_token_spec, speedup, plain_bound, verify_bound (codes into BOUNDS),
      energy_per_token_plain_j, energy_per_token_spec_j, draft_cost_ratio, kv_capacity_tokens,
      weight_bytes_per_device, fits_in_memory (bool).
    """
    hw = hardware_stage(p, gamma_max)
    return finish(p, hw, verify_stage(p, p.inst.gamma), p.inst.gamma, p.alphas)


@partial(jax.jit, static_argnames="gamma_max")
def decode_point_jit(p: DecodeInputs, gamma_max: int) -> dict[str, jax.Array]:
    return decode_point(p, gamma_max)
