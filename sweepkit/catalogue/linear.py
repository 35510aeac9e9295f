"""Linear-attention (Gated DeltaNet) layers of hybrid models: config fields, weights, state and work per token.

Qwen3-Next and Qwen3.5 interleave Gated DeltaNet layers with gated full-attention layers, 3:1: every
``full_attention_interval``-th layer (4) attends over the whole context, the others keep a fixed-size
recurrent state per sequence and no KV cache that grows with the context. Which layers are linear:
the ``"linear_attention"`` entries of ``layer_types`` where the config lists them (Qwen3.5), else every
layer i with (i + 1) mod ``full_attention_interval`` != 0 (Qwen3-Next). A Gated DeltaNet layer has H_k key
heads of width d_k (queries share them), H_v value heads of width d_v (H_k divides H_v), a causal depthwise
convolution of width K over its q, k and v channels, and per value head a state S of d_v x d_k values.

Per token and value head the gated delta rule (Yang, Kautz, Hatamizadeh, arXiv 2412.06464, eq. 10),

    S_t = S_{t-1} (alpha_t (I - beta_t k_t k_t^T)) + beta_t v_t k_t^T,     o_t = S_t q_t,

runs as u = S_{t-1} k_t (2 d_k d_v FLOPs), alpha_t S_{t-1} (d_k d_v), the rank-one update S_t = alpha_t S_{t-1}
+ beta_t (v_t - alpha_t u) k_t^T (2 d_k d_v: outer product and add) and o_t = S_t q_t (2 d_k d_v): 7 d_k d_v
FLOPs; the convolution adds 2 K FLOPs per channel, 2 K (2 H_k d_k + H_v d_v). Per layer and token

    F_lin = 7 H_v d_k d_v + 2 K (2 H_k d_k + H_v d_v)      (Qwen3.5-35B-A3B: 3,735,552 FLOPs)

The O(d) terms (gates, L2 norms of q and k, the output norm) are left out. Prefill in the chunked (WY) form
does the same state work per token plus O(C (d_k + d_v)) inside each chunk of C tokens: linear in the
prompt length, priced at F_lin per token. A sequence holds, per linear layer,

    s_lin = H_v d_k d_v s_ssm + (K - 1) (2 H_k d_k + H_v d_v) x 2 B

(s_ssm: bytes per state value, ``mamba_ssm_dtype``: Qwen3.5's config sets float32, 4 B; Qwen3-Next's has
none and vLLM keeps it in the model's dtype, 2 B; the convolution's last K - 1 inputs in bf16). A decode step
reads and writes that state once per sequence. Weights of one layer (norms left out, as everywhere):

    in_proj (q, k, v, output gate z): D (2 H_k d_k + 2 H_v d_v);  in_proj (beta, alpha): 2 D H_v;
    conv: K (2 H_k d_k + H_v d_v);  A_log, dt_bias: 2 H_v;  out_proj: H_v d_v D

Qwen3.5-35B-A3B (D 2,048, H_k 16, H_v 32, d_k = d_v = 128, K 4): 33,718,336 per layer, 2,146,304 B of state.

References:
  Yang, Kautz, Hatamizadeh, "Gated Delta Networks: Improving Mamba2 with Delta Rule", ICLR 2025,
  arXiv 2412.06464, sec. 3 (gated delta rule, chunked form); Qwen team, Qwen3-Next and Qwen3.5 config.json
  (huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct, huggingface.co/Qwen/Qwen3.5-35B-A3B); vLLM pull 34489
  (SSM state in ``mamba_ssm_dtype``, model dtype by default; conv state in the model dtype).
"""

from __future__ import annotations

from typing import Any, Mapping

from sweepkit.errors import InputError, bad_value

LINEAR_KEYS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
               "linear_conv_kernel_dim")
"""The config fields of a Gated DeltaNet layer (all required on a hybrid model)."""
STATE_DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2}
"""``mamba_ssm_dtype`` values and their bytes per state value."""
DEFAULT_STATE_BYTES = 2
"""Bytes per state value without ``mamba_ssm_dtype``: the model's dtype (vLLM ``--mamba-ssm-cache-dtype auto``)."""
CONV_STATE_BYTES = 2
"""Bytes per value of the convolution state (the model's dtype, bf16)."""
STATE_FLOPS_PER_VALUE = 7
"""FLOPs per state value per token of the recurrent gated delta rule (module docstring)."""


def _int(config: Mapping[str, Any], key: str, where: str, minimum: int = 1, default: Any = None) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise bad_value(key, value, f"an integer >= {minimum}", where=where)
    return value


def _linear_layers(config: Mapping[str, Any], n_layers: int, where: str) -> int:
    types = config.get("layer_types")
    if types is not None:
        return sum(t == "linear_attention" for t in types) if isinstance(types, list) else 0
    interval = _int(config, "full_attention_interval", where)
    if interval > n_layers:
        raise bad_value("full_attention_interval", interval, f"an integer in [1, num_hidden_layers = {n_layers}] "
                        "(at least one full-attention layer)", where=where)
    return sum((i + 1) % interval != 0 for i in range(n_layers))


def linear_fields(config: Mapping[str, Any], n_layers: int, where: str) -> dict[str, int]:
    """Model fields of the Gated DeltaNet layers: linear_layers (L_lin), linear_key_heads (H_k),
    linear_value_heads (H_v), linear_key_dim (d_k), linear_value_dim (d_v), linear_conv_kernel (K),
    linear_state_bytes (s_ssm), attention_output_gate (``attn_output_gate``; true by default on a hybrid model,
    as Qwen3-Next's config leaves it implicit). ``{}`` for a model without linear layers or output gate.

    Args:
      config: the HF ``config.json`` fields.  n_layers: L, ``num_hidden_layers`` (layers).
      where: the file the fields come from, named in errors.

    Returns:
      The fields above (heads, widths in values; K in tokens; s_ssm in B).

    Raises:
      InputError: a ``linear_*`` field missing or not a positive integer, H_k not dividing H_v, linear layers
        without any ``linear_*`` field or the reverse, no full-attention layer, ``full_attention_interval``
        disagreeing with ``layer_types``, or a ``mamba_ssm_dtype`` other than float32, bfloat16, float16.

    Example:
      Qwen3.5-35B-A3B (40 layers, interval 4, H_k 16, H_v 32, d_k = d_v = 128, K 4, float32 state):
      L_lin = 30, s_ssm = 4 B.

    References:
      HF Qwen/Qwen3.5-35B-A3B and Qwen/Qwen3-Next-80B-A3B-Instruct config.json; Yang et al., arXiv 2412.06464.
    """
    given = [k for k in LINEAR_KEYS if config.get(k) is not None]
    types = config.get("layer_types")
    listed = isinstance(types, list) and "linear_attention" in types
    gate = config.get("attn_output_gate", bool(given or listed))      # Qwen3-Next gates without the field
    if not isinstance(gate, bool):
        raise bad_value("attn_output_gate", gate, "true or false", where=where)
    if not given and not listed:
        if config.get("full_attention_interval") is not None and config.get("full_attention_interval") != 1:
            raise bad_value("full_attention_interval", config["full_attention_interval"],
                            f"1 or absent in a config without {', '.join(LINEAR_KEYS)}", where=where)
        return {"attention_output_gate": True} if gate else {}
    if not given:
        raise InputError(f"{where}: layer_types lists linear_attention layers but the config has none of "
                         f"{', '.join(LINEAR_KEYS)}; a Gated DeltaNet layer needs all of them")
    out = {k: _int(config, k, where) for k in LINEAR_KEYS}
    if out["linear_num_value_heads"] % out["linear_num_key_heads"]:
        raise bad_value("linear_num_value_heads", out["linear_num_value_heads"],
                        f"a multiple of linear_num_key_heads = {out['linear_num_key_heads']}", where=where)
    if types is None and config.get("full_attention_interval") is None:
        raise InputError(f"{where}: {', '.join(given)} given without layer_types or full_attention_interval; "
                         "give which layers are linear_attention")
    layers = _linear_layers(config, n_layers, where)
    if layers == n_layers:
        raise bad_value("layer_types", "every layer linear_attention", "at least one full_attention layer "
                        "(sweepkit models hybrid linear/full-attention stacks)", where=where)
    interval = config.get("full_attention_interval")
    if types is not None and interval is not None:
        expected = sum((i + 1) % _int(config, "full_attention_interval", where) != 0 for i in range(n_layers))
        if expected != layers:
            raise bad_value("full_attention_interval", interval, f"the layer_types pattern ({n_layers - layers} "
                            f"full_attention of {n_layers} layers)", where=where)
    dtype = config.get("mamba_ssm_dtype")
    if dtype is not None and dtype not in STATE_DTYPES:
        raise bad_value("mamba_ssm_dtype", dtype, f"one of {', '.join(STATE_DTYPES)}", where=where)
    return dict(linear_layers=layers, linear_key_heads=out["linear_num_key_heads"],
                linear_value_heads=out["linear_num_value_heads"], linear_key_dim=out["linear_key_head_dim"],
                linear_value_dim=out["linear_value_head_dim"], linear_conv_kernel=out["linear_conv_kernel_dim"],
                linear_state_bytes=STATE_DTYPES.get(dtype, DEFAULT_STATE_BYTES), attention_output_gate=gate)


def conv_channels(f: Mapping[str, int]) -> int:
    """Channels of a Gated DeltaNet layer's causal convolution, 2 H_k d_k + H_v d_v (q, k and v)."""
    return 2 * f["linear_key_heads"] * f["linear_key_dim"] + f["linear_value_heads"] * f["linear_value_dim"]


def linear_layer_params(d: int, f: Mapping[str, int]) -> int:
    """Parameters of one Gated DeltaNet token mixer (norms left out): D (2 H_k d_k + 2 H_v d_v) + 2 D H_v
    + K (2 H_k d_k + H_v d_v) + 2 H_v + H_v d_v D.

    Args:
      d: D, ``hidden_size`` (values).  f: the model's ``linear_*`` fields (:func:`linear_fields`).

    Returns:
      Parameters of one layer's token mixer (params).

    Example:
      Qwen3.5-35B-A3B: 2,048 x 12,288 + 2 x 2,048 x 32 + 4 x 8,192 + 64 + 4,096 x 2,048 = 33,718,336.

    References:
      HF transformers ``Qwen3NextGatedDeltaNet`` (in_proj_qkvz, in_proj_ba, conv1d, A_log, dt_bias, out_proj).
    """
    h_v, d_v = f["linear_value_heads"], f["linear_value_dim"]
    qkvz = d * (2 * f["linear_key_heads"] * f["linear_key_dim"] + 2 * h_v * d_v)
    return qkvz + 2 * d * h_v + f["linear_conv_kernel"] * conv_channels(f) + 2 * h_v + h_v * d_v * d


def linear_flops_per_token(f: Mapping[str, int]) -> int:
    """FLOPs of one Gated DeltaNet layer's state update, read and convolution per token (weights apart):
    7 H_v d_k d_v + 2 K (2 H_k d_k + H_v d_v) (module docstring).

    Example:
      Qwen3.5-35B-A3B: 7 x 32 x 16,384 + 2 x 4 x 8,192 = 3,735,552 FLOPs.
    """
    state = f["linear_value_heads"] * f["linear_key_dim"] * f["linear_value_dim"]
    return STATE_FLOPS_PER_VALUE * state + 2 * f["linear_conv_kernel"] * conv_channels(f)


def linear_state_bytes(f: Mapping[str, int]) -> int:
    """Bytes one sequence holds in one Gated DeltaNet layer: H_v d_k d_v s_ssm + (K - 1) (2 H_k d_k + H_v d_v) x 2.

    Example:
      Qwen3.5-35B-A3B (float32 state): 32 x 16,384 x 4 + 3 x 8,192 x 2 = 2,146,304 B.
    """
    state = f["linear_value_heads"] * f["linear_key_dim"] * f["linear_value_dim"] * f["linear_state_bytes"]
    return state + (f["linear_conv_kernel"] - 1) * conv_channels(f) * CONV_STATE_BYTES
