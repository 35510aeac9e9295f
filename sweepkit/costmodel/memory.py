"""HBM residency: resident weights, KV capacity in tokens, and whether a point fits.

    KV capacity = (HBM x n x mem_util - resident weight bytes) / (kv_target + kv_draft) per token

with mem_util = 0.9 (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim). Llama-3-8B on one H100: 426,788 tokens (410,628 with an MTP
draft); Llama-3-70B on 4 x H100: 448,288 tokens.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays

MEM_UTIL = 0.9
"""Fraction of HBM the serving engine may use (seed SimConfig mem_util)."""


def resident_bytes(target: ModelArrays, draft: ModelArrays, weight_bytes: jax.Array) -> jax.Array:
    """Weights held in HBM over the whole instance: target plus what the draft adds, in the weight format."""
    return (target.resident_params + draft.resident_params * draft.present) * weight_bytes


def kv_bytes_per_token(target: ModelArrays, draft: ModelArrays, kv_bytes: jax.Array) -> jax.Array:
    """KV bytes one token position costs: the target's plus the draft's (MTP: one layer)."""
    return (target.kv_values_per_token + draft.kv_values_per_token * draft.present) * kv_bytes


def kv_capacity_tokens(dev: DeviceArrays, tp: jax.Array, target: ModelArrays, draft: ModelArrays,
                       weight_bytes: jax.Array, kv_bytes: jax.Array) -> jax.Array:
    """Token positions of KV the instance can hold (floored; negative clipped to 0 where weights alone overflow)."""
    free = dev.hbm_capacity_bytes * tp * MEM_UTIL - resident_bytes(target, draft, weight_bytes)
    return jnp.maximum(jnp.floor(free / kv_bytes_per_token(target, draft, kv_bytes)), 0.0)
