"""A target pass timed by a measured efficiency profile, with layouts and pipeline slots.

An :class:`~sweepkit.costmodel.steps.Instance` with an ``efficiency`` (:class:`~sweepkit.costmodel.efficiency.
Efficiency`) times each target pass by the operator-class split of :mod:`sweepkit.costmodel.efficiency`
instead of the reference roofline. With pp stages, mb micro-batches (as the reference: mb = min(microbatches,
max(1, T))) and n = tp x dp GPUs per stage, one slot prices the step's decode rows and prompt chunks, each
divided by mb, on n GPUs, a 1 / pp share of the layers:

    t_slot = sum_{c in gemm, moe, attn, kernels} t_c(work / mb; n) / pp + t_allreduce + t_a2a / pp + t_hop + t_layout
    t_layout = max(dF / (mb pp) / (P n k eff(T / mb; g)),  (dW' / pp + dO / (mb pp)) / (B n b_w))
    t = (mb + pp - 1) t_slot + t_0 + t_tok T / dp

Under attention data parallelism the step lasts as long as its busiest rank: the classes a rank runs on its
own requests (dense GEMMs, attention, the attention-TP all-reduces, the host's per-token work) price the prompt
chunks scaled by s = dp P_max / P (:mod:`sweepkit.costmodel.rank_balance`: a chunk runs on its request's
rank), the grouped MoE class the step's own T tokens; s = 1 at dp = 1.

The dense GEMM class is one attention-DP rank's roofline (T / (mb dp) tokens against that rank's copy of the
dense weights, :func:`~sweepkit.costmodel.efficiency.step_time_by_class`' ``dp``), so dW' = dW - (dp - 1)
P_rep w leaves out the copies that class already reads. Each DP rank schedules its own requests, so the host
time per token counts one rank's T / dp tokens (:mod:`sweepkit.costmodel.steps`).

Under two-batch overlap (:func:`sweepkit.costmodel.moe_comm.overlapped`) mb is at least 2 and the slots'
all-to-alls overlap their compute: (mb + pp - 1) t_slot becomes overlapped(S C, S A, B = S L_a2a / pp x
t_busy) + S (t_allreduce + t_hop), S = mb + pp - 1, C = the compute classes plus t_layout, A = L_a2a / pp x
t_a2a, t_busy the SM-occupying seconds of one layer's all-to-alls (:func:`sweepkit.costmodel.moe_comm.a2a_busy_s`).

t_allreduce: (n_ar L - L_a2a) / pp rings of tp GPUs, each carrying 1 / dp of the micro-batch's tokens
(:func:`~sweepkit.costmodel.efficiency.step_time_by_class`' ``allreduces``, ``ring``, ``ring_share``), at
the profile's link efficiency and all-reduce overhead; t_a2a: the layout's MoE all-to-alls
(:func:`sweepkit.costmodel.moe_comm.moe_all_to_all`) over L_a2a layers; t_hop: one stage-to-stage send
(pp > 1); dF, dW, dO: the layout's extra FLOPs, weight bytes and other bytes
(:func:`sweepkit.costmodel.layout.layout_work`) at the dense GEMM and weight-streaming efficiencies, except the
expert imbalance's FLOPs 2 k P_e T (I - 1), which the grouped MoE class prices on the busiest EP rank at the
efficiency of its I-times-larger groups (:func:`~sweepkit.costmodel.efficiency.step_time_by_class`'
``expert_imbalance``). The
host overheads t_0 (per step) and t_tok (per token position) are the profile's, paid once per step. At
pp = mb = 1 without a layout (or with the identity layout) t is exactly
:func:`sweepkit.costmodel.efficiency.step_time`.

References:
  Huang et al., "GPipe", NeurIPS 2019, arXiv:1811.06965 (slots);
  NVIDIA AIConfigurator (github.com/ai-dynamo/aiconfigurator): per-operator measured times summed per step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.allreduce import tp_allreduces
from sweepkit.costmodel.efficiency import saturating, step_time_by_class
from sweepkit.costmodel.layout import effective_imbalance, imbalance_flops
from sweepkit.costmodel.moe_comm import a2a_busy_s, overlap_microbatches, overlapped
from sweepkit.costmodel.passes import ACTIVATION_BYTES, Work, as_prefill, combine
from sweepkit.costmodel.rank_balance import busiest_rank_scale, layout_rank_budget, scaled


def measured_pass_s(inst, decode: Work, prefill: Work, extra: tuple, a2a: tuple) -> jax.Array:
    """Seconds of one target pass of ``inst`` (an :class:`~sweepkit.costmodel.steps.Instance` with an
    ``efficiency``) over its decode rows and prompt chunks (module docstring).

    Args:
      inst: the replica.  decode: the decode (or verify) rows' work.  prefill: the prompt chunks' work.
      extra: (dF, dW, dO), the layout's extra FLOPs, weight bytes and other bytes over the whole pass.
      a2a: (L_a2a, seconds of one all-to-all layer): the MoE layers priced by all-to-alls and the time of one.

    Returns:
      t_s, seconds (>= the profile's step overhead).

    Example:
      Llama-3.1-8B fp8 on one H100, 256 decode rows at 1,000 cached tokens each, b_w = b_kv = 0.8, t_0 = 0,
      no prefill: 9.07 ms, as :func:`sweepkit.costmodel.efficiency.step_time` (tests/costmodel/test_profiled.py).
    """
    eff, net, dev, tp, dp = inst.efficiency, inst.target, inst.device, inst.tp, inst.dp
    tokens = decode.tokens + prefill.tokens
    if inst.pipelined:
        pp, mb = inst.pp, jnp.minimum(inst.microbatches, jnp.maximum(1.0, tokens))
    else:
        pp, mb = 1.0, 1.0
    mb = overlap_microbatches(inst.layout, mb, tokens)
    per_mb = lambda w: jax.tree_util.tree_map(lambda x: x / mb, w)  # noqa: E731
    n = tp * dp
    a2a_layers, a2a_s = a2a
    # the busiest attention-DP rank's prompt chunks (rank_balance); the experts take the step's own tokens
    busiest = scaled(prefill, busiest_rank_scale(dp, prefill, layout_rank_budget(inst.layout)))
    imbalance = 1.0 if inst.layout is None else effective_imbalance(inst.layout)
    parts = step_time_by_class(per_mb(decode), per_mb(busiest), net, dev, eff, n, inst.weight_bytes, inst.kv_bytes,
                               inst.compute_speedup, allreduces=tp_allreduces(net, a2a_layers) / pp, ring=tp,
                               ring_share=1.0 / dp, dp=dp,
                               expert_tokens=per_mb(decode).tokens + per_mb(prefill).tokens,
                               expert_imbalance=imbalance)
    compute = (parts["gemm"] + parts["moe"] + parts["attn_decode"] + parts["attn_prefill"] + parts["kernels"]) / pp
    t_layout = layout_s(inst.layout, net, dev, eff, extra, tokens, inst.weight_bytes, inst.compute_speedup, n, dp,
                        mb, pp)
    size = tokens / mb * net.d_model * ACTIVATION_BYTES
    hop_s = jnp.where(pp > 1.0, size / dev.link_bytes_per_s + dev.link_latency_s, 0.0)
    a2a = a2a_layers / pp * a2a_s
    slots = mb + pp - 1.0
    host = eff.step_overhead_s + eff.token_overhead_s * (decode.tokens + busiest.tokens) / dp
    t = slots * (compute + parts["comm"] + hop_s + a2a + t_layout) + host
    if inst.layout is not None:
        busy = slots * a2a_layers / pp * a2a_busy_s(inst.layout)
        tbo = (overlapped(slots * (compute + t_layout), slots * a2a, a2a_layers, 1.0, busy)
               + slots * (parts["comm"] + hop_s))
        t = jnp.where(inst.layout.overlap > 0.0, tbo + host, t)
    return t * net.present


def layout_s(lay, net, dev, eff, extra: tuple, tokens: jax.Array, weight_bytes: jax.Array,
             compute_speedup: jax.Array, n: jax.Array, dp: jax.Array, mb: jax.Array = 1.0,
             pp: jax.Array = 1.0) -> jax.Array:
    """t_layout of one pipeline slot (module docstring): the layout's extra work (dF, dW, dO) of a pass of
    ``tokens`` over n GPUs, less what the classes already price (the expert imbalance's FLOPs, priced by the
    grouped MoE class on the busiest EP rank; the dense weights' copies per DP rank, read by the dense class),
    at the dense GEMM and weight-streaming efficiencies. ``lay`` None: no layout (``extra`` is zeros)."""
    d_f, d_w, d_o = extra
    if lay is not None:
        d_f = d_f - imbalance_flops(lay, net, tokens) * net.present
    dense = net.matmul_params - net.experts_per_token * net.routed_expert_params
    d_w = d_w - (dp - 1.0) * dense * weight_bytes * net.present     # read by the dense class, per DP rank
    g_eff = saturating(tokens / mb, eff.gemm_eff_max, eff.gemm_tokens_half)
    return jnp.maximum(d_f / (mb * pp) / (dev.peak_flops_per_s * n * compute_speedup * g_eff),
                       (d_w / pp + d_o / (mb * pp)) / (dev.hbm_bytes_per_s * n * eff.weight_bw_eff))


def split(work: Work, prefill: Work | None) -> tuple[Work, Work, Work]:
    """(whole, decode, prefill) of a pass given as one Work (all of it decode-class attention) or as decode
    rows plus prompt chunks (every pair of which is a prompt pair: :func:`~sweepkit.costmodel.passes.as_prefill`)."""
    if prefill is None:
        zero = jnp.zeros_like(work.tokens)
        return work, work, Work(zero, zero, zero)
    prefill = as_prefill(prefill)
    return combine(work, prefill), work, prefill
