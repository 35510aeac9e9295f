"""The analytic screen: memory fit, latency lower bounds and a capacity upper bound of one configuration.

Per configuration (one point; :func:`screen` vmaps it over the space), with the decode step of b rows each
holding c KV tokens and drafting gamma tokens (E tokens accepted per row per step):

    t(b) = max(c0 + c1 b, m0 + m1 b) + a0 + a1 b            (compute, memory, all-reduce/overhead pieces)
    b_tpot = min over the two pieces of (TPOT E - a0 - x0) / (x1 + a1)      (largest b meeting TPOT)
    b_kv = KV capacity / c          b* = min(b_tpot, b_kv, batch_cap)

The pieces are the roofline without the power cap (which only slows a pass) through the pipeline slots of
:mod:`sweepkit.costmodel.steps` with micro-batches = pp (one at batch 1, for the TPOT bound); the work is the step's exact FLOPs and bytes
(:func:`sweepkit.costmodel.passes.flops_and_bytes`) linearized between b = 1 and b = 256 (exact for a dense
model; a secant below the concave expert reads of an MoE model). A mixture-of-experts instance's
:class:`~sweepkit.costmodel.layout.Layout` (expert parallelism ep, attention data parallelism dp) spreads
each slot over tp x dp GPUs, adds the layout's work (:func:`~sweepkit.costmodel.layout.layout_work`: expert
imbalance, weights copied per DP rank, KV copied over attention-TP) and, with dp > 1, prices the MoE layers'
all-to-alls (:func:`~sweepkit.costmodel.moe_comm.moe_all_to_all`) in place of their all-reduces, as the
serving engine's target pass does; its KV capacity is :func:`~sweepkit.costmodel.layout.layout_kv_capacity_tokens`.
Its prompts stay spread evenly over the DP ranks (the engine prices the busiest rank,
:mod:`sweepkit.costmodel.rank_balance`): a balanced scheduler (TensorRT-LLM's ADP balance) reaches that bound.
The request rate of one instance is

    decode:      r_d = b* E / (t(b*) y)                     (y output tokens per request)
    colocated:   r = 1 / (t_p + y t(b*) / (b* E))           (prefill steps apart: prefill- / decode-priority)
                 r = min(r_d, 1 / (F_p / peak + y (c + a)(b*) / (b* E)))   (chunked: prompts fill idle compute)
    disagg:      R = min(P / t_p, D r_d)

with t_p the prefill pass of the mean prompt (its new tokens after prefix-cache hits). The TTFT lower bound
is t_p (plus the KV transfer when disaggregated), the TPOT lower bound t(1) / E. A configuration is feasible
when its weights fit, t_p <= TTFT and b* >= 1. Every simplification makes the rate larger or the latencies
smaller, so a simulated capacity stays below the bound; the search relies on that to stop.

References:
  Williams, Waterman, Patterson, "Roofline", CACM 2009; Zhong et al., "DistServe", OSDI 2024,
  arXiv:2401.09670 (goodput under TTFT and TPOT SLOs); Agrawal et al., "Sarathi-Serve", OSDI 2024.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.costmodel.allreduce import allreduce_s, tp_allreduces
from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays
from sweepkit.costmodel.kept import kept_bytes_added, kept_flops_added
from sweepkit.costmodel.layout import Layout, layout_kv_capacity_tokens, layout_work
from sweepkit.costmodel.memory import state_positions
from sweepkit.costmodel.moe_comm import moe_all_to_all
from sweepkit.costmodel.passes import (
    ACTIVATION_BYTES,
    chunk_work,
    decode_work,
    flops_and_bytes,
    verify_work,
)

STEP_OVERHEAD_S = 0.0005
"""Fixed time of every target pass (the serving cluster's ``step_overhead_s``)."""
KV_LINK_BYTES_PER_S, KV_LINK_LATENCY_S = 50e9, 10e-6
"""Prefill -> decode KV link of a disaggregated layout (:data:`sweepkit.serving.config.KV_LINK`)."""
B_HI = 256.0
"""The larger batch of the linearization."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Point:
    """One configuration as scalars (stacked along the space's axis by :func:`screen`).

    Attributes:
      device: the accelerator (per chip).  tp, pp, instances: the (decode) instances' layout.
      layout, prefill_layout: the expert / attention-data parallelism of a (decode) instance and of a prefill-pool
        instance (:mod:`sweepkit.costmodel.layout`; dp = ep = 1 for tensor parallelism alone).
      disagg: 1 for a disaggregated layout.  prefill_instances, prefill_tp: its prefill pool.
      chunked: 1 for chunked batching.  batch_cap: rows per instance.  paged, prefix: KV paging, prefix cache.
      weight_bytes, kv_bytes: bytes per value.  compute_speedup: native multiple of the compute format.
      draft: 1 with a draft.  gamma: drafted tokens per pass.  tokens_per_step: E, expected tokens per row
        per step (1 without a draft).  price_usd_per_gpu_hour: the device's price.
    """

    device: DeviceArrays
    layout: Layout
    prefill_layout: Layout
    tp: jax.Array
    pp: jax.Array
    instances: jax.Array
    disagg: jax.Array
    prefill_instances: jax.Array
    prefill_tp: jax.Array
    chunked: jax.Array
    batch_cap: jax.Array
    paged: jax.Array
    prefix: jax.Array
    weight_bytes: jax.Array
    kv_bytes: jax.Array
    compute_speedup: jax.Array
    draft: jax.Array
    gamma: jax.Array
    tokens_per_step: jax.Array
    price_usd_per_gpu_hour: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Demand:
    """A workload's mean request and SLOs (scalars).

    Attributes:
      prompt_tokens: mean prompt per request (system prompt and history included).
      cached_tokens: of which a prefix cache can serve (system prompt and history).
      output_tokens: mean output per request.  ttft_slo_s, tpot_slo_s: the SLOs (inf: none).
    """

    prompt_tokens: jax.Array
    cached_tokens: jax.Array
    output_tokens: jax.Array
    ttft_slo_s: jax.Array
    tpot_slo_s: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Bound:
    """The screen's answer for one configuration (per second, per GPU, seconds, USD, joules)."""

    feasible: jax.Array
    fits: jax.Array
    batch: jax.Array
    req_s_per_gpu: jax.Array
    tok_s_per_gpu: jax.Array
    usd_per_mtok: jax.Array
    j_per_token: jax.Array
    ttft_lb_s: jax.Array
    tpot_lb_s: jax.Array


def _pieces(p: Point, lay: Layout, tp, pp, mb, net: ModelArrays, draft: ModelArrays, work, draft_work, draft_passes,
            peak_n, bw_n):
    """(compute s, memory s, communication + overhead s, FLOPs, bytes) of one step's work on one instance of
    n = tp x dp GPUs per stage and pp stages: mb + pp - 1 pipeline slots, each a stage of n GPUs over
    (F + dF) / (mb pp) FLOPs and (W + dW) / pp + (O + dO) / (mb pp) bytes (:mod:`sweepkit.costmodel.steps`;
    dF, dW, dO the layout's work), n_ar L - L_a2a all-reduces over tp of the slot's tokens / dp and, with dp > 1,
    the MoE layers' all-to-alls; ``draft_passes`` passes of ``draft_work`` run on the instance's GPUs as one.
    ``peak_n``, ``bw_n``: achievable FLOP/s and bytes/s of the stage's n GPUs."""
    flops, bytes_ = flops_and_bytes(work, net, p.weight_bytes, p.kv_bytes)
    flops = flops + kept_flops_added(work, net, p.weight_bytes, p.compute_speedup)   # kept GEMMs at k_a
    d_f, d_w, d_o = layout_work(lay, net, work, p.weight_bytes, p.kv_bytes)
    w_bytes = net.matmul_params * p.weight_bytes + kept_bytes_added(net.kept_params, net, p.weight_bytes)
    d_flops, d_bytes = flops_and_bytes(draft_work, draft, p.weight_bytes, p.kv_bytes)
    d_flops, d_bytes = d_flops * draft_passes, d_bytes * draft_passes
    tokens = work.tokens
    slots = mb + pp - 1.0
    t_c = slots * (flops + d_f) / (mb * pp) / peak_n + d_flops / (peak_n * pp)
    t_m = slots * ((w_bytes + d_w) / pp + (bytes_ - w_bytes + d_o) / (mb * pp)) / bw_n + d_bytes / (bw_n * pp)
    size = tokens / mb * net.d_model * ACTIVATION_BYTES
    link = p.device.link_bytes_per_s
    a2a_s, _ = moe_all_to_all(lay, p.device, net, tokens / (mb * tp * lay.dp))
    a2a_layers = jnp.where(lay.dp > 1.0, lay.moe_layers, 0.0)
    ar = tp_allreduces(net, a2a_layers) / pp * allreduce_s(size / lay.dp, tp, p.device)
    hop = jnp.where(pp > 1.0, size / link + p.device.link_latency_s, 0.0)
    fixed = STEP_OVERHEAD_S + p.device.token_overhead_s * tokens / lay.dp  # one DP rank's tokens
    comm = slots * (ar + hop + a2a_layers / pp * a2a_s) + fixed
    return t_c, t_m, comm, flops + d_f + d_flops, bytes_ + d_w + d_o + d_bytes


def bound(p: Point, target: ModelArrays, mtp: ModelArrays, d: Demand) -> Bound:
    """The screen of one configuration (see the module docstring for the maths).

    Args:
      p: the configuration.  target: the served model.  mtp: the draft network (priced where ``p.draft``).
      d: the workload's mean request and SLOs.

    Returns:
      :class:`Bound`: feasibility, b*, upper bounds of requests and output tokens per GPU per second, the
      cost and energy per token at that rate, and the TTFT and TPOT lower bounds in seconds.

    Example:
      See tests/plan/test_screen.py: Llama-3.1-8B on one H100 at batch 1 gives t(1) within 1% of the
      cost model's decode pass.
    """
    dev, lay = p.device, p.layout
    eff_peak = dev.peak_flops_per_s * dev.flops_efficiency * p.compute_speedup
    eff_bw = dev.hbm_bytes_per_s * dev.bandwidth_efficiency
    n = p.tp * lay.dp
    peak = eff_peak * n * p.pp
    draft = dataclasses.replace(mtp, present=mtp.present * p.draft)
    # KV: a reserved row holds its whole sequence, a paged one grows (on average half its output)
    row_tokens = d.prompt_tokens + d.output_tokens * jnp.where(p.paged > 0, 0.5, 1.0)
    kv_cap = layout_kv_capacity_tokens(lay, dev, n * p.pp, target, draft, p.weight_bytes, p.kv_bytes)
    # a hybrid model's rows also hold their linear-attention state (costmodel.memory.state_positions), in
    # capacity positions of r_kv KV copies each (the state itself is split over attention-TP, not copied)
    held = row_tokens + state_positions(target, draft, p.kv_bytes) / lay.kv_replicas
    fits = kv_cap >= held
    positions = p.gamma * p.draft + 1.0

    def step(b, mb=p.pp):
        return _pieces(p, lay, p.tp, p.pp, mb, target, draft, verify_work(b * row_tokens, b, positions),
                       decode_work(b * row_tokens, b), p.gamma * p.draft, eff_peak * n, eff_bw * n)

    c1_, m1_, a1_, f1, y1 = step(1.0)
    c2_, m2_, a2_, f2, y2 = step(B_HI)
    def slope(lo, hi):
        return (hi - lo) / (B_HI - 1.0)
    c1, m1, a1 = slope(c1_, c2_), slope(m1_, m2_), slope(a1_, a2_)
    c0, m0, a0 = c1_ - c1, m1_ - m1, a1_ - a1
    budget_s = d.tpot_slo_s * p.tokens_per_step
    b_tpot = jnp.minimum((budget_s - a0 - c0) / (c1 + a1), (budget_s - a0 - m0) / (m1 + a1))
    b = jnp.floor(jnp.minimum(jnp.minimum(b_tpot, kv_cap / held), p.batch_cap))
    b = jnp.maximum(b, 1.0)
    t_b = jnp.maximum(c0 + c1 * b, m0 + m1 * b) + a0 + a1 * b
    per_req_decode_s = d.output_tokens * t_b / (b * p.tokens_per_step)

    # prefill of the mean prompt, on a prefill-pool instance when disaggregated
    new = d.prompt_tokens - d.cached_tokens * p.prefix
    pre_tp = jnp.where(p.disagg > 0, p.prefill_tp, p.tp)
    pre_pp = jnp.where(p.disagg > 0, 1.0, p.pp)
    work = chunk_work(d.cached_tokens * p.prefix, new)
    pre_lay = jax.tree.map(lambda a, b: jnp.where(p.disagg > 0, a, b), p.prefill_layout, lay)
    pre_n = pre_tp * pre_lay.dp
    pc, pm, pa, pf, pbytes = _pieces(p, pre_lay, pre_tp, pre_pp, pre_pp, target, draft, work, work, 0.0,
                                     eff_peak * pre_n, eff_bw * pre_n)
    t_p = jnp.maximum(pc, pm) + pa
    # a DSA model also sends its indexer keys and, in FP8, its latents' scales (costmodel.memory.kv_bytes_per_token)
    dsa_bytes = target.index_bytes_per_token + jnp.where(p.kv_bytes == 1.0, target.fp8_latent_bytes, 0.0)
    kv_sent = (d.prompt_tokens * target.kv_values_per_token * p.kv_bytes + d.prompt_tokens * dsa_bytes
               + target.linear_state_bytes)
    kv_s = jnp.where(p.disagg > 0, kv_sent / KV_LINK_BYTES_PER_S + KV_LINK_LATENCY_S, 0.0)
    r_d = 1.0 / per_req_decode_s
    r_sep = 1.0 / (t_p + per_req_decode_s)
    busy_s = c0 + c1 * b + a0 + a1 * b              # compute, all-reduces and overhead do not overlap
    r_chunk = jnp.minimum(r_d, 1.0 / (pf / peak + d.output_tokens * busy_s / (b * p.tokens_per_step)))
    r_col = p.instances * jnp.where(p.chunked > 0, r_chunk, r_sep)
    r_dis = jnp.minimum(p.prefill_instances / t_p, p.instances * r_d)
    gpus = jnp.where(p.disagg > 0, p.prefill_instances * p.prefill_tp + p.instances * n, p.instances * n * p.pp)
    req = jnp.where(p.disagg > 0, r_dis, r_col) / gpus
    ttft_lb = t_p + kv_s
    one_c, one_m, one_a, _, _ = step(1.0, jnp.minimum(p.pp, positions))     # batch 1: one micro-batch
    tpot_lb = (jnp.maximum(one_c, one_m) + one_a) / p.tokens_per_step
    feasible = fits & (ttft_lb <= d.ttft_slo_s) & (b_tpot >= 1.0)
    tok = jnp.where(feasible, req * d.output_tokens, 0.0)
    dyn_j = ((f1 + (f2 - f1) * (b - 1.0) / (B_HI - 1.0)) * dev.energy_per_flop_j / p.compute_speedup
             + (y1 + (y2 - y1) * (b - 1.0) / (B_HI - 1.0)) * dev.energy_per_hbm_byte_j) / (b * p.tokens_per_step)
    pre_j = (pf * dev.energy_per_flop_j / p.compute_speedup + pbytes * dev.energy_per_hbm_byte_j) / d.output_tokens
    safe = jnp.where(tok > 0, tok, 1.0)
    return Bound(feasible=feasible, fits=fits, batch=jnp.where(feasible, b, 0.0),
                 req_s_per_gpu=jnp.where(feasible, req, 0.0), tok_s_per_gpu=tok,
                 usd_per_mtok=jnp.where(tok > 0, p.price_usd_per_gpu_hour / 3600.0 / safe * 1e6, jnp.inf),
                 j_per_token=jnp.where(tok > 0, dev.idle_w / safe + dyn_j + pre_j, jnp.inf),
                 ttft_lb_s=ttft_lb, tpot_lb_s=tpot_lb)


@jax.jit
def screen(points: Point, target: ModelArrays, mtp: ModelArrays, demand: Demand) -> Bound:
    """:func:`bound` of every configuration (``points`` stacked along axis 0)."""
    return jax.vmap(bound, in_axes=(0, None, None, None))(points, target, mtp, demand)
