"""One pricing API for every step an engine runs: decode, verify, whole-prompt prefill, chunked-mixed, draft.

An :class:`Instance` is one model replica: a device, tensor- and pipeline-parallel degrees, formats, the
target and (optionally) a draft with its draft length gamma. A step is one target pass over the work of its
decode rows and prompt chunks (:mod:`sweepkit.costmodel.passes`), plus, with a draft, gamma sequential draft
decode passes over the decode rows and the draft's prefill over the same chunks:

    decode rows (b rows, ctx cached tokens, c = gamma + 1 positions each):  verify_work(ctx, b, c)
    prompt chunks (p0 cached, n new tokens each):                            sum_i chunk_work(p0_i, n_i)
    t_step = T_target(decode rows + chunks) + sum_{j<gamma} T_draft(decode_work(ctx + j b, b)) + T_draft(chunks)

Pipeline parallelism (GPipe, no overlap across steps, communication not overlapped with compute): with pp
stages and mb = min(microbatches, max(1, T)) micro-batches of the step's T tokens, a slot is the roofline of
one stage (tp devices) over F / (mb pp) FLOPs and W / pp + O / (mb pp) bytes (W weight bytes: every
micro-batch re-reads its stage's weights; O the KV and activation bytes), and

    t = (mb + pp - 1) (t_slot + t_allreduce_slot + t_hop) + overhead,   bubble = (pp - 1) / (mb + pp - 1)

with 2 L / pp ring all-reduces of (T / mb) D x 2 bytes per slot and one stage-to-stage hop of the same size.
At pp = 1, mb = 1 this is the tensor-parallel pass of :func:`sweepkit.costmodel.passes.pass_cost` exactly.

Energies are dynamic (compute, HBM and link joules; idle power is charged once per GPU over the whole
horizon by the caller).

References:
  Huang et al., "GPipe", NeurIPS 2019, arXiv:1811.06965 (bubble fraction, sec. 2.2);
  Agrawal et al., "Sarathi-Serve", OSDI 2024, arXiv:2403.02310 (mixed prefill/decode steps);
  Leviathan et al., "Fast Inference from Transformers via Speculative Decoding", ICML 2023, arXiv:2211.17192.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays
from sweepkit.costmodel.passes import (ACTIVATION_BYTES, Work, combine, decode_work, flops_and_bytes, streamed_params,
                                       verify_work)
from sweepkit.costmodel.roofline import roofline


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Instance:
    """One model replica, all scalars (stackable along grid axes).

    Attributes:
      device: the accelerator (per chip).  target, draft: networks (draft ``present`` = 0 without one).
      tp, pp: tensor- and pipeline-parallel degrees (devices = tp x pp).  microbatches: GPipe micro-batches.
      weight_bytes, kv_bytes: bytes per weight / per KV value.  compute_speedup: native multiple of the
      compute format over bf16.  gamma: drafted tokens per verify pass (0 without a draft).
    """

    device: DeviceArrays
    target: ModelArrays
    draft: ModelArrays
    tp: jax.Array
    pp: jax.Array
    microbatches: jax.Array
    weight_bytes: jax.Array
    kv_bytes: jax.Array
    compute_speedup: jax.Array
    gamma: jax.Array

    @property
    def devices(self) -> jax.Array:
        return self.tp * self.pp


def target_pass(inst: Instance, work: Work):
    """One target pass (TP ring all-reduces, PP slots, the fixed overhead): (seconds, dynamic joules).

    Example:
      Llama-3-70B TP4 on H100 at batch 1: 160 all-reduces x 30 us = 4.8 ms of the pass (sec. 3 of the
      cost-model docs); at pp = 2, mb = 2 the pass takes 3 slots.
    """
    dev, net, tp, pp = inst.device, inst.target, inst.tp, inst.pp
    flops, bytes_ = flops_and_bytes(work, net, inst.weight_bytes, inst.kv_bytes)
    w_bytes = (streamed_params(work.tokens, net) + work.tokens * net.d_model) * inst.weight_bytes * net.present
    mb = jnp.minimum(inst.microbatches, jnp.maximum(1.0, work.tokens))
    slot = roofline(flops / (mb * pp), w_bytes / pp + (bytes_ - w_bytes) / (mb * pp), dev, tp,
                    inst.compute_speedup, 0.0)
    size = work.tokens / mb * net.d_model * ACTIVATION_BYTES
    n_ar = 2.0 * net.n_layers / pp * net.present
    ar_s = n_ar * (2.0 * (tp - 1.0) / tp * size / dev.link_bytes_per_s + 2.0 * (tp - 1.0) * dev.link_latency_s)
    hop_s = jnp.where(pp > 1.0, size / dev.link_bytes_per_s + dev.link_latency_s, 0.0) * net.present
    slots = mb + pp - 1.0
    fixed = (dev.pass_overhead_s + dev.token_overhead_s * work.tokens) * net.present
    t = slots * (slot.t_s + ar_s + hop_s) + fixed
    dyn_slot = slot.energy_j - dev.idle_w * tp * slot.t_s
    link_bits = (mb * pp * n_ar * 2.0 * (tp - 1.0) * size + mb * (pp - 1.0) * size) * 8.0
    return t, mb * pp * dyn_slot + link_bits * dev.link_energy_per_bit_j


def draft_pass(inst: Instance, work: Work):
    """One draft pass: no overhead, no communication, the instance's devices as one: (seconds, dynamic joules)."""
    dev, net = inst.device, inst.draft
    flops, bytes_ = flops_and_bytes(work, net, inst.weight_bytes, inst.kv_bytes)
    c = roofline(flops, bytes_, dev, inst.devices, inst.compute_speedup, 0.0)
    return c.t_s * net.present, (c.energy_j - dev.idle_w * inst.devices * c.t_s) * net.present


def step_cost(inst: Instance, ctx: jax.Array, rows: jax.Array, chunks: Work, gamma_max: int):
    """A step of ``rows`` decode rows holding ``ctx`` cached tokens, plus prompt chunks: (seconds, dynamic joules).

    Args:
      inst: the replica.  ctx: cached tokens over the decode rows (>= 0).  rows: decode rows b (>= 0).
      chunks: the step's prompt chunks, combined (:func:`sweepkit.costmodel.passes.combine` of
        ``chunk_work``; zeros for a decode-only step).
      gamma_max: static bound on ``inst.gamma`` (draft passes priced, masked to gamma).

    Returns:
      (t_s, energy_j); (0, 0) for an empty step.

    Example:
      A whole-prompt prefill step is ``step_cost(inst, 0, 0, chunk_work(0, p), g)``; a plain decode step
      ``step_cost(inst, ctx, b, Work(0, 0, 0), 0)`` equals one target decode pass.
    """
    positions = inst.gamma * (rows > 0) + 1.0
    t, e = target_pass(inst, combine(verify_work(ctx, rows, positions), chunks))
    t_d, e_d = draft_pass(inst, chunks)
    t, e = t + t_d, e + e_d
    for j in range(gamma_max):
        t_j, e_j = draft_pass(inst, decode_work(ctx + j * rows, rows))
        on = (j < inst.gamma) & (rows > 0)
        t, e = t + jnp.where(on, t_j, 0.0), e + jnp.where(on, e_j, 0.0)
    empty = (rows <= 0) & (chunks.tokens <= 0)
    return jnp.where(empty, 0.0, t), jnp.where(empty, 0.0, e)
