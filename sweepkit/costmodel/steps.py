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

with n_ar L / pp ring all-reduces of S = (T / mb) D x 2 bytes per slot, each 2 (tp-1)/tp x S / link + 2 (tp-1) x
latency (on a device whose links form a full mesh, the frameworks' one- and two-shot kernels:
:mod:`sweepkit.costmodel.allreduce`), and one stage-to-stage hop of the same size. At pp = 1, mb = 1 this is one tensor-parallel pass:
the roofline, the overhead and n_ar L all-reduces of T D x 2 bytes (:func:`pass_cost`; n_ar = 2, one after
attention and one after the MLP, or 1 where a parallel block all-reduces their sum: ``Model.shared_allreduce``). An instance with a
:class:`~sweepkit.costmodel.layout.Layout` spreads each slot over tp x dp GPUs, adds the layout's work
(expert imbalance, weights copied per attention-DP rank, KV copied over attention-TP) and prices the MoE
all-to-alls (:mod:`sweepkit.costmodel.layout`); its identity layout prices every pass exactly as none. Under
attention DP a prompt chunk runs on its request's rank and the step waits for the busiest rank
(:mod:`sweepkit.costmodel.rank_balance`: its dense and attention work, all-to-all sends and host work). The
per-token host overhead counts the T / dp tokens of one attention-DP rank: each rank schedules its own requests
(SGLang's data-parallel controller starts a scheduler per DP rank, python/sglang/srt/managers/
data_parallel_controller.py; vLLM runs an engine core per DP rank, docs.vllm.ai "Data Parallel Deployment").

An instance with an ``efficiency`` (a measured profile, :mod:`sweepkit.costmodel.efficiency`) takes each
target pass's seconds from the profile's operator-class split (:mod:`sweepkit.costmodel.profiled`; a mixed
step's decode rows and prompt chunks as separate attention classes) and keeps the reference's energy
accounting: the dynamic joules of the pass's FLOPs, HBM bytes and link bits as above, and idle power over the
profiled seconds. Draft passes keep the reference roofline (the profiles are fitted on target models
without drafts). ``efficiency = None`` (the default) prices every pass exactly as before.

Two views of the same pass: :func:`target_pass` and :func:`draft_pass` give (seconds, dynamic joules:
compute, HBM and link; the serving engine charges idle power once per GPU over the whole horizon), while
:func:`target_pass_cost` and :func:`draft_pass_cost` give a :class:`~sweepkit.costmodel.roofline.PassCost`
(seconds, joules with the instance's idle power over the pass, the bound of the pass, FLOPs and bytes) for
the decode grid and the trace, which report per-pass energy and which bound each pass hits. All four, and
:func:`step_cost` and :func:`pass_cost`, price through :func:`_target` and :func:`_draft`: the only code
that turns :class:`~sweepkit.costmodel.passes.Work` into seconds and joules.

References:
  Huang et al., "GPipe", NeurIPS 2019, arXiv:1811.06965 (bubble fraction, sec. 2.2);
  Agrawal et al., "Sarathi-Serve", OSDI 2024, arXiv:2403.02310 (mixed prefill/decode steps);
  Leviathan et al., "Fast Inference from Transformers via Speculative Decoding", ICML 2023, arXiv:2211.17192.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.catalogue import Device, Draft, Format, Model, get_format
from sweepkit.costmodel.allreduce import allreduce_s, tp_allreduces
from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays, device_arrays, model_arrays
from sweepkit.costmodel.efficiency import Efficiency
from sweepkit.costmodel.layout import Layout, layout_work
from sweepkit.costmodel.moe_comm import a2a_busy_s, moe_all_to_all, overlap_microbatches, overlapped
from sweepkit.costmodel.kept import kept_bytes_added, kept_flops_added
from sweepkit.costmodel.passes import (ACTIVATION_BYTES, Work, decode_work, expert_bytes_saved, expert_params_read,
                                       flops_and_bytes, streamed_params, verify_work)
from sweepkit.costmodel.profiled import measured_pass_s, split
from sweepkit.costmodel.rank_balance import busiest_rank_extra, layout_rank_budget, rank_tokens
from sweepkit.costmodel.roofline import PassCost, roofline


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Instance:
    """One model replica, all scalars (stackable along grid axes).

    Attributes:
      device: the accelerator (per chip).  target, draft: networks (draft ``present`` = 0 without one).
      tp, pp: tensor- and pipeline-parallel degrees (devices = tp x pp).  microbatches: GPipe micro-batches.
      weight_bytes, kv_bytes: bytes per weight / per KV value.  compute_speedup: native multiple of the
      compute format over bf16.  gamma: drafted tokens per verify pass (0 without a draft).
      layout: expert and attention-data parallelism (:mod:`sweepkit.costmodel.layout`); None: tp x pp only
        (part of the tree structure: the identity layout prices every pass exactly as None does).
      efficiency: a measured profile timing target passes (:mod:`sweepkit.costmodel.profiled`); None: the
        reference roofline (part of the tree structure, like ``layout``).
      pipelined: static (part of the tree structure, not data). False promises pp = microbatches = 1 and
        prices a pass without the pipeline terms (the decode grid: fewer operations per point); True (the
        default, the serving engine) takes pp and microbatches as data, so layouts share one program.
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
    layout: Layout | None = None
    efficiency: Efficiency | None = None
    pipelined: bool = dataclasses.field(default=True, metadata=dict(static=True))

    @property
    def dp(self):
        """Attention data-parallel ranks (1 without a layout)."""
        return 1.0 if self.layout is None else self.layout.dp

    @property
    def devices(self) -> jax.Array:
        return self.tp * self.pp * self.dp


def instance(device: Device, target: Model, draft: Draft | Model | None, tp: int, weight_format: str | Format,
             kv_format: str | Format, compute_format: str, gamma: int = 0, dtype=None, *, pp: int = 1,
             microbatches: int = 1, pipelined: bool = True, layout: Layout | None = None) -> Instance:
    """The :class:`Instance` of catalogue entries: one replica of tp x pp devices.

    Args:
      device: the accelerator.  target: the served model.  draft: a :class:`~sweepkit.catalogue.Draft`
        (``get_draft``), a draft model, or None.  tp, pp: tensor- and pipeline-parallel degrees (>= 1).
      weight_format, kv_format: format names or :class:`~sweepkit.catalogue.Format` entries (bytes per value).
      compute_format: the matmul format's name (its native speed-up on ``device``).
      gamma: drafted tokens per verify pass (0 without a draft).  dtype: of every leaf (None: JAX's default).
      microbatches: GPipe micro-batches (1 without pipeline parallelism).
      pipelined: False for a replica that never pipelines (pp = microbatches = 1): see :class:`Instance`.
      layout: EP / attention-DP layout (:func:`sweepkit.costmodel.layout.make_layout`; None: tp x pp only).

    Returns:
      The :class:`Instance` (scalar leaves of ``dtype``).

    Example:
      >>> from sweepkit.catalogue import get_device, get_draft, get_model
      >>> m = get_model("llama-3-8b")
      >>> inst = instance(get_device("H100"), m, get_draft("mtp", m), 1, "bf16", "bf16", "bf16", 3)
      >>> round(float(target_pass_cost(inst, decode_work(512.0, 1.0)).t_s) * 1e3, 3)
      6.126
    """
    if not pipelined and (pp, microbatches) != (1, 1):
        raise ValueError(f"pipelined=False needs pp = microbatches = 1, got {pp} and {microbatches}")
    fmt = lambda f, field: f if isinstance(f, Format) else get_format(f, field)  # noqa: E731
    f = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    return Instance(device=device_arrays(device, dtype), target=model_arrays(target, dtype),
                    draft=model_arrays(draft, dtype), tp=f(tp), pp=f(pp), microbatches=f(microbatches),
                    weight_bytes=f(fmt(weight_format, "weight_format").bytes_per_value),
                    kv_bytes=f(fmt(kv_format, "kv_format").bytes_per_value),
                    compute_speedup=f(device.speedup(compute_format)), gamma=f(gamma), pipelined=pipelined,
                    layout=layout)


def _layout_terms(inst: Instance, work: Work):
    """(dF, dW, dO) the layout adds to the pass (:func:`sweepkit.costmodel.layout.layout_work`); 0 without one."""
    if inst.layout is None:
        return 0.0, 0.0, 0.0
    return layout_work(inst.layout, inst.target, work, inst.weight_bytes, inst.kv_bytes)


def _slot_work(inst: Instance, work: Work, flops: jax.Array, bytes_: jax.Array):
    """(pp, mb, FLOPs, bytes) of one pipeline slot over its tp x dp GPUs: (F + dF) / (mb pp) and
    (W + dW) / pp + (O + dO) / (mb pp); on an instance that is not ``pipelined``, (1, 1, F + dF, Bytes + dW +
    dO): the whole pass."""
    d_f, d_w, d_o = _layout_terms(inst, work)
    if not inst.pipelined:
        return 1.0, 1.0, flops + d_f, bytes_ + d_w + d_o
    net, pp = inst.target, inst.pp
    w_bytes = ((streamed_params(work.tokens, net) + work.tokens * net.d_model) * inst.weight_bytes
               + expert_bytes_saved(expert_params_read(work.tokens, net), net, inst.weight_bytes)
               + kept_bytes_added(net.kept_params, net, inst.weight_bytes)) * net.present
    mb = overlap_microbatches(inst.layout, jnp.minimum(inst.microbatches, jnp.maximum(1.0, work.tokens)), work.tokens)
    return pp, mb, (flops + d_f) / (mb * pp), (w_bytes + d_w) / pp + (bytes_ - w_bytes + d_o) / (mb * pp)


def _all_to_all(inst: Instance, tokens_per_gpu: jax.Array, extend: jax.Array = 0.0, mean_tokens_per_gpu=None):
    """(MoE layers priced by all-to-alls or gathers, seconds and bytes per GPU of one such layer); zeros without
    a layout. ``extend``: 1 where the pass holds prompt tokens; ``mean_tokens_per_gpu``: what a gathered
    exchange moves (:func:`sweepkit.costmodel.moe_comm.moe_all_to_all`)."""
    if inst.layout is None:
        return 0.0, 0.0, 0.0
    lay = inst.layout
    t, b = moe_all_to_all(lay, inst.device, inst.target, tokens_per_gpu, extend, mean_tokens_per_gpu)
    return jnp.where(lay.dp > 1.0, lay.moe_layers, 0.0), t, b


def _target(inst: Instance, work: Work, prefill: Work | None = None):
    """One target pass over ``work`` (and the prompt chunks ``prefill`` of a mixed step): (seconds, dynamic
    joules, bound code of a pipeline slot, FLOPs, bytes)."""
    work, decode, prefill = split(work, prefill)
    dev, net, tp = inst.device, inst.target, inst.tp
    flops, bytes_ = flops_and_bytes(work, net, inst.weight_bytes, inst.kv_bytes)
    # kept attention / head GEMMs at their own rate (costmodel.kept; 0 where the checkpoint keeps none)
    k_f = kept_flops_added(work, net, inst.weight_bytes, inst.compute_speedup)
    # the busiest attention-DP rank's prompt chunks (costmodel.rank_balance; nothing added at dp = 1)
    budget = layout_rank_budget(inst.layout)
    d_f, d_o = busiest_rank_extra(inst.dp, net, prefill, inst.weight_bytes, inst.kv_bytes, budget)
    busiest = rank_tokens(inst.dp, decode, prefill, budget)
    pp, mb, slot_flops, slot_bytes = _slot_work(inst, work, flops + d_f + k_f, bytes_ + d_o)
    n = tp * inst.dp
    slot = roofline(slot_flops, slot_bytes, dev, n, inst.compute_speedup, 0.0)
    size = work.tokens / mb * net.d_model * ACTIVATION_BYTES
    extend = jnp.where(prefill.tokens > 0.0, 1.0, 0.0)
    a2a_layers, a2a_s, _ = _all_to_all(inst, busiest / (mb * n), extend, work.tokens / (mb * n))  # busiest sends
    _, _, a2a_bytes = _all_to_all(inst, work.tokens / (mb * n), extend)          # the bytes all GPUs send
    n_ar = tp_allreduces(net, a2a_layers) / pp * net.present
    ar_size = size / inst.dp
    ar_s = n_ar * allreduce_s(ar_size, tp, dev)
    hop_s = jnp.where(pp > 1.0, size / dev.link_bytes_per_s + dev.link_latency_s, 0.0) * net.present
    moe_s = a2a_layers / pp * a2a_s * net.present
    slots = mb + pp - 1.0
    # host work per token runs on each attention-DP rank's own scheduler, over its T / dp tokens
    fixed = (dev.pass_overhead_s + dev.token_overhead_s * busiest / inst.dp) * net.present
    t = slots * (slot.t_s + ar_s + hop_s + moe_s) + fixed
    if inst.layout is not None:                   # two-batch overlap (sweepkit.costmodel.moe_comm.overlapped)
        busy = slots * a2a_layers / pp * a2a_busy_s(inst.layout) * net.present
        tbo = overlapped(slots * slot.t_s, slots * moe_s, a2a_layers, 1.0, busy) + slots * (ar_s + hop_s) + fixed
        t = jnp.where(inst.layout.overlap > 0.0, tbo, t)
    if inst.efficiency is not None:
        t = measured_pass_s(inst, decode, prefill, _layout_terms(inst, work), (a2a_layers, a2a_s))
    dyn_slot = slot.energy_j - dev.idle_w * n * slot.t_s
    link_bits = (mb * pp * n_ar * 2.0 * (tp - 1.0) * ar_size * inst.dp + mb * (pp - 1.0) * size
                 + mb * a2a_layers * n * a2a_bytes * net.present) * 8.0
    return t, mb * pp * dyn_slot + link_bits * dev.link_energy_per_bit_j, slot.bound, flops, bytes_


def _draft(inst: Instance, work: Work) -> PassCost:
    """One draft pass on the instance's devices as one, unmasked (the caller multiplies by ``present``)."""
    flops, bytes_ = flops_and_bytes(work, inst.draft, inst.weight_bytes, inst.kv_bytes)
    k_f = kept_flops_added(work, inst.draft, inst.weight_bytes, inst.compute_speedup)
    return roofline(flops + k_f, bytes_, inst.device, inst.devices, inst.compute_speedup, 0.0)


def target_pass(inst: Instance, work: Work):
    """One target pass (TP ring all-reduces, PP slots, the fixed overhead): (seconds, dynamic joules).

    Example:
      Llama-3-70B TP4 on H100 at batch 1: 160 all-reduces x 30 us = 4.8 ms of the pass (sec. 3 of the
      cost-model docs); at pp = 2, mb = 2 the pass takes 3 slots.
    """
    t, e, *_ = _target(inst, work)
    return t, e


def target_pass_cost(inst: Instance, work: Work) -> PassCost:
    """One target pass as a :class:`PassCost`: :func:`target_pass`'s seconds, its dynamic joules plus the idle
    power of the tp x pp devices over the pass, the bound of one pipeline slot (the whole pass at pp = 1),
    and the pass's FLOPs and HBM bytes."""
    t, e, bound, flops, bytes_ = _target(inst, work)
    return PassCost(t, e + inst.device.idle_w * inst.devices * t, bound, flops, bytes_)


def draft_pass(inst: Instance, work: Work):
    """One draft pass: no overhead, no communication, the instance's devices as one: (seconds, dynamic joules)."""
    c, present = _draft(inst, work), inst.draft.present
    return c.t_s * present, (c.energy_j - inst.device.idle_w * inst.devices * c.t_s) * present


def draft_pass_cost(inst: Instance, work: Work) -> PassCost:
    """One draft pass as a :class:`PassCost` (joules with the devices' idle power over the pass; zero time,
    energy and work without a draft)."""
    c, present = _draft(inst, work), inst.draft.present
    return PassCost(c.t_s * present, c.energy_j * present, c.bound, c.flops, c.bytes)


def pass_cost(work: Work, model: ModelArrays, dev: DeviceArrays, tp: jax.Array, weight_bytes: jax.Array,
              kv_bytes: jax.Array, compute_speedup: jax.Array, *, target: bool = True) -> PassCost:
    """One pass of ``model`` on ``tp`` devices without pipeline parallelism, outside an :class:`Instance`.

    A target pass (:func:`target_pass_cost`) pays the device's fixed overhead (pass_overhead_s +
    token_overhead_s x T) and the tensor-parallel all-reduces; a draft pass (``target=False``,
    :func:`draft_pass_cost`) pays neither and runs as one device of the instance's size. An absent
    network (``model.present == 0``) costs nothing.
    """
    one = jnp.ones_like(dev.pass_overhead_s)
    absent = jax.tree_util.tree_map(jnp.zeros_like, model)
    inst = Instance(device=dev, target=model if target else absent, draft=absent if target else model,
                    tp=tp * one, pp=one, microbatches=one, weight_bytes=weight_bytes * one, kv_bytes=kv_bytes * one,
                    compute_speedup=compute_speedup * one, gamma=0.0 * one, pipelined=False)
    return target_pass_cost(inst, work) if target else draft_pass_cost(inst, work)


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
      A whole-prompt prefill step is ``step_cost(inst, 0, 0, chunk_work(0, p), g)`` (with a draft, plus its
      prefill); a plain decode step ``step_cost(inst, ctx, b, Work(0, 0, 0), 0)`` equals one target decode
      pass, and with a draft the step is the verify pass plus gamma draft decode passes (no draft prefill).
    """
    positions = inst.gamma * (rows > 0) + 1.0
    t, e, *_ = _target(inst, verify_work(ctx, rows, positions), chunks)

    def drafted(te):
        t, e = te
        t_d, e_d = draft_pass(inst, chunks)
        prefill = chunks.tokens > 0                   # a step without prompt chunks runs no draft prefill
        t, e = t + jnp.where(prefill, t_d, 0.0), e + jnp.where(prefill, e_d, 0.0)
        def draft_decode(j, te):        # one copy of the pass in the program, not gamma_max
            t_j, e_j = draft_pass(inst, decode_work(ctx + j * rows, rows))
            on = (j < inst.gamma) & (rows > 0)
            return te[0] + jnp.where(on, t_j, 0.0), te[1] + jnp.where(on, e_j, 0.0)
        return jax.lax.fori_loop(0, gamma_max, draft_decode, (t, e))

    # Without a draft every draft pass costs exactly 0: skipped (a real branch outside vmap over instances).
    t, e = jax.lax.cond(inst.draft.present > 0, drafted, lambda te: te, (t, e))
    empty = (rows <= 0) & (chunks.tokens <= 0)
    return jnp.where(empty, 0.0, t), jnp.where(empty, 0.0, e)
