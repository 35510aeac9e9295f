"""HBM residency: resident weights, KV capacity in tokens, and whether a point fits.

    KV capacity = (HBM x n x mem_util - resident weight bytes) / (kv_target + kv_draft) per token

with mem_util = 0.9 (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim). Llama-3-8B on one H100: 426,788 tokens (410,628 with an MTP
draft); Llama-3-70B on 4 x H100: 448,288 tokens.

Windowed layers (sliding window or attention chunk of W positions, kv_w of the kv values per token) hold at
most W + 1 positions of a sequence, so a sequence of n positions takes the KV bytes of

    n_held(n) = n - kv_w / (kv_target + kv_draft) x max(n - (W + 1), 0)

full positions of the capacity (:func:`kv_positions_held`); kv_w = 0 gives n_held = n exactly.

Hybrid linear attention (Gated DeltaNet layers, :mod:`sweepkit.catalogue.linear`): only the full-attention
layers cache KV per token (kv counts L_a layers), and each sequence also holds s_lin L_lin bytes of recurrent
state whatever its length, which the engines allocate from the same pool (vLLM's hybrid KV-cache manager gives
each linear layer group one page per request, SGLang a mamba pool beside the KV pool). A sequence of n positions
then takes

    n_seq(n) = n_held(n) + (s_lin L_lin) / kv_token

capacity positions (:func:`sequence_positions`; kv_token = :func:`kv_bytes_per_token`): the state lowers the
number of sequences that fit, most where n is short. L_lin = 0 gives n_held exactly.

DeepSeek Sparse Attention keeps every position (the indexer may pick any): its indexer keys, L_I (d_I + 4)
bytes per token in FP8 with FP32 scales, add to the KV bytes per token whatever the KV format, and in a 1-byte
KV format its latents take FlashMLA's FP8 sparse layout, L (d_c + 4 d_c / 128 + 2 d_r) bytes
(:func:`kv_bytes_per_token`; a model cannot have both windows and DSA).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays
from sweepkit.costmodel.kept import kept_bytes_added
from sweepkit.costmodel.passes import expert_bytes_saved

MEM_UTIL = 0.9
"""Fraction of HBM the serving engine may use (seed SimConfig mem_util)."""


def resident_bytes(target: ModelArrays, draft: ModelArrays, weight_bytes: jax.Array) -> jax.Array:
    """Weights held in HBM over the whole instance: target plus what the draft adds, in the weight format;
    routed experts kept in their own format (w_e > 0) cost E P_e min(w, w_e) instead of E P_e w, attention,
    head and embedding kept wider (w_a > 0) max(w, w_a) (:mod:`sweepkit.costmodel.kept`)."""
    return ((target.resident_params + draft.resident_params * draft.present) * weight_bytes
            + expert_bytes_saved(target.n_experts * target.routed_expert_params, target, weight_bytes)
            + expert_bytes_saved(draft.n_experts * draft.routed_expert_params, draft, weight_bytes) * draft.present
            + kept_bytes_added(target.kept_resident_params, target, weight_bytes)
            + kept_bytes_added(draft.kept_resident_params, draft, weight_bytes) * draft.present)


def kv_bytes_per_token(target: ModelArrays, draft: ModelArrays, kv_bytes: jax.Array) -> jax.Array:
    """KV bytes one token position costs: the target's plus the draft's (MTP: one layer), each KV values x kv
    plus its DSA indexer keys (FP8 with FP32 scales whatever the KV format; 0 without DSA) and, in a 1-byte KV
    format, the FP8 latent layout's scales and bf16 RoPE key (``fp8_latent_bytes``; 0 without DSA):

        kv_token = (kv_target + kv_draft) kv + kv_I,target + kv_I,draft + (o_8,target + o_8,draft) [kv = 1 B]

    Args:
      target, draft: the networks (the draft counts where ``present``): KV values per token, kv_I and o_8 (B).
      kv_bytes: kv, bytes per KV value of the KV format (B).

    Returns:
      KV-cache bytes per token position (B).

    Example:
      DeepSeek-V3.2 in FP8 with its MTP layer: (61 + 1) x (656 + 132) B = 48,856 B (DeepSeek-V3: 62 x 576 =
      35,712 B).

    References:
      FlashMLA README, FP8 sparse KV cache (github.com/deepseek-ai/FlashMLA); vLLM ``indexer_k_quant_and_cache``.
    """
    fp8_layout = jnp.where(kv_bytes == 1.0, target.fp8_latent_bytes + draft.fp8_latent_bytes * draft.present, 0.0)
    return ((target.kv_values_per_token + draft.kv_values_per_token * draft.present) * kv_bytes
            + (target.index_bytes_per_token + draft.index_bytes_per_token * draft.present) + fp8_layout)


def kv_capacity_tokens(dev: DeviceArrays, tp: jax.Array, target: ModelArrays, draft: ModelArrays,
                       weight_bytes: jax.Array, kv_bytes: jax.Array) -> jax.Array:
    """Token positions of KV the instance can hold (floored; negative clipped to 0 where weights alone overflow)."""
    free = dev.hbm_capacity_bytes * tp * MEM_UTIL - resident_bytes(target, draft, weight_bytes)
    return jnp.maximum(jnp.floor(free / kv_bytes_per_token(target, draft, kv_bytes)), 0.0)


def kv_positions_held(target: ModelArrays, draft: ModelArrays, positions: jax.Array) -> jax.Array:
    """Capacity positions (KV bytes of target + draft per token) one sequence of ``positions`` holds.

    n_held = n - kv_w / (kv_target + kv_draft) x max(n - (W + 1), 0): the windowed layers keep at most
    W + 1 positions, the full layers and the draft (MTP: a full-attention layer) keep all n. Without windows
    (kv_w = 0) this is n bit for bit.

    Args:
      target, draft: the networks (draft.present = 0: none).
      positions: n, token positions of the sequence.

    Returns:
      n_held, positions of :func:`kv_capacity_tokens` the sequence uses (<= n).

    Example:
      gpt-oss-120b (36 layers, 18 with W = 128; kv = 36 x 2 x 8 x 64 values per token): a 131,072-token
      sequence holds 131,072 - 0.5 x 130,943 = 65,600.5 positions.

    References:
      Jiang et al., Mistral 7B (arXiv:2310.06825), Sec. 2 "Rolling Buffer Cache": a window of W positions
      needs a cache of fixed size W per layer.
    """
    per_token = target.kv_values_per_token + draft.kv_values_per_token * draft.present
    share = target.window_kv_values_per_token / per_token
    return positions - share * jnp.maximum(positions - (target.window_tokens + 1.0), 0.0)


def state_positions(target: ModelArrays, draft: ModelArrays, kv_bytes: jax.Array) -> jax.Array:
    """Capacity positions one sequence's linear-attention state takes: (s_lin L_lin)_target+draft / kv_token.

    Args:
      target, draft: the networks (draft.present = 0: none); ``linear_state_bytes`` s_lin L_lin (B).
      kv_bytes: kv, bytes per KV value of the KV format (B).

    Returns:
      Positions of :func:`kv_capacity_tokens` (tokens); exactly 0 without Gated DeltaNet layers.

    Example:
      Qwen3.5-35B-A3B in bf16 KV (64,389,120 B of state, 10 full layers x 2 x 2 x 256 x 2 B = 20,480 B per
      token): 3,144 positions per sequence.

    References:
      vLLM hybrid KV-cache manager (one page per request and linear layer group, attention block size raised
      to the state's page size); SGLang ``--max-mamba-cache-size`` (github.com/sgl-project/sglang pull 15337).
    """
    state = target.linear_state_bytes + draft.linear_state_bytes * draft.present
    return state / kv_bytes_per_token(target, draft, kv_bytes)


def sequence_positions(target: ModelArrays, draft: ModelArrays, positions: jax.Array,
                       kv_bytes: jax.Array) -> jax.Array:
    """n_seq = n_held(n) + :func:`state_positions`: capacity positions one sequence of n positions takes.

    Args:
      target, draft: the networks.  positions: n (tokens).  kv_bytes: bytes per KV value (B).

    Returns:
      n_seq (tokens); :func:`kv_positions_held` exactly on a model without linear layers.

    Example:
      Qwen3.5-35B-A3B, bf16 KV, a 1,024-token sequence: 1,024 + 3,144 = 4,168 positions.
    """
    return kv_positions_held(target, draft, positions) + state_positions(target, draft, kv_bytes)
