"""Weights a checkpoint keeps wider than the weight format: attention projections and output head at w_a.

Some quantised checkpoints leave their attention and output head unquantised: gpt-oss (MXFP4 experts beside
bf16 attention, router, embeddings and ``lm_head``: its config's ``quantization_config.modules_to_not_convert``)
and NVIDIA's NVFP4 DeepSeek-R1 checkpoints (NVFP4 experts and dense MLPs, bf16 attention: TensorRT-LLM's
DeepSeek-R1 blog below; ModelOpt excludes ``lm_head`` by default). A pass over T positions then reads the P_a kept
weights (:attr:`sweepkit.catalogue.Model.kept_params`) at w_a' = max(w, w_a) bytes each and multiplies them at
k_a, the speed-up that width allows:

    bytes += P_a (w_a' - w),        k_a = min(k, max(1, 2 / w_a')),        t_kept = 2 P_a T / (P k_a eff)

(bf16: k_a = 1; fp8 attention beside FP4 experts on Blackwell: 2; on A100, k = 1 bounds it). Where w_a = 0,
or the kept format is no wider than the pass's (w_a' = w, k_a = k), each term is exactly the formula without it.

References:
  HF openai/gpt-oss-120b config.json (quantization_config.modules_to_not_convert);
  github.com/NVIDIA/TensorRT-LLM/blob/01c4ece911eb569e72cf4177f83238a0520641c2/docs/source/blogs/tech_blog/
  blog1_Pushing_Latency_Boundaries_Optimizing_DeepSeek-R1_Performance_on_NVIDIA_B200_GPUs.md ("Precision
  Strategy": 64 attention modules bf16, the 3 dense FFN and 58 MoE FFN layers nvfp4, router GEMM bf16).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.arrays import ModelArrays
from sweepkit.costmodel.work import Work


def kept_bytes_added(params: jax.Array, model: ModelArrays, weight_bytes: jax.Array) -> jax.Array:
    """Bytes that ``params`` attention / output-head weights add (>= 0) when the checkpoint keeps them in a wider
    format than the weight format: params x (max(w, w_a) - w); exactly 0 where w_a = 0.

    Example:
      gpt-oss-120b as published (MXFP4 experts, bf16 attention and head; a row at w = 0.53125): a pass reads
      P_a = 1.53 B kept parameters at 2 B, 2.25 GB more than at the row's format.
    """
    wider = params * (jnp.maximum(weight_bytes, model.attention_weight_bytes) - weight_bytes)
    return jnp.where(model.attention_weight_bytes > 0, wider, 0.0)


def kept_speedup(model: ModelArrays, weight_bytes: jax.Array, compute_speedup: jax.Array) -> jax.Array:
    """k_a, the native speed-up of the kept weights' GEMMs: min(k, max(1, 2 / w_a')) where they are wider than
    the pass's format (w_a' = max(w, w_a) > w), else k (w_a = 0, or kept no wider than w).

    A format of b bytes per value runs at most 2 / b times the bf16 rate (bf16 1, fp8 2); the pass's k bounds
    it where the device has no faster path (FP8 attention on A100: 1).
    """
    w_a = jnp.maximum(weight_bytes, model.attention_weight_bytes)
    k_a = jnp.minimum(compute_speedup, jnp.maximum(1.0, 2.0 / jnp.maximum(w_a, 1e-9)))
    return jnp.where((model.attention_weight_bytes > 0) & (w_a > weight_bytes), k_a, compute_speedup)


def kept_flops_added(work: Work, model: ModelArrays, weight_bytes: jax.Array, compute_speedup: jax.Array):
    """FLOPs that, priced at the pass's k, take the time the kept GEMMs' 2 P_a T FLOPs take at k_a:
    2 P_a T (k / k_a - 1) (0 where w_a = 0; :func:`kept_speedup`). Added to a roofline's FLOPs, its compute
    time and energy are those of the two rates."""
    k_a = kept_speedup(model, weight_bytes, compute_speedup)
    return 2.0 * model.kept_params * work.tokens * (compute_speedup / k_a - 1.0) * model.present
