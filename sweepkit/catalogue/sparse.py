"""Mixture-of-experts and multi-head latent attention fields of a HF ``config.json``.

Field names by family (all optional; a config without them is a dense GQA model):

- experts per MoE layer E: ``n_routed_experts`` (DeepSeek-V3), ``num_local_experts`` (Mixtral),
  ``num_experts`` (Qwen3-MoE); experts per token k: ``num_experts_per_tok``; shared experts:
  ``n_shared_experts`` (DeepSeek); expert FFN width: ``moe_intermediate_size`` (else ``intermediate_size``);
- dense layers: the first ``first_k_dense_replace`` layers (DeepSeek), the ``"dense"`` entries of
  ``mlp_layer_types`` (GLM-5; it must agree with ``first_k_dense_replace``), ``mlp_only_layers`` and every layer
  i with (i + 1) mod ``decoder_sparse_step`` != 0 (Qwen-MoE; Llama-4's ``interleave_moe_layer_step`` is the
  same rule), or every layer not in an explicit ``moe_layers`` list (Llama-4);
- MLA: ``kv_lora_rank`` d_c, ``q_lora_rank`` (null: full-rank queries), ``qk_rope_head_dim`` d_r,
  ``qk_nope_head_dim``, ``v_head_dim``;
- DeepSeek Sparse Attention (DSA, DeepSeek-V3.2): a lightning indexer of ``index_n_heads`` H_I heads of
  ``index_head_dim`` d_I scores every cached position, and attention reads the ``index_topk`` k best; which
  layers run their own indexer: every layer, or the ``"full"`` entries of ``indexer_types`` (the others reuse
  the previous indexer's positions: GLM-5's ``index_topk_freq``).

References:
  DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv 2412.19437, sec. 2.1 (MLA, DeepSeekMoE);
  DeepSeek-AI, "DeepSeek-V3.2-Exp: Boosting Long-Context Efficiency with DeepSeek Sparse Attention" (tech
  report, github.com/deepseek-ai/DeepSeek-V3.2-Exp) and its inference/model.py ``Indexer`` (wq_b, wk,
  k_norm, weights_proj);
  Jiang et al., "Mixtral of Experts", arXiv 2401.04088; Qwen3 model cards (huggingface.co/Qwen).
"""

from __future__ import annotations

from typing import Any, Mapping

from sweepkit.errors import InputError, bad_value

_EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts")


def _int(config: Mapping[str, Any], key: str, where: str, minimum: int = 1, default: Any = None) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise bad_value(key, value, f"an integer >= {minimum}", where=where)
    return value


def _layer_list(config: Mapping[str, Any], key: str, n_layers: int, where: str) -> list[int]:
    value = config.get(key) or []
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n_layers
                                              for i in value):
        raise bad_value(key, value, f"a list of layer indices in [0, num_hidden_layers = {n_layers})", where=where)
    return value


_MLP_TYPES = ("dense", "sparse")


def _dense_from_types(config: Mapping[str, Any], first: int, n_layers: int, where: str) -> int:
    """Dense layers of an ``mlp_layer_types`` list (GLM-5: "dense" / "sparse" per layer), which must agree with
    ``first_k_dense_replace`` where the config gives both."""
    types = config["mlp_layer_types"]
    if not isinstance(types, list) or len(types) != n_layers or any(t not in _MLP_TYPES for t in types):
        shown = types if not isinstance(types, list) else f"a list of {len(types)} entries"
        raise bad_value("mlp_layer_types", shown, f"a list of num_hidden_layers = {n_layers} entries, each one of "
                        f"{', '.join(_MLP_TYPES)}", where=where)
    dense = types.count("dense")
    if dense == n_layers:
        raise InputError(f"{where}: mlp_layer_types has no 'sparse' layer among num_hidden_layers = {n_layers}")
    if config.get("first_k_dense_replace") is not None and types != ["dense"] * first + ["sparse"] * (n_layers - first):
        raise InputError(f"{where}: mlp_layer_types ({dense} dense layers) disagrees with first_k_dense_replace = "
                         f"{first}; give one layer schedule")
    return dense


def _dense_layers(config: Mapping[str, Any], n_layers: int, where: str) -> int:
    """Layers with a dense FFN among ``n_layers`` (the others are MoE layers)."""
    first = _int(config, "first_k_dense_replace", where, minimum=0, default=0)
    if first >= n_layers:
        raise bad_value("first_k_dense_replace", first, f"an integer in [0, num_hidden_layers = {n_layers})",
                        where=where)
    if config.get("mlp_layer_types") is not None:
        return _dense_from_types(config, first, n_layers, where)
    if config.get("moe_layers"):
        return n_layers - len(set(_layer_list(config, "moe_layers", n_layers, where)))
    step_key = "interleave_moe_layer_step" if config.get("interleave_moe_layer_step") is not None \
        else "decoder_sparse_step"
    step = _int(config, step_key, where, default=1)
    only = _layer_list(config, "mlp_only_layers", n_layers, where)
    sparse = [i for i in range(n_layers) if i >= first and i not in only and (i + 1) % step == 0]
    if not sparse:
        raise InputError(f"{where}: {step_key} = {step}, first_k_dense_replace = {first} and mlp_only_layers "
                         f"leave no MoE layer among num_hidden_layers = {n_layers}")
    return n_layers - len(sparse)


def _check_expert_counts(config: Mapping[str, Any], where: str) -> None:
    """Two expert-count keys that disagree, or expert groups that do not divide the experts, are errors."""
    given = {k: config[k] for k in _EXPERT_KEYS if config.get(k) not in (None, 0)}
    if len(set(map(repr, given.values()))) > 1:
        shown = ", ".join(f"{k} = {v!r}" for k, v in given.items())
        raise InputError(f"{where}: {shown} disagree; give one expert count per MoE layer")
    groups = config.get("n_group")
    if groups is not None:
        experts = next(iter(given.values()))
        groups = _int(config, "n_group", where)
        if experts % groups:
            raise bad_value("n_group", groups, f"a divisor of the expert count {experts}", where=where)
        top = _int(config, "topk_group", where, default=groups)
        if top > groups:
            raise bad_value("topk_group", top, f"an integer in [1, n_group = {groups}]", where=where)


def moe_fields(config: Mapping[str, Any], n_layers: int, where: str) -> dict[str, int]:
    """Model fields of the MoE part: n_experts, experts_per_token, n_shared_experts, moe_d_ff, dense_layers.

    A config without an expert count (or with 0 experts) gives ``{}`` (a dense model).
    """
    key = next((k for k in _EXPERT_KEYS if config.get(k) not in (None, 0)), None)
    if key is None:
        if config.get("n_shared_experts"):
            raise bad_value("n_shared_experts", config["n_shared_experts"], "0 or absent in a config without "
                            f"routed experts (one of {', '.join(_EXPERT_KEYS)})", where=where)
        return {}
    experts = _int(config, key, where)
    _check_expert_counts(config, where)
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


_INDEX_KEYS = ("index_topk", "index_n_heads", "index_head_dim")
_INDEXER_TYPES = ("full", "shared")


def dsa_fields(config: Mapping[str, Any], n_layers: int, where: str) -> dict[str, int]:
    """Model fields of DeepSeek Sparse Attention: index_topk (k), index_n_heads (H_I), index_head_dim (d_I),
    indexer_layers (L_I, the layers with their own indexer). ``{}`` without any ``index_*`` field.

    L_I = L without ``indexer_types`` (``index_topk_freq`` absent, null or 1), else the count of its ``"full"``
    entries.

    Args:
      config: the HF ``config.json`` fields.
      n_layers: L, ``num_hidden_layers`` (layers).
      where: the file the fields come from, named in errors.

    Returns:
      ``index_topk`` k (tokens), ``index_n_heads`` H_I, ``index_head_dim`` d_I (values), ``indexer_layers``
      L_I (layers); ``{}`` for dense attention.

    Raises:
      InputError: a missing or non-positive ``index_*`` field, ``indexer_types`` of the wrong length, with an
        entry other than full / shared or a shared first entry, ``index_topk_freq`` != 1 without
        ``indexer_types``, or either of them without the ``index_*`` fields.

    Example:
      DeepSeek-V3.2 (config.json ``index_topk`` 2048, ``index_n_heads`` 64, ``index_head_dim`` 128, 61
      layers): k = 2048, H_I = 64, d_I = 128, L_I = 61.

    References:
      HF deepseek-ai/DeepSeek-V3.2 config.json; DeepSeek-V3.2-Exp inference/model.py ``Indexer``
      (github.com/deepseek-ai/DeepSeek-V3.2-Exp).
    """
    if all(config.get(k) is None for k in _INDEX_KEYS):
        for key in ("indexer_types", "index_topk_freq"):
            if config.get(key) is not None:
                raise bad_value(key, config[key], f"absent in a config without {', '.join(_INDEX_KEYS)}",
                                where=where)
        return {}
    out = {k: _int(config, k, where) for k in _INDEX_KEYS}
    types = config.get("indexer_types")
    if types is None:
        freq = 1 if config.get("index_topk_freq") is None else _int(config, "index_topk_freq", where)
        if freq != 1:
            raise bad_value("index_topk_freq", freq, "1, or indexer_types naming the layers that run their own "
                            "indexer", where=where)
        out["indexer_layers"] = n_layers
        return out
    if not isinstance(types, list) or len(types) != n_layers:
        shown = types if not isinstance(types, list) else f"a list of {len(types)} entries"
        raise bad_value("indexer_types", shown, f"a list of num_hidden_layers = {n_layers} entries, each one of "
                        f"{', '.join(_INDEXER_TYPES)}", where=where)
    bad = next((i for i, t in enumerate(types) if t not in _INDEXER_TYPES), None)
    if bad is not None:
        raise bad_value(f"indexer_types[{bad}]", types[bad], f"one of {', '.join(_INDEXER_TYPES)}", where=where)
    if types[0] != "full":
        raise bad_value("indexer_types", types[0], "'full' first (a shared layer reuses an earlier indexer)",
                        where=where)
    out["indexer_layers"] = sum(t == "full" for t in types)
    return out


INDEX_SCALE_BLOCK = 128
"""Indexer key values per FP32 scale in the FP8 indexer-key cache (vLLM ``indexer_k_quant_and_cache``, SGLang
NSA pool: d_I FP8 bytes + 4 bytes per 128 values; 132 B per token and layer for d_I = 128)."""


def indexer_key_bytes(head_dim: int) -> int:
    """Bytes of one position's indexer key in one layer's cache: d_I (FP8) + 4 ceil(d_I / 128) (FP32 scales).

    Args:
      head_dim: d_I, ``index_head_dim`` (values).

    Returns:
      Bytes per token and layer (B), whatever the KV format of the latents.

    Example:
      DeepSeek-V3.2, d_I = 128: 128 + 4 = 132 B.

    References:
      vLLM ``indexer_k_quant_and_cache`` and SGLang's NSA token-to-KV pool (FP8 key, one FP32 scale per 128
      values).
    """
    return head_dim + 4 * -(-head_dim // INDEX_SCALE_BLOCK)


FP8_LATENT_SCALE_BLOCK = 128
"""Latent values per FP32 scale in the FP8 cache of a DSA model's MLA latents (FlashMLA's sparse FP8 layout)."""


def fp8_latent_overhead_bytes(kv_lora_rank: int, rope_dim: int) -> int:
    """Bytes per token and layer that the FP8 cache of a DSA model's latents holds beyond d_c + d_r bytes:
    4 ceil(d_c / 128) (FP32 scales) + d_r (the RoPE key stays bf16).

    FlashMLA's FP8 sparse layout (vLLM ``fp8_ds_mla``, SGLang's NSA FP8 store): 512 FP8 latents, 4 FP32 scales,
    64 bf16 RoPE values = 656 B against 576.

    Args:
      kv_lora_rank: d_c, the latent width (values).
      rope_dim: d_r, ``qk_rope_head_dim`` (values).

    Returns:
      Bytes per token and layer beyond d_c + d_r at 1 B per value (B).

    Example:
      DeepSeek-V3.2 (d_c = 512, d_r = 64): 16 + 64 = 80 B.

    References:
      FlashMLA README, FP8 sparse KV cache format (github.com/deepseek-ai/FlashMLA).
    """
    return 4 * -(-kv_lora_rank // FP8_LATENT_SCALE_BLOCK) + rope_dim


def indexer_params(d: int, f: Mapping[str, int]) -> int:
    """Parameters of one layer's lightning indexer: queries from the query latent (or from the hidden state
    without one), one shared key, per-head weights.

    wq_b: r_q H_I d_I (D H_I d_I with r_q = 0); wk: D d_I; weights_proj: D H_I (the key's LayerNorm, 2 d_I,
    is left out like every norm).

    Args:
      d: D, ``hidden_size`` (values).
      f: the model's fields: ``index_n_heads`` H_I, ``index_head_dim`` d_I, ``q_lora_rank`` r_q (0 or absent:
        queries from the hidden state).

    Returns:
      Parameters of one layer's indexer (params).

    Example:
      DeepSeek-V3.2: 1,536 x 8,192 + 7,168 x 128 + 7,168 x 64 = 13,959,168 (13.96 M) per layer.

    References:
      DeepSeek-V3.2-Exp inference/model.py ``Indexer`` (github.com/deepseek-ai/DeepSeek-V3.2-Exp).
    """
    heads, dim = f["index_n_heads"], f["index_head_dim"]
    source = f.get("q_lora_rank") or d
    return source * heads * dim + d * dim + d * heads
