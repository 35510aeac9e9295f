"""Mixture-of-experts and multi-head latent attention fields of a HF ``config.json``.

Field names by family (all optional; a config without them is a dense GQA model):

- experts per MoE layer E: ``n_routed_experts`` (DeepSeek-V3), ``num_local_experts`` (Mixtral),
  ``num_experts`` (Qwen3-MoE); experts per token k: ``num_experts_per_tok``; shared experts:
  ``n_shared_experts`` (DeepSeek); expert FFN width: ``moe_intermediate_size`` (else ``intermediate_size``);
- dense layers: the first ``first_k_dense_replace`` layers (DeepSeek), ``mlp_only_layers`` and every layer
  i with (i + 1) mod ``decoder_sparse_step`` != 0 (Qwen-MoE);
- MLA: ``kv_lora_rank`` d_c, ``q_lora_rank`` (null: full-rank queries), ``qk_rope_head_dim`` d_r,
  ``qk_nope_head_dim``, ``v_head_dim``.

References:
  DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv 2412.19437, sec. 2.1 (MLA, DeepSeekMoE);
  Jiang et al., "Mixtral of Experts", arXiv 2401.04088; Qwen3 model cards (huggingface.co/Qwen).
"""

from __future__ import annotations

from typing import Any, Mapping

from sweepkit.errors import bad_value

_EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts")


def _int(config: Mapping[str, Any], key: str, where: str, minimum: int = 1, default: Any = None) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise bad_value(key, value, f"an integer >= {minimum}", where=where)
    return value


def _dense_layers(config: Mapping[str, Any], n_layers: int, where: str) -> int:
    """Layers with a dense FFN among ``n_layers`` (the others are MoE layers)."""
    first = _int(config, "first_k_dense_replace", where, minimum=0, default=0)
    step = _int(config, "decoder_sparse_step", where, default=1)
    only = config.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in only):
        raise bad_value("mlp_only_layers", only, "a list of layer indices", where=where)
    sparse = [i for i in range(n_layers) if i >= first and i not in only and (i + 1) % step == 0]
    return n_layers - len(sparse)


def moe_fields(config: Mapping[str, Any], n_layers: int, where: str) -> dict[str, int]:
    """Model fields of the MoE part: n_experts, experts_per_token, n_shared_experts, moe_d_ff, dense_layers.

    A config without an expert count gives ``{}`` (a dense model).
    """
    key = next((k for k in _EXPERT_KEYS if config.get(k) is not None), None)
    if key is None:
        return {}
    experts = _int(config, key, where)
    per_token = _int(config, "num_experts_per_tok", where)
    if per_token > experts:
        raise bad_value("num_experts_per_tok", per_token, f"an integer in [1, {key} = {experts}]", where=where)
    width = config.get("moe_intermediate_size", config.get("intermediate_size"))
    width = _int({"moe_intermediate_size": width}, "moe_intermediate_size", where)
    return dict(n_experts=experts, experts_per_token=per_token,
                n_shared_experts=_int(config, "n_shared_experts", where, minimum=0, default=0),
                moe_d_ff=width, dense_layers=_dense_layers(config, n_layers, where))


def mla_fields(config: Mapping[str, Any], where: str) -> dict[str, int]:
    """Model fields of multi-head latent attention (``{}`` without ``kv_lora_rank``)."""
    if config.get("kv_lora_rank") is None:
        return {}
    q_rank = config.get("q_lora_rank")
    return dict(kv_lora_rank=_int(config, "kv_lora_rank", where),
                q_lora_rank=0 if q_rank is None else _int(config, "q_lora_rank", where),
                qk_rope_head_dim=_int(config, "qk_rope_head_dim", where),
                qk_nope_head_dim=_int(config, "qk_nope_head_dim", where),
                v_head_dim=_int(config, "v_head_dim", where))


def mla_attention_params(d: int, heads: int, f: Mapping[str, int]) -> int:
    """Parameters of one MLA block: query (low-rank or full), latent KV down/up projections, output.

    q: D r_q + r_q H (d_nope + d_r) (or D H (d_nope + d_r) with r_q = 0); kv down: D (d_c + d_r);
    kv up: d_c H (d_nope + d_v); out: H d_v D. DeepSeek-V3: 174.5 M per layer.
    """
    qk = heads * (f["qk_nope_head_dim"] + f["qk_rope_head_dim"])
    q = d * f["q_lora_rank"] + f["q_lora_rank"] * qk if f["q_lora_rank"] else d * qk
    kv = d * (f["kv_lora_rank"] + f["qk_rope_head_dim"]) + f["kv_lora_rank"] * heads * (
        f["qk_nope_head_dim"] + f["v_head_dim"])
    return q + kv + heads * f["v_head_dim"] * d
