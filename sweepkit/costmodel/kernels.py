"""Kernels one decoder layer launches per pass: the fixed time of many small kernels (the ``kernels`` class).

A roofline prices each operator class by its FLOPs and bytes. At a few hundred tokens per GPU a decoder layer
is mostly short kernels (norms, RoPE, routing, activation quantisation, small GEMMs), each with a fixed time
its bytes and FLOPs do not account for: launch, ramp-up and the tail of its last wave. With n_k kernels per
layer, L layers and t_k seconds each, one pass (one micro-batch under two-batch overlap) adds

    t_kernels = L n_k t_k,        n_k = (L_d n_dense + L_moe n_moe) / L + n_q [k > 1]

where the counts come from the layer's structure as an engine without kernel fusion beyond the usual ones runs
it (fused residual + RMSNorm, fused QKV and SiLU x mul kernels, one attention kernel), and n_q counts the
per-token activation quantisations in front of each narrow-format GEMM (only where the GEMMs run in FP8 / FP4,
format speed-up k > 1):

    attention, GQA    6   input RMSNorm, QKV GEMM, RoPE, KV-cache store, attention, output GEMM
    attention, MLA  + 7   q_a and kv_a RMSNorms, q_b GEMM, the two absorbed BMMs (W_UK, W_UV), the q
                          concatenation (no-PE | RoPE part), the split-KV attention's combine
    Gated DeltaNet    8   instead of attention on a hybrid model's L_lin linear layers: input RMSNorm, q/k/v/z GEMM,
                          beta/alpha GEMM, causal conv1d, gate (g, beta) kernel, recurrent (decode) or chunked
                          (prefill) delta-rule kernel, gated RMSNorm, output GEMM
    output gate     + 1   sigmoid gate x attention output on gated full-attention layers (Qwen3-Next, Qwen3.5)
    DSA indexer     + 9   q GEMM, key and head-weight GEMM, key LayerNorm, RoPE, Hadamard rotation + FP8
                          quantisation of the queries and of the key, key-cache store, logits, top-k
                          (on the L_I layers with their own indexer)
    FFN, dense        4   post-attention RMSNorm, gate-up GEMM, SiLU x mul, down GEMM
    FFN, MoE        + 4   router GEMM, top-k, token permutation (alignment / dispatch layout), weighted combine
                    + 3   shared experts' gate-up GEMM, SiLU x mul, down GEMM (where the model has them)
    quantisation      4   before the QKV, output, gate-up and down GEMMs; + 1 (MLA: q_b); + 1 (shared experts)

DeepSeek-V3 in FP8: 30 kernels per MoE layer, 22 per dense layer, n_k = 29.61 over its 61 layers.

t_k is a framework's (``kernel_s`` in a profile's ``[framework]`` table; 0: not priced separately, the profile's
fitted efficiencies absorb it), data that a refit keeps (:data:`KERNEL_S`). SGLang launches the kernels above
unfused (its v0.4-v0.5 releases, which the measured rows ran); TensorRT-LLM and vLLM fuse more of them
(TensorRT-LLM's plugins, vLLM's torch.compile fusion passes) and their profiles leave t_k at 0, except
TensorRT-LLM behind Triton's tensorrtllm_backend, which runs without CUDA graphs by default and whose profile
fits t_k on its rows (:mod:`sweepkit.validation.kernel_fit`). On H100 a short
kernel takes 3.6-3.8 us whatever it does: 7.168 us for an unfused RMSNorm + FP8 quantisation pair at 512 tokens
x 4,096 (3.58 us each), 3.779 us fused (sglang PR #32994, H100 kernel benchmark); DeepSeek's FP8 GEMMs at
M = 128 run 2.4-6 us longer than their bytes at full HBM bandwidth (DeepGEMM README, H800: N x K = 2,112 x 7,168
at 1,509 GB/s, 4,096 x 7,168 at 2,221 GB/s, 7,168 x 2,048 at 2,277 GB/s).

References:
  github.com/sgl-project/sglang pull 32994 (rmsnorm + FP8 quant kernel benchmark, H100);
  github.com/deepseek-ai/DeepGEMM README (FP8 GEMM times at M = 64 and 128, H800, February 2025);
  Spector et al., "Look Ma, No Bubbles! Designing a Low-Latency Megakernel for Llama-1B", Hazy Research, 2025
  (kernel boundaries as idle time; 1.3 us launch cost per kernel under CUDA graphs on H100);
  LMSYS, lmsys.org/blog/2025-05-05-large-scale-ep ("Other Kernels" of the decode breakdown).
"""

from __future__ import annotations

from sweepkit.catalogue import Model

ATTENTION_GQA = 6
"""Kernels of a GQA attention block: input RMSNorm (with the residual add), QKV GEMM, RoPE, KV-cache store,
attention, output GEMM."""
ATTENTION_MLA_EXTRA = 7
"""Kernels absorbed MLA adds: q_a and kv_a RMSNorms, q_b GEMM, W_UK and W_UV BMMs, q concatenation, split-KV
combine."""
FFN_DENSE = 4
"""Kernels of a dense FFN block: post-attention RMSNorm, gate-up GEMM, SiLU x mul, down GEMM."""
MOE_EXTRA = 4
"""Kernels routing adds to an FFN block: router GEMM, top-k, token permutation, weighted combine."""
INDEXER_EXTRA = 9
"""Kernels a DeepSeek Sparse Attention lightning indexer adds: q GEMM, key + head-weight GEMM, key LayerNorm, RoPE,
rotation + FP8 quantisation of the queries and of the key (2), key-cache store, logits, top-k (DeepSeek-V3.2-Exp
inference/model.py ``Indexer.forward``; SGLang's NSA indexer fuses the key and head-weight projections)."""
LINEAR_ATTENTION = 8
"""Kernels of a Gated DeltaNet token mixer (vLLM / SGLang ``GatedDeltaNet`` forward: norm, two input GEMMs, conv1d,
gating, FLA delta-rule kernel, gated norm, output GEMM)."""
OUTPUT_GATE_EXTRA = 1
"""The sigmoid output gate of a gated full-attention layer."""
SHARED_EXPERT_EXTRA = 3
"""Kernels of the shared experts beside the routed ones: gate-up GEMM, SiLU x mul, down GEMM."""
QUANT_BASE = 4
"""Activation quantisations in front of the QKV, output, gate-up and down GEMMs (narrow-format GEMMs only)."""
KERNEL_S = {"sglang": (7.168e-6 / 2.0,
                       "one of an unfused RMSNorm + FP8 quantisation pair at 512 tokens x 4,096 on H100: 7.168 us "
                       "for both (github.com/sgl-project/sglang pull 32994, kernel benchmark)")}
"""t_k per framework key (seconds, source): the start of ``calibrate --framework`` where its profile has none."""


def layer_kernels(model: Model) -> tuple[float, float]:
    """(n_struct, n_quant): kernels one decoder layer launches per pass, averaged over the model's L layers,
    without and only the activation quantisations (module docstring).

    Args:
      model: a catalogue model.

    Returns:
      (kernels of the layer's structure, quantisation kernels that narrow-format GEMMs add), per layer.

    Example:
      DeepSeek-V3 (58 MoE + 3 dense layers, MLA, one shared expert): (24 x 58 + 17 x 3) / 61 = 23.66 and
      5 + 58 / 61 = 5.95, 29.61 kernels per layer in FP8; Llama-3.1-8B: (10, 4) (tests/costmodel/test_kernels.py);
      Qwen3.5-35B-A3B (30 Gated DeltaNet + 10 gated attention layers, all MoE with a shared expert):
      (30 x 8 + 10 x 7) / 40 + 4 + 4 + 3 = 18.75 and 5.
    """
    attn = ATTENTION_GQA + (ATTENTION_MLA_EXTRA if model.is_mla else 0) + (
        OUTPUT_GATE_EXTRA if model.attention_output_gate else 0)
    if model.is_hybrid:             # mixers averaged over the L_a full and L_lin Gated DeltaNet layers
        attn = (model.attention_layers * attn + model.linear_layers * LINEAR_ATTENTION) / model.n_layers
    dense = attn + FFN_DENSE
    moe = dense + MOE_EXTRA + (SHARED_EXPERT_EXTRA if model.n_shared_experts else 0)
    layers = max(model.n_layers, 1)
    n_moe = model.n_layers - model.dense_layers if model.is_moe else 0
    n_dense = model.n_layers - n_moe
    quant_moe = 1.0 if model.n_shared_experts else 0.0
    quant = QUANT_BASE + (1.0 if model.is_mla else 0.0) + quant_moe * n_moe / layers
    indexer = INDEXER_EXTRA * model.indexer_layers if model.is_dsa else 0
    return (n_dense * dense + n_moe * moe + indexer) / layers, quant
