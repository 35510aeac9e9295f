"""GPT-J, Falcon and MiniMax spellings of a HF ``config.json``: field names, the MLP kind, the attention layout.

Mapped to the Llama/DeepSeek names :func:`sweepkit.catalogue.model_registry.model_from_hf_config` reads:

- GPT-J (``model_type`` gptj): ``n_embd`` D, ``n_layer`` L, ``n_head`` H, ``n_inner`` F (null: 4 D); an ungated
  GELU MLP (fc_in, fc_out); attention and MLP in parallel from one LayerNorm and rotary embedding on
  ``rotary_dim`` of the d_h = D / H dimensions, neither of which changes a pass's FLOPs or bytes;
- Falcon (``model_type`` falcon): ``num_kv_heads`` H_kv under ``new_decoder_architecture`` (multi-group
  attention: the fused query_key_value projection is (H + 2 H_kv) d_h wide, the GQA layout), one KV head
  under ``multi_query`` otherwise, H without either; ``ffn_hidden_size`` F (absent: 4 D); an ungated GELU MLP
  (dense_h_to_4h, dense_4h_to_h); the LM head tied to the word embedding unless ``tie_word_embeddings`` says
  otherwise (transformers ``FalconForCausalLM``); an ALiBi model (``alibi`` true) is priced like a RoPE one
  (ALiBi adds no weights and no cached values); under ``new_decoder_architecture`` or ``parallel_attn``
  (transformers' default: true) attention and MLP read the same input and their outputs are summed before ONE
  tensor-parallel all-reduce per layer (``shared_allreduce``; TensorRT-LLM ``FalconDecoderLayer`` builds both
  without a TP group and all-reduces their sum, vLLM ``FalconAttention`` / ``FalconMLP`` skip the row-parallel
  reduction, ``reduce_row_parallel_results``), where a sequential block all-reduces after each;
- MiniMax (``attn_type_list``): one entry per layer, 1 for softmax attention, 0 for lightning (linear)
  attention. Every MiniMax-M2 layer is 1 (full GQA attention); a model with lightning layers (MiniMax-01,
  MiniMax-M1) is refused: its linear-attention layers keep a fixed-size state instead of a KV cache, which the
  cost model does not express. ``shared_intermediate_size`` is the shared expert width (0: none).

``gated_mlp`` (true / false) is read from any config: true (the default) for a gated MLP of gate, up and down
projections (3 D F parameters), false for up and down only (2 D F); GPT-J and Falcon default to false.
``shared_allreduce`` (true / false) is read from any config, by default false but for the Falcon blocks above:
GPT-J's parallel block still all-reduces attention and MLP outputs separately in both engines (TensorRT-LLM
``GPTJDecoderLayer`` builds both with the TP group, vLLM ``GPTJAttention.out_proj`` and ``GPTJMLP.fc_out`` reduce
their results).

References:
  Wang and Komatsuzaki, GPT-J-6B (github.com/kingoflolz/mesh-transformer-jax; huggingface.co/EleutherAI/gpt-j-6b
  model card: 6,053,381,344 parameters, d_ff 16,384, rotary dimension 64 of 256);
  Almazrouei et al., "The Falcon Series of Open Language Models", arXiv 2311.16867, sec. 4 (multigroup
  attention, parallel attention and MLP, GELU MLP of 4 D); huggingface.co/tiiuae/falcon-180B config.json;
  github.com/NVIDIA/TensorRT-LLM tensorrt_llm/models/falcon/model.py (v0.9: ``is_parallel_attention``, one
  ``allreduce`` of the MLP + attention sum) and tensorrt_llm/models/gptj/model.py; github.com/vllm-project/vllm
  vllm/model_executor/models/falcon.py (``reduce_row_parallel_results``, one ``tensor_model_parallel_all_reduce``)
  and gpt_j.py; transformers ``FalconConfig`` (``parallel_attn`` defaults to true);
  MiniMax, huggingface.co/MiniMaxAI/MiniMax-M2.5 config.json (attn_type_list of 62 ones) and MiniMax-01,
  arXiv 2501.08313 (lightning attention, attn_type_list 0).
"""

from __future__ import annotations

from typing import Any, Mapping

from sweepkit.errors import InputError, bad_value

_UNGATED = ("gptj", "falcon")
_GPTJ = {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
         "n_inner": "intermediate_size"}


def _bool(config: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise bad_value(key, value, "true or false", where=where)
    return value


def _gptj(out: dict[str, Any]) -> None:
    for old, new in _GPTJ.items():
        if new not in out and out.get(old) is not None:
            out[new] = out[old]
    if "intermediate_size" not in out and isinstance(out.get("hidden_size"), int):
        out["intermediate_size"] = 4 * out["hidden_size"]


def _falcon(out: dict[str, Any], where: str) -> None:
    heads = out.get("num_attention_heads")
    if "num_key_value_heads" not in out:
        if _bool(out, "new_decoder_architecture", False, where):
            if out.get("num_kv_heads") is not None:
                out["num_key_value_heads"] = out["num_kv_heads"]
        elif _bool(out, "multi_query", True, where):
            out["num_key_value_heads"] = 1
        elif heads is not None:
            out["num_key_value_heads"] = heads
    if "intermediate_size" not in out:
        width = out.get("ffn_hidden_size")
        out["intermediate_size"] = width if width is not None else (
            4 * out["hidden_size"] if isinstance(out.get("hidden_size"), int) else None)
    out.setdefault("tie_word_embeddings", True)


def _minimax_layers(out: dict[str, Any], where: str) -> None:
    types = out["attn_type_list"]
    layers = out.get("num_hidden_layers")
    if not isinstance(types, list) or any(t not in (0, 1) or isinstance(t, bool) for t in types) \
            or (isinstance(layers, int) and len(types) != layers):
        shown = types if not isinstance(types, list) else f"a list of {len(types)} entries"
        raise bad_value("attn_type_list", shown, f"a list of num_hidden_layers = {layers} entries, each 1 "
                        "(softmax attention) or 0 (lightning attention)", where=where)
    linear = types.count(0)
    if linear:
        raise InputError(f"{where}: attn_type_list has {linear} lightning-attention layers (entries 0) of "
                         f"{len(types)}; sweepkit prices softmax attention with a KV cache only (every entry 1, "
                         "as in MiniMax-M2)")
    if out.get("shared_intermediate_size") is not None and out.get("shared_expert_intermediate_size") is None:
        out["shared_expert_intermediate_size"] = out["shared_intermediate_size"]


def family_config(config: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The config with GPT-J, Falcon and MiniMax spellings mapped, and ``gated_mlp`` and ``shared_allreduce`` set.

    Args:
      config: the fields of a HF ``config.json`` (or a models.toml entry).  where: label for messages.

    Returns:
      A new dict; ``gated_mlp`` is a bool in it (False for GPT-J and Falcon unless the config says otherwise),
      and so is ``shared_allreduce`` (True for a Falcon block with parallel attention, else False).

    Raises:
      InputError: a non-boolean ``gated_mlp`` / ``shared_allreduce`` / ``new_decoder_architecture`` /
        ``multi_query`` / ``parallel_attn``, a malformed ``attn_type_list`` or one with lightning-attention layers.

    Example:
      tiiuae/falcon-180B (hidden_size 14,848, num_kv_heads 8, new_decoder_architecture true): H_kv = 8,
      intermediate_size = 59,392, gated_mlp false, tie_word_embeddings true, shared_allreduce true.
    """
    out = dict(config)
    family = out.get("model_type")
    if family == "gptj":
        _gptj(out)
    elif family == "falcon":
        _falcon(out, where)
    if out.get("attn_type_list") is not None:
        _minimax_layers(out, where)
    out["gated_mlp"] = _bool(out, "gated_mlp", family not in _UNGATED, where)
    # both engines all-reduce the sum of a parallel Falcon block's attention and MLP once (module docstring)
    parallel = family == "falcon" and (_bool(out, "new_decoder_architecture", False, where)
                                       or _bool(out, "parallel_attn", True, where))
    out["shared_allreduce"] = _bool(out, "shared_allreduce", parallel, where)
    return out
