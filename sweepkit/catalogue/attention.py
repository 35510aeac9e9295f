"""Attention variants and family spellings of a HF ``config.json``: windows, chunks, sinks, MTP, quantisation.

A windowed layer attends to at most the last W positions (sliding window, W = ``sliding_window``) or to the
positions of its own chunk (chunked attention, W = ``attention_chunk_size``), so a decode step reads at most
W + 1 KV positions per row on that layer, whatever the context. Which layers are windowed:

- ``layer_types`` (gpt-oss, recent transformers): ``sliding_attention`` / ``chunked_attention`` entries;
- Llama-4 (``attention_chunk_size``): the RoPE layers, i.e. every layer but each ``no_rope_layer_interval``-th
  (``no_rope_layers``: 1 marks a RoPE layer), 36 of 48;
- Qwen2/Qwen3 (``use_sliding_window``): false means none; true means layers from ``max_window_layers`` on;
- otherwise a ``sliding_window`` integer windows every layer (Mistral-7B-v0.1).

Attention sinks (gpt-oss) are one learned logit per head and layer: H parameters per layer, no cached
positions. MTP layers (``num_nextn_predict_layers``, DeepSeek-V3/R1, GLM-4.5) are stored with the checkpoint
but are not part of the model cards' totals; sweepkit counts them apart (Model.mtp_layers).

Family spellings mapped to the DeepSeek/Mixtral names the loader reads (:func:`canonical_config`; GPT-J,
Falcon and MiniMax in :mod:`sweepkit.catalogue.config_families`):
``text_config`` (Llama-4, multimodal checkpoints) is read as the model; Llama-4's ``intermediate_size`` is
the expert width and ``intermediate_size_mlp`` the dense FFN width, with one shared expert per MoE layer;
gpt-oss's ``experts_per_token`` is ``num_experts_per_tok``; Qwen-MoE's ``shared_expert_intermediate_size``
is a whole number of shared experts of ``moe_intermediate_size``; a MoE config with every layer MoE and no
``intermediate_size`` (Qwen3.5 MoE) takes ``moe_intermediate_size`` for it (no dense FFN uses it).

References:
  OpenAI, "gpt-oss-120b & gpt-oss-20b Model Card", arXiv 2508.10925, sec. 2 (alternating banded window of
  128 tokens, learned attention sinks); Meta, Llama-4 model card (huggingface.co/meta-llama/
  Llama-4-Scout-17B-16E, chunked attention of 8192, interleaved MoE); Jiang et al., "Mistral 7B",
  arXiv 2310.06825, sec. 2 (sliding window 4096); DeepSeek-AI, arXiv 2412.19437, sec. 2.2 (MTP).
"""

from __future__ import annotations

from typing import Any, Mapping

from sweepkit.catalogue.config_families import family_config
from sweepkit.errors import InputError, bad_value

_WINDOWED = {"sliding_attention": "sliding_window", "chunked_attention": "attention_chunk_size"}
_LAYER_TYPES = ("full_attention", "linear_attention", *_WINDOWED)
"""``layer_types`` entries; ``linear_attention`` (Gated DeltaNet) layers are read by sweepkit.catalogue.linear."""
_LLAMA4 = ("llama4", "llama4_text")


def _int(config: Mapping[str, Any], key: str, where: str, minimum: int = 1, default: Any = None) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise bad_value(key, value, f"an integer >= {minimum}", where=where)
    return value


def canonical_config(config: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The config with family spellings mapped to the names :func:`model_from_hf_config` reads.

    Args:
      config: the fields of a HF ``config.json`` (or a models.toml entry).  where: label for messages.

    Returns:
      A new dict; a config without family spellings comes back unchanged but for ``gated_mlp``
      (:func:`sweepkit.catalogue.config_families.family_config`).
    """
    out = dict(config)
    text = out.get("text_config")
    if "hidden_size" not in out and text is not None:
        if not isinstance(text, dict):
            raise bad_value("text_config", type(text).__name__, "a JSON object of the language model's fields",
                            where=where)
        out = {**{k: v for k, v in out.items() if k != "text_config"}, **text}
    out = family_config(out, where)
    if out.get("intermediate_size") is None and out.get("moe_intermediate_size") is not None \
            and not out.get("mlp_only_layers") and out.get("first_k_dense_replace") in (None, 0):
        out["intermediate_size"] = out["moe_intermediate_size"]     # every layer MoE (Qwen3.5 MoE configs)
    if out.get("intermediate_size_mlp") is not None and out.get("moe_intermediate_size") is None:
        out["moe_intermediate_size"] = out.get("intermediate_size")
        out["intermediate_size"] = out["intermediate_size_mlp"]
    if out.get("model_type") in _LLAMA4 and out.get("n_shared_experts") is None:
        out["n_shared_experts"] = 1
    if out.get("num_experts_per_tok") is None and out.get("experts_per_token") is not None:
        out["num_experts_per_tok"] = out["experts_per_token"]
    shared = out.get("shared_expert_intermediate_size")
    if shared is not None and out.get("n_shared_experts") is None:
        width = _int(out, "moe_intermediate_size", where, default=out.get("intermediate_size"))
        shared = _int(out, "shared_expert_intermediate_size", where, minimum=0)
        if shared % width:
            raise bad_value("shared_expert_intermediate_size", shared,
                            f"a multiple of moe_intermediate_size = {width} (whole shared experts)", where=where)
        out["n_shared_experts"] = shared // width
    return out


def _from_layer_types(config: Mapping[str, Any], n_layers: int, where: str) -> tuple[int, int]:
    types = config["layer_types"]
    if not isinstance(types, list) or len(types) != n_layers or any(t not in _LAYER_TYPES for t in types):
        shown = types if not isinstance(types, list) else f"a list of {len(types)} entries"
        raise bad_value("layer_types", shown, f"a list of num_hidden_layers = {n_layers} entries, each one of "
                        f"{', '.join(_LAYER_TYPES)}", where=where)
    kinds = {t for t in types if t in _WINDOWED}
    if len(kinds) > 1:
        raise InputError(f"{where}: layer_types mixes {' and '.join(sorted(kinds))}; sweepkit models one window "
                         f"kind per model")
    if not kinds:
        return 0, 0
    key = _WINDOWED[kinds.pop()]
    return _int(config, key, where), sum(t in _WINDOWED for t in types)


def _llama4_chunked_layers(config: Mapping[str, Any], n_layers: int, where: str) -> int:
    flags = config.get("no_rope_layers") or []
    if flags:
        if not isinstance(flags, list) or len(flags) != n_layers or any(f not in (0, 1) for f in flags):
            raise bad_value("no_rope_layers", flags, f"a list of num_hidden_layers = {n_layers} flags 0 or 1",
                            where=where)
        return sum(flags)
    interval = _int(config, "no_rope_layer_interval", where, default=4)
    return sum((i + 1) % interval != 0 for i in range(n_layers))


def window_fields(config: Mapping[str, Any], n_layers: int, where: str) -> dict[str, Any]:
    """Model fields of windowed attention: sliding_window (W), window_layers, attention_sinks.

    ``{}`` for a model whose every layer attends to the whole context and has no sinks.

    Example:
      gpt-oss-120b (36 layers alternating sliding/full, window 128): W = 128, 18 windowed layers.
    """
    out: dict[str, Any] = {}
    sinks = config.get("attention_sinks", config.get("model_type") == "gpt_oss")
    if not isinstance(sinks, bool):
        raise bad_value("attention_sinks", sinks, "true or false", where=where)
    if sinks:
        out["attention_sinks"] = True
    if config.get("layer_types") is not None:
        window, layers = _from_layer_types(config, n_layers, where)
    elif config.get("attention_chunk_size") is not None:
        window, layers = _int(config, "attention_chunk_size", where), _llama4_chunked_layers(config, n_layers, where)
    elif config.get("sliding_window") is None or config.get("use_sliding_window") is False:
        window, layers = 0, 0
    elif config.get("use_sliding_window") is True:
        first = _int(config, "max_window_layers", where, minimum=0, default=0)
        window, layers = _int(config, "sliding_window", where), max(0, n_layers - first)
    else:
        window, layers = _int(config, "sliding_window", where), n_layers
    if layers:
        out.update(sliding_window=window, window_layers=layers)
    return out


def mtp_layers(config: Mapping[str, Any], where: str) -> int:
    """Multi-token-prediction layers the checkpoint ships (``num_nextn_predict_layers``, Qwen3.5's
    ``mtp_num_hidden_layers``; 0 without)."""
    key = "num_nextn_predict_layers" if config.get("num_nextn_predict_layers") is not None else "mtp_num_hidden_layers"
    return _int(config, key, where, minimum=0, default=0)


_QUANT_METHODS = {"mxfp4": "fp4", "fp8": "fp8"}
_MODELOPT_ALGOS = {"nvfp4": "nvfp4", "fp8": "fp8"}
_KEPT_MODULES = ("modules_to_not_convert", "ignore", "exclude_modules")
"""Where a quantization_config lists the modules it leaves unquantised: transformers (mxfp4, fp8),
compressed-tensors (llm-compressor), NVIDIA ModelOpt."""


def native_weight_format(config: Mapping[str, Any], where: str) -> str:
    """The sweepkit format of the checkpoint's quantised weights (``quantization_config.quant_method``:
    mxfp4 -> fp4, fp8 -> fp8; ModelOpt's ``quant_algo``: NVFP4 -> nvfp4, FP8 -> fp8); "" for an unquantised
    (bf16) checkpoint or another method."""
    quant = config.get("quantization_config")
    if quant is None:
        return ""
    method = quant.get("quant_method") if isinstance(quant, dict) else None
    if not isinstance(method, str):
        raise bad_value("quantization_config", quant, "a table with a quant_method string", where=where)
    if method.casefold() == "modelopt":
        algo = quant.get("quant_algo")
        return _MODELOPT_ALGOS.get(algo.casefold(), "") if isinstance(algo, str) else ""
    return _QUANT_METHODS.get(method.casefold(), "")


def attention_weight_format(config: Mapping[str, Any], native: str, where: str) -> str:
    """The format a checkpoint keeps its attention projections and output head in whatever the weight format;
    "" if none (:attr:`sweepkit.catalogue.Model.kept_params`).

    An explicit ``attention_weight_format`` (a sweepkit format name) wins; otherwise a quantised checkpoint
    whose ``quantization_config`` leaves the attention modules unquantised (``self_attn`` in
    ``modules_to_not_convert``, ``ignore`` or ``exclude_modules``) keeps them in bf16: gpt-oss (MXFP4 experts
    beside bf16 attention, router, embeddings and ``lm_head``).
    """
    from sweepkit.catalogue.formats import format_names

    explicit = config.get("attention_weight_format")
    if explicit is not None:
        if explicit not in format_names():
            raise bad_value("attention_weight_format", explicit, format_names(), where=where)
        return explicit
    quant = config.get("quantization_config")
    if not (native and isinstance(quant, dict)):
        return ""
    kept = [m for key in _KEPT_MODULES if isinstance(quant.get(key), list) for m in quant[key]]
    return "bf16" if any(isinstance(m, str) and "self_attn" in m for m in kept) else ""


def expert_weight_format(config: Mapping[str, Any], native: str, moe: bool, where: str) -> str:
    """The format a MoE checkpoint keeps its routed experts in whatever the weight format of the rest; "" if none.

    An explicit ``expert_weight_format`` (a sweepkit format name) wins; otherwise a quantised MoE checkpoint
    whose ``quantization_config.modules_to_not_convert`` keeps attention unquantised (``self_attn``: gpt-oss,
    MXFP4 experts with bf16 attention, router and embeddings) has its experts in the native format.
    """
    from sweepkit.catalogue.formats import format_names

    explicit = config.get("expert_weight_format")
    if explicit is not None:
        if not moe or explicit not in format_names():
            allowed = format_names() if moe else "absent (the model has no routed experts)"
            raise bad_value("expert_weight_format", explicit, allowed, where=where)
        return explicit
    quant = config.get("quantization_config")
    kept = quant.get("modules_to_not_convert") if isinstance(quant, dict) else None
    if not (moe and native and isinstance(kept, list)):
        return ""
    return native if any(isinstance(m, str) and "self_attn" in m for m in kept) else ""
