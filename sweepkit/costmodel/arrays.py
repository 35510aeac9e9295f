"""Catalogue entries as JAX pytrees of scalar arrays (stackable along a leading grid axis).

Frozen dataclasses registered with ``jax.tree_util.register_dataclass``: every field is a leaf, so a
stacked ``DeviceArrays`` (one row per catalogue device) can be indexed inside ``jit`` by a device index.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.catalogue import Device, Draft, Model, get_format
from sweepkit.costmodel.kernels import layer_kernels


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class DeviceArrays:
    """Numeric fields of :class:`sweepkit.catalogue.Device` (per chip; base SI units)."""

    peak_flops_per_s: jax.Array
    hbm_bytes_per_s: jax.Array
    hbm_capacity_bytes: jax.Array
    tdp_w: jax.Array
    idle_w: jax.Array
    energy_per_flop_j: jax.Array
    energy_per_hbm_byte_j: jax.Array
    flops_efficiency: jax.Array
    bandwidth_efficiency: jax.Array
    pass_overhead_s: jax.Array
    link_bytes_per_s: jax.Array
    link_latency_s: jax.Array
    link_energy_per_bit_j: jax.Array
    token_overhead_s: jax.Array
    scaleup_domain_gpus: jax.Array
    scaleout_bytes_per_s: jax.Array
    vector_flops_per_s: jax.Array
    full_mesh: jax.Array = 0.0


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ModelArrays:
    """What the cost model needs of a network (see docs/notation.md).

    Attributes:
      n_layers: L.  d_model: D.  q_dim: attention width of decode pairs (H d_h; MLA absorbed: H (d_c + d_r / 2)).
      matmul_params: P_mm = L x per-layer + V D (streamed every pass; MoE: the active parameters).
      resident_params: parameters held in HBM (for a draft: what it adds to the target's).
      kv_values_per_token: 2 L H_kv d_h (multiply by bytes per KV value).
      present: 1.0 for a real network, 0.0 for the ``none`` draft (all costs vanish).
      routed_expert_params: P_e, one routed expert over all MoE layers (0 for a dense network).
      n_experts, experts_per_token: E and k of the MoE layers (0 for a dense network).
      window_kv_values_per_token: 2 L_w H_kv d_h, the windowed layers' part of kv_values_per_token (0: none).
      window_tokens: W, the positions a windowed layer attends to (0: none).
      window_layers: L_w, the layers with a window (0: none).
      topk_tokens: k, the positions a DeepSeek Sparse Attention layer attends to (0: dense attention).
      index_flops_per_position: 2 L_I H_I d_I, the indexer FLOPs of one (new token, cached position) pair
        over the layers (0 without DSA).
      index_bytes_per_token: L_I (d_I + 4 ceil(d_I / 128)), indexer-key bytes cached per token, FP8 whatever
        the KV format (0 without DSA).
      fp8_latent_bytes: L (4 ceil(d_c / 128) + d_r), bytes per token a 1-byte KV format adds to a DSA model's
        latents (FlashMLA's FP8 sparse layout: FP32 scales, bf16 RoPE key; 0 otherwise).
      indexer_params: P_I = L_I (r_q H_I d_I + D d_I + D H_I), the lightning indexers' weights over their
        layers, which every attention-TP rank holds whole (0 without DSA).
      expert_weight_bytes: w_e, bytes per value the routed experts keep whatever the weight format (0: the
        weight format's; experts then cost min(w, w_e)).
      attention_weight_bytes: w_a, bytes per value the attention projections and output head keep whatever the
        weight format (0: the weight format's; they then cost max(w, w_a)).
      kept_params, kept_resident_params: P_a, the weights w_a covers that a pass reads (attention projections
        and output head), and those held (plus the input embedding unless tied; a draft's own only).
      prefill_q_dim: q_p, attention width of prompt-chunk pairs (MLA in MHA form: H (d_nope + d_r + d_v) / 2;
        q_dim for GQA and DSA).
      prefix_flops_per_token: 2 L d_c H (d_nope + d_v), FLOPs a prompt chunk spends per cached prefix position
        up-projecting its latent (0 for GQA and DSA).
      attention_layers: L_a, the layers that attend over the whole context (L without Gated DeltaNet layers).
      linear_flops_per_token: F_lin L_lin, the Gated DeltaNet layers' state-update, read and convolution FLOPs
        per new token (0 without linear layers; :mod:`sweepkit.catalogue.linear`).
      linear_state_bytes: s_lin L_lin, bytes of recurrent and convolution state one sequence holds over the
        linear layers, read and written once per pass a sequence takes part in (0 without linear layers).
      layer_kernels, quant_kernels: n_struct and n_q, kernels one decoder layer launches per pass and the
        activation quantisations its narrow-format GEMMs add (:func:`sweepkit.costmodel.kernels.layer_kernels`).
      allreduces_per_layer: n_ar, tensor-parallel all-reduces of one layer (2; 1 where attention and MLP outputs
        are summed before one, ``Model.shared_allreduce``); a pass over tp > 1 devices runs n_ar L of them.
    """

    n_layers: jax.Array
    d_model: jax.Array
    q_dim: jax.Array
    matmul_params: jax.Array
    resident_params: jax.Array
    kv_values_per_token: jax.Array
    present: jax.Array
    routed_expert_params: jax.Array
    n_experts: jax.Array
    experts_per_token: jax.Array
    window_kv_values_per_token: jax.Array
    window_tokens: jax.Array
    window_layers: jax.Array
    topk_tokens: jax.Array
    index_flops_per_position: jax.Array
    index_bytes_per_token: jax.Array
    fp8_latent_bytes: jax.Array
    indexer_params: jax.Array
    expert_weight_bytes: jax.Array
    attention_weight_bytes: jax.Array
    kept_params: jax.Array
    kept_resident_params: jax.Array
    prefill_q_dim: jax.Array
    prefix_flops_per_token: jax.Array
    layer_kernels: jax.Array
    quant_kernels: jax.Array
    attention_layers: jax.Array
    linear_flops_per_token: jax.Array
    linear_state_bytes: jax.Array
    allreduces_per_layer: jax.Array


_DEVICE_FIELDS = [f.name for f in dataclasses.fields(DeviceArrays)]


def _leaf(v: np.ndarray, dtype, host: bool):
    """A device array, or with ``host`` a numpy array (to stack on the host and transfer once)."""
    return np.asarray(v, dtype=dtype or np.float64) if host else jnp.asarray(v, dtype=dtype)


def device_arrays(device: Device | list[Device], dtype=None, *, host: bool = False) -> DeviceArrays:
    """One device (scalars) or a list (leading axis, in list order) as :class:`DeviceArrays`."""
    devices = device if isinstance(device, list) else [device]
    cols = {k: np.array([getattr(d, k) for d in devices], dtype=np.float64) for k in _DEVICE_FIELDS}
    out = {k: _leaf(v if isinstance(device, list) else v[0], dtype, host) for k, v in cols.items()}
    return DeviceArrays(**out)


def _model_row(model: Model | None, resident: float | None = None) -> dict[str, float]:
    if model is None:
        return dict(n_layers=0.0, d_model=0.0, q_dim=0.0, matmul_params=0.0, resident_params=0.0,
                    kv_values_per_token=0.0, present=0.0, routed_expert_params=0.0, n_experts=0.0,
                    experts_per_token=0.0, window_kv_values_per_token=0.0, window_tokens=0.0,
                    window_layers=0.0, topk_tokens=0.0, index_flops_per_position=0.0, index_bytes_per_token=0.0,
                    fp8_latent_bytes=0.0, indexer_params=0.0, expert_weight_bytes=0.0, attention_weight_bytes=0.0,
                    kept_params=0.0, kept_resident_params=0.0, prefill_q_dim=0.0,
                    prefix_flops_per_token=0.0, layer_kernels=0.0, quant_kernels=0.0, attention_layers=0.0,
                    linear_flops_per_token=0.0, linear_state_bytes=0.0, allreduces_per_layer=0.0)
    n_struct, n_quant = layer_kernels(model)
    return dict(n_layers=float(model.n_layers), d_model=float(model.d_model), q_dim=float(model.attention_width),
                matmul_params=float(model.matmul_params),
                resident_params=float(model.resident_params if resident is None else resident),
                kv_values_per_token=float(model.kv_values_per_token), present=1.0,
                routed_expert_params=float(model.routed_expert_params), n_experts=float(model.n_experts),
                experts_per_token=float(model.experts_per_token),
                window_kv_values_per_token=float(model.window_kv_bytes_per_token(1.0)),
                window_tokens=float(model.sliding_window), window_layers=float(model.window_layers),
                topk_tokens=float(model.index_topk),
                index_flops_per_position=2.0 * model.indexer_layers * model.index_n_heads * model.index_head_dim,
                index_bytes_per_token=float(model.index_kv_bytes_per_token),
                fp8_latent_bytes=float(model.fp8_latent_overhead_bytes),
                indexer_params=float(model.indexer_layers * model.indexer_params),
                expert_weight_bytes=(get_format(model.expert_weight_format).bytes_per_value
                                     if model.expert_weight_format else 0.0),
                attention_weight_bytes=(get_format(model.attention_weight_format).bytes_per_value
                                        if model.attention_weight_format else 0.0),
                kept_params=float(model.kept_params),
                kept_resident_params=float(model.kept_resident_params if resident is None
                                           else min(model.kept_resident_params, resident)),
                prefill_q_dim=float(model.prefill_attention_width),
                prefix_flops_per_token=float(model.prefix_upprojection_flops),
                layer_kernels=float(n_struct), quant_kernels=float(n_quant),
                attention_layers=float(model.attention_layers),
                linear_flops_per_token=float(model.linear_flops_per_token),
                linear_state_bytes=float(model.linear_state_bytes_per_sequence),
                allreduces_per_layer=float(model.allreduces_per_layer))


def model_arrays(model: Model | Draft | None | list, dtype=None, *, host: bool = False) -> ModelArrays:
    """A target :class:`Model`, a :class:`Draft` (its per-pass network, its added residency) or a list."""
    items = model if isinstance(model, list) else [model]
    rows = []
    for item in items:
        if isinstance(item, Draft):
            rows.append(_model_row(item.model, item.resident_params))
        else:
            rows.append(_model_row(item))
    cols = {k: np.array([r[k] for r in rows], dtype=np.float64) for k in rows[0]}
    out = {k: _leaf(v if isinstance(model, list) else v[0], dtype, host) for k, v in cols.items()}
    return ModelArrays(**out)
