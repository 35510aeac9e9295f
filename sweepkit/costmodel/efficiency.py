"""Achieved efficiency by what runs: a pass's time split by operator class (the ``measured`` profile).

The reference roofline (:mod:`sweepkit.costmodel.roofline`) prices a pass with one compute fraction and one
HBM fraction per device. The measured profile prices each operator class of a step on its own roofline,
with efficiencies that depend on the device, the number format and the tokens in the step, and adds them
(the classes run as separate kernels, one after another). For a step of T token positions on tp devices of
dense bf16 peak P, HBM bandwidth B and native format speed-up k, with w bytes per weight and kv per KV value:

    eff(T; e_max, T_half) = e_max T / (T + T_half)                          (saturating GEMM efficiency)
    dense GEMM      t_g = max(2 T ((P_d - P_a) / (k eff(T; g)) + P_a / (k_a eff(T; g_a))) / (P tp),
                              ((P_d + T D) w + P_a (w_a' - w)) / (B tp b_w))
    grouped MoE     t_e = max(2 k_e P_e T I / (P tp k eff(I T k_e / E_read(T); e)), P_e E_read(T) w_e / (B tp b_w))
    attention       t_a = max(2 L q A_j / (P tp a_j), K_j kv / (B tp b_kv))   j = decode, prefill (separately)
                    t_a,decode = max(t_a,decode, 2 L q A_d / (P_vec tp e_vec))   (CUDA-core decode kernel, e_vec > 0)
    communication   t_x = n_ar L (2 (tp - 1) / tp x T D 2 / (link c_x) + 2 (tp - 1) x latency + t_ar [tp > 1])
                    (a ring; on a fully connected mesh the frameworks' one- and two-shot kernels in place of
                    the first two terms: :mod:`sweepkit.costmodel.allreduce`)
    kernels         t_k,all = L (n_struct + n_q [k > 1]) (t_k + t_k,ctx [T_p > 0])
                    (:mod:`sweepkit.costmodel.kernels`; T_p the step's prompt tokens)
    t_step = s_tp (t_g + t_e + t_a,decode + t_a,prefill) + t_x + t_k,all + t_0 + t_tok T
    s_tp = 1 + l_tp (tp - 1) (D L / P_mm) / r_0                           (:func:`tp_stretch`, r_0 = 1e-5)

I is the layout's expert imbalance (max / mean expert load over the EP ranks, :mod:`sweepkit.costmodel.layout`;
1 without expert parallelism): the step waits for the busiest EP rank, whose grouped GEMMs run I times the mean
tokens per expert at the efficiency of that many. The tokens per expert are counted over the E_read(T) experts
the step's tokens reach (:func:`~sweepkit.costmodel.passes.experts_read`), as a grouped GEMM runs tiles only for
experts with work: 4 decode rows of gpt-oss-120b (E 128, k 4) reach 15.3 experts a layer, 1.05 tokens each,
not 0.125 over all 128 (whose T_half would be paid by every expert). P_d = P_mm - k_e P_e is the dense share of the matmul parameters (all of them for a dense model); P_a of them
(attention projections and output head) run at k_a and w_a' = max(w, w_a) where the checkpoint keeps them in
a wider format, at g_a, the profile's GEMM fields for the device in that format, P_a = 0 otherwise
(:mod:`sweepkit.costmodel.kept`). On a
model with windowed layers (sliding window or attention chunk of W positions) 2 L q A_j and K_j kv are
:func:`~sweepkit.costmodel.passes.attention_flops` and :func:`~sweepkit.costmodel.passes.kv_bytes_read`:
those layers attend to at most W + 1 positions (on a DSA model: k positions, plus the lightning indexer's FLOPs
and FP8 keys over every cached position). The prompt chunks' pairs are priced in the form the engines
run them: on an MLA model (without DSA) as multi-head attention, 4 q_p FLOPs per pair plus the up-projection
of the cached prefix, decode rows over the latent (:func:`~sweepkit.costmodel.passes.attention_flops`). w_e = min(w, the experts' own bytes per weight) where the
checkpoint stores its experts in a narrower format (gpt-oss: MXFP4, 0.53 B), else w, as in
:func:`~sweepkit.costmodel.passes.expert_bytes_saved`. The attention classes run at the bf16 rate, except decode attention where a framework
release runs a CUDA-core kernel for the model's shape (TensorRT-LLM 0.9's masked MHA under GQA:
:mod:`sweepkit.catalogue.decode_kernels`): P_vec is the device's FP32 CUDA-core peak and e_vec the kernel's
fraction of it (``vector_decode_eff``; 0 leaves the tensor-core formula exactly). The power cap of the reference roofline is not applied: the fitted
efficiencies are achieved rates and already include the clocks the devices ran at.

References:
  Williams, Waterman, Patterson, "Roofline", CACM 2009 (one roofline per kernel class);
  NVIDIA AIConfigurator (github.com/ai-dynamo/aiconfigurator): per-operator measured tables, summed per step.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.catalogue.efficiency import CONTEXT_KERNEL_FIELD, KEPT_FIELDS, KERNEL_FIELD, VECTOR_FIELD
from sweepkit.costmodel.allreduce import allreduce_s, tp_allreduces
from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays
from sweepkit.costmodel.kept import kept_bytes_added, kept_speedup
from sweepkit.costmodel.passes import (ACTIVATION_BYTES, Work, as_prefill, attention_flops, experts_read,
                                       kv_bytes_read)

PARAMS = ("gemm_eff_max", "gemm_tokens_half", "moe_eff_max", "moe_tokens_half", "attn_prefill_eff",
          "weight_bw_eff", "kv_bw_eff", "link_eff", "allreduce_overhead_s", "tp_loss")
"""Per (device x format) efficiency fields, in :class:`Efficiency` order."""
TP_LOSS_RATIO = 1e-5
"""r_0: the activation width per matmul parameter, D L / P_mm, at which ``tp_loss`` is the stretch per extra
tensor-parallel device (:func:`tp_stretch`)."""
FRAMEWORK_PARAMS = ("step_overhead_s", "token_overhead_s")
"""Per framework fields (host work per step and per token position)."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Efficiency:
    """Achieved fractions of one device in one compute format, and one framework's host overheads.

    Attributes:
      gemm_eff_max, gemm_tokens_half: e_max and T_half (tokens) of dense GEMMs.
      moe_eff_max, moe_tokens_half: the same for grouped MoE GEMMs (T_half in tokens per expert).
      attn_prefill_eff: fraction of the bf16 peak reached by prefill attention.
      weight_bw_eff: fraction of HBM bandwidth reached streaming weights; kv_bw_eff: reading the KV cache.
      link_eff: fraction of link bandwidth reached by all-reduces; allreduce_overhead_s: fixed seconds each
        all-reduce adds beyond the link's latency (launch and synchronisation; 0 at tp = 1).
      tp_loss: l_tp, the stretch of device time per extra tensor-parallel device for a model of D L / P_mm
        = r_0 (:func:`tp_stretch`: it scales with the model's activation width per parameter).
      step_overhead_s: host seconds per step; token_overhead_s: host seconds per token position.
      kernel_s: t_k, fixed device seconds of each kernel a decoder layer launches per pass (0: not priced).
      vector_decode_eff: e_vec, the fraction of the FP32 CUDA-core peak a CUDA-core decode-attention kernel
        reaches (:mod:`sweepkit.catalogue.decode_kernels`; 0: a tensor-core kernel, the ordinary roofline).
      context_kernel_s: t_k,ctx, fixed device seconds of each kernel a decoder layer launches in a pass that
        carries prompt tokens, on top of t_k (a context pass run without a CUDA graph; 0: not priced).
      kept_gemm_eff_max, kept_gemm_tokens_half: e_max and T_half of the GEMMs over weights the checkpoint keeps
        wider (:mod:`sweepkit.costmodel.kept`): the profile's entry for the device in that format
        (``Profile.kept_fields``); 0: those of the pass's format.
    """

    gemm_eff_max: jax.Array
    gemm_tokens_half: jax.Array
    moe_eff_max: jax.Array
    moe_tokens_half: jax.Array
    attn_prefill_eff: jax.Array
    weight_bw_eff: jax.Array
    kv_bw_eff: jax.Array
    link_eff: jax.Array
    allreduce_overhead_s: jax.Array
    tp_loss: jax.Array
    step_overhead_s: jax.Array
    token_overhead_s: jax.Array
    kernel_s: jax.Array
    vector_decode_eff: jax.Array = 0.0
    context_kernel_s: jax.Array = 0.0
    kept_gemm_eff_max: jax.Array = 0.0
    kept_gemm_tokens_half: jax.Array = 0.0


def tp_stretch(model: ModelArrays, tp_loss: jax.Array, tp: jax.Array) -> jax.Array:
    """Stretch of a replica's device time split over ``tp`` tensor-parallel devices.

        s_tp = 1 + l_tp (tp - 1) r / r_0,    r = D L / P_mm,    r_0 = 1e-5 (TP_LOSS_RATIO)

    Each layer all-reduces D activations a token against P_mm / L matmul parameters a token, so the share of
    a shard's time spent synchronising and running narrower GEMMs grows with tp - 1 and with r, the layer's
    activation width over its parameters. l_tp is the stretch per extra device of a model at r = r_0
    (Llama-3.1-70B: r = 8,192 x 80 / 69.5e9 = 9.4e-6). 1 at tp = 1 and for a model without parameters.

    Args:
      model: the network (d_model D, n_layers L, matmul_params P_mm; MoE: the active parameters).
      tp_loss: l_tp, the profile's stretch per extra device at r_0 (dimensionless).
      tp: tensor-parallel devices of the replica.

    Returns:
      s_tp (dimensionless, >= 1 for l_tp >= 0).

    Example:
      l_tp = 0.0308, tp = 8: Llama-3.1-70B 1 + 0.0308 x 7 x 0.943 = 1.203; Falcon-180B (14,848 x 80 /
      178.6e9 = 6.65e-6) 1 + 0.0308 x 7 x 0.665 = 1.143 (tests/costmodel/test_tp_stretch.py).

    References:
      Shoeybi et al., "Megatron-LM", arXiv:1909.08053 (two all-reduces of the activations per layer under
      tensor parallelism; the communication per FLOP falls as the hidden size grows).
    """
    per_param = model.d_model * model.n_layers / jnp.maximum(model.matmul_params, 1.0)   # 0 for an empty model
    return 1.0 + tp_loss * (tp - 1.0) * per_param / TP_LOSS_RATIO


def saturating(tokens: jax.Array, eff_max: jax.Array, tokens_half: jax.Array) -> jax.Array:
    """eff(T) = e_max T / (T + T_half): e_max / 2 at T = T_half, e_max as T grows.

    Example:
      e_max 0.8, T_half 64: 0.4 at T = 64, 0.8 x 4096 / 4160 = 0.788 at T = 4096.
    """
    t = jnp.maximum(tokens, 1e-9)
    return eff_max * t / (t + tokens_half)


def step_time_by_class(decode: Work, prefill: Work, model: ModelArrays, dev: DeviceArrays, eff: Efficiency,
                       tp: jax.Array, weight_bytes: jax.Array, kv_bytes: jax.Array,
                       compute_speedup: jax.Array, *, allreduces: jax.Array | None = None,
                       ring: jax.Array | None = None, ring_share: jax.Array = 1.0,
                       dp: jax.Array = 1.0, expert_tokens: jax.Array | None = None,
                       expert_imbalance: jax.Array = 1.0) -> dict[str, jax.Array]:
    """Seconds of each operator class of one step (module docstring): the decode rows' and the prompt
    chunks' work, one model replica on ``tp`` devices.

    Decode rows of a speculative verify pass (:func:`~sweepkit.costmodel.passes.verify_work`) are decode
    work; a mixed step passes its decode rows and its prompt chunks (combined) separately. Under a layout
    (:mod:`sweepkit.costmodel.layout`) the all-reduces differ from the default n_ar L rings over all ``tp``
    devices carrying every token: ``allreduces`` rings of ``ring`` devices each carry ``ring_share`` of the
    step's tokens (the attention-TP group and 1 / dp of the tokens under attention data parallelism).
    Under attention data parallelism (``dp`` ranks of tp / dp devices) each rank runs the dense GEMMs on its
    own T / dp tokens against its own copy of the dense weights, so the dense class is one rank's roofline:

        t_g = max(2 P_d T / (P tp k eff(T / dp; g)),  (dp P_d + T D) w / (B tp b_w))

    (dp = 1: the formula of the module docstring).

    Args:
      decode, prefill: the step's decode rows and prompt chunks (:mod:`sweepkit.costmodel.passes` Work).
      model, dev: the network and the device (per chip).  eff: the efficiencies.
      tp: devices of the replica.  weight_bytes, kv_bytes: bytes per value.  compute_speedup: k.
      allreduces: all-reduces in the step (None: n_ar L).  ring: devices of each (None: ``tp``).
      ring_share: share of the step's tokens each carries (1 without attention data parallelism).
      dp: attention data-parallel ranks among the ``tp`` devices (1 without attention data parallelism).
      expert_tokens: tokens the routed experts process (None: the step's); the grouped MoE class alone reads it
        (the busiest attention-DP rank's step, :mod:`sweepkit.costmodel.rank_balance`, scales the rest).
      expert_imbalance: I, max / mean expert load over the EP ranks (:mod:`sweepkit.costmodel.layout`; 1 without
        expert parallelism): the busiest rank's experts run I times the mean tokens, so the grouped MoE class
        is t_e = max(2 k_e P_e T I / (P tp k eff(I T k_e / E_read(T); e)), P_e E_read(T) w_e / (B tp b_w)).

    Returns:
      dict of seconds: gemm, moe, attn_decode, attn_prefill, comm, kernels, overhead (each >= 0; kernels 0
      for an empty step).
    """
    tokens = decode.tokens + prefill.tokens
    peak = dev.peak_flops_per_s * tp
    bw = dev.hbm_bytes_per_s * tp
    routed_active = model.routed_expert_params * model.experts_per_token
    dense = model.matmul_params - routed_active
    g_eff = saturating(tokens / dp, eff.gemm_eff_max, eff.gemm_tokens_half)
    # kept attention / head weights at max(w, w_a) and k_a (costmodel.kept; P_a = 0 terms where none)
    k_a = kept_speedup(model, weight_bytes, compute_speedup)
    kept = jnp.where(model.attention_weight_bytes > weight_bytes, model.kept_params, 0.0)    # wider only
    kept_eff = jnp.where(eff.kept_gemm_eff_max > 0.0,
                         saturating(tokens / dp, eff.kept_gemm_eff_max, eff.kept_gemm_tokens_half), g_eff)
    kept_s = jnp.where(kept > 0.0, 2.0 * kept * tokens * (1.0 / (k_a * kept_eff) - 1.0 / (compute_speedup * g_eff))
                       / peak, 0.0)                      # exactly 0 without kept weights: the formula as before
    t_gemm = jnp.maximum(2.0 * dense * tokens / (peak * compute_speedup * g_eff) + kept_s,
                         ((dp * dense + tokens * model.d_model) * weight_bytes
                          + dp * kept_bytes_added(model.kept_params, model, weight_bytes)) / (bw * eff.weight_bw_eff))
    routed = tokens if expert_tokens is None else expert_tokens
    # tokens per expert with work: the grouped GEMMs run for the E_read(T) experts the tokens reach
    per_expert = routed * model.experts_per_token / jnp.maximum(experts_read(routed, model), 1.0)
    # the busiest EP rank's experts run I times the mean tokens, at the efficiency of that many
    e_eff = saturating(expert_imbalance * per_expert, eff.moe_eff_max, eff.moe_tokens_half)
    # experts stored in their own narrower format (gpt-oss's MXFP4 experts beside bf16 attention)
    expert_w = jnp.where(model.expert_weight_bytes > 0, jnp.minimum(weight_bytes, model.expert_weight_bytes),
                         weight_bytes)
    expert_bytes = model.routed_expert_params * experts_read(routed, model) * expert_w
    t_moe = jnp.maximum(2.0 * routed_active * routed * expert_imbalance / (peak * compute_speedup * e_eff),
                        expert_bytes / (bw * eff.weight_bw_eff))

    def attention(work: Work, flops_eff):
        # windowed layers attend to at most W + 1 positions, DSA layers to k plus the indexer's scan
        # (passes.attention_flops, passes.kv_bytes_read)
        return jnp.maximum(attention_flops(work, model) / (peak * flops_eff),
                           kv_bytes_read(work, model, kv_bytes) / (bw * eff.kv_bw_eff))

    # a CUDA-core decode kernel (catalogue.decode_kernels) does the decode FLOPs at e_vec of the FP32 peak
    vec = dev.vector_flops_per_s * tp * eff.vector_decode_eff
    t_vec = jnp.where(vec > 0.0, attention_flops(decode, model) / jnp.where(vec > 0.0, vec, 1.0), 0.0)

    n_ar = tp_allreduces(model) if allreduces is None else allreduces
    r = tp if ring is None else ring
    size = tokens * ring_share * model.d_model * ACTIVATION_BYTES
    t_comm = n_ar * (allreduce_s(size, r, dev, eff.link_eff) + jnp.where(r > 1.0, eff.allreduce_overhead_s, 0.0))
    shard = tp_stretch(model, eff.tp_loss, tp)
    n_kernels = model.layer_kernels + jnp.where(compute_speedup > 1.0, model.quant_kernels, 0.0)
    t_kernels = (jnp.where(tokens > 0.0, model.n_layers * n_kernels * eff.kernel_s, 0.0)
                 + jnp.where(prefill.tokens > 0.0, model.n_layers * n_kernels * eff.context_kernel_s, 0.0))
    return dict(gemm=t_gemm * shard, moe=t_moe * shard, attn_decode=jnp.maximum(attention(decode, eff.attn_prefill_eff), t_vec) * shard,
                attn_prefill=attention(as_prefill(prefill), eff.attn_prefill_eff) * shard, comm=t_comm, kernels=t_kernels,
                overhead=eff.step_overhead_s + eff.token_overhead_s * tokens)


def step_time(decode: Work, prefill: Work, model: ModelArrays, dev: DeviceArrays, eff: Efficiency,
              tp: jax.Array, weight_bytes: jax.Array, kv_bytes: jax.Array, compute_speedup: jax.Array) -> jax.Array:
    """t_step = the sum of :func:`step_time_by_class` (seconds; 0 for an empty step).

    Example:
      Llama-3.1-8B fp8 on one H100, 256 decode rows at 1,000 cached tokens each, b_w = b_kv = 0.8, t_0 = 0:
      weights 7.505 GB / 2.68 TB/s = 2.80 ms, KV 256,256 x 65.5 kB / 2.68 TB/s = 6.27 ms, 9.07 ms in all
      (tests/costmodel/test_efficiency.py).
    """
    parts = step_time_by_class(decode, prefill, model, dev, eff, tp, weight_bytes, kv_bytes, compute_speedup)
    empty = (decode.tokens + prefill.tokens) <= 0
    return jnp.where(empty, 0.0, sum(parts.values()))


def efficiency_arrays(fields: dict | list[dict], dtype=None) -> Efficiency:
    """One profile row (``Profile.fields(device, format)``) or a list of them (leading axis) as
    :class:`Efficiency`."""
    rows = fields if isinstance(fields, list) else [fields]
    cols = {k: jnp.asarray([float(r[k]) for r in rows], dtype) for k in PARAMS + FRAMEWORK_PARAMS}
    cols[KERNEL_FIELD] = jnp.asarray([float(r.get(KERNEL_FIELD, 0.0)) for r in rows], dtype)   # 0: not priced
    cols[VECTOR_FIELD] = jnp.asarray([float(r.get(VECTOR_FIELD, 0.0)) for r in rows], dtype)   # 0: tensor cores
    cols[CONTEXT_KERNEL_FIELD] = jnp.asarray([float(r.get(CONTEXT_KERNEL_FIELD, 0.0)) for r in rows], dtype)
    for k in KEPT_FIELDS:                                                                    # 0: the pass's format's
        cols[k] = jnp.asarray([float(r.get(k, 0.0)) for r in rows], dtype)
    return Efficiency(**{k: v if isinstance(fields, list) else v[0] for k, v in cols.items()})
