"""DeepSeek-V3.2 in the catalogue and DeepSeek Sparse Attention fields of any HF config.json.

Card: DeepSeek-V3.2 keeps DeepSeek-V3's shapes (huggingface.co/deepseek-ai/DeepSeek-V3.2, "the same
architecture as DeepSeek-V3.2-Exp", V3.1-Terminus plus DSA) and its 671 B total / 37 B activated (arXiv
2412.19437, abstract); its config.json adds ``index_n_heads`` 64, ``index_head_dim`` 128, ``index_topk`` 2048.
The indexer of each layer (DeepSeek-V3.2-Exp inference/model.py ``Indexer``: wq_b, wk, weights_proj) adds
1,536 x 8,192 + 7,168 x 128 + 7,168 x 64 = 13,959,168 parameters, 0.85 B over 61 layers.
"""

import json

import pytest

from sweepkit.catalogue import get_draft, get_model, load_hf_config, model_from_hf_config
from sweepkit.catalogue.model_registry import load_models
from sweepkit.errors import InputError

V3_FIELDS = {k: v for k, v in json.loads(json.dumps(
    {"hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
     "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
     "num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512,
     "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
     "tie_word_embeddings": False, "num_nextn_predict_layers": 1, "n_group": 8, "topk_group": 4,
     "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}})).items()}
DSA = {"index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048}


def test_counts_against_the_card():
    m, v3 = get_model("deepseek-v3.2"), get_model("deepseek-v3")
    assert m.indexer_params == 1_536 * 8_192 + 7_168 * 128 + 7_168 * 64 == 13_959_168
    assert m.resident_params - v3.resident_params == 61 * 13_959_168
    assert m.active_params - v3.active_params == 61 * 13_959_168
    assert m.resident_params == pytest.approx(671e9, rel=0.01)                  # 671.88 B, +0.13 %
    # active without the input embedding (the convention of Kimi-K2's card): 37.48 B, within the card's printed
    # precision of 37 B (half a unit: 0.5 B); DeepSeek-V3 counts 36.62 B the same way
    assert abs(m.active_params - m.embedding_params - 37e9) <= 0.5e9
    assert (m.official_params, m.official_active_params) == (671e9, 37e9)


def test_hf_ids_resolve_and_the_fields_are_v3_plus_the_indexer():
    for name in ("deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2-Exp", "DeepSeek-V3.2"):
        assert get_model(name).name == "deepseek-v3.2"
    m, v3 = get_model("deepseek-v3.2"), get_model("deepseek-v3")
    assert (m.index_topk, m.index_n_heads, m.index_head_dim, m.indexer_layers) == (2048, 64, 128, 61)
    assert m.is_dsa and not v3.is_dsa and v3.index_kv_bytes_per_token == 0
    same = {k for k in v3.__dict__ if k not in ("name", "source")}
    assert all(getattr(m, k) == getattr(v3, k) for k in same if not k.startswith("index"))
    assert m.index_kv_bytes_per_token == 61 * 132
    # FlashMLA's FP8 sparse layout: 4 FP32 scales per 512 latents and a bf16 RoPE key, 656 B against 576
    assert (m.fp8_latent_overhead_bytes, v3.fp8_latent_overhead_bytes) == (61 * (16 + 64), 0)


def test_mtp_layer_has_its_own_indexer():
    mtp = get_draft("mtp", get_model("deepseek-v3.2"))
    assert (mtp.model.n_layers, mtp.model.indexer_layers, mtp.model.index_topk) == (1, 1, 2048)
    assert mtp.resident_params == get_model("deepseek-v3.2").params_per_layer
    assert get_model("deepseek-v3.2").params_per_layer - get_model("deepseek-v3").params_per_layer == 13_959_168


def test_a_users_config_json_with_index_fields_loads_like_the_catalogue(tmp_path):
    path = tmp_path / "DeepSeek-V3.2" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
                                **V3_FIELDS, **DSA}))
    mine, ref = load_hf_config(path), load_models()["deepseek-v3.2"]
    ignored = {"name", "source", "official_params", "official_active_params"}
    assert {k: v for k, v in mine.__dict__.items() if k not in ignored} == \
        {k: v for k, v in ref.__dict__.items() if k not in ignored}


def test_indexer_types_count_the_layers_with_their_own_indexer():
    # GLM-5-style configs reuse an indexer on "shared" layers: 4 layers, 2 of them own one
    base = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 128,
            "vocab_size": 100, "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 8, "v_head_dim": 8, "index_n_heads": 2, "index_head_dim": 16, "index_topk": 8}
    shared = model_from_hf_config({**base, "indexer_types": ["full", "shared", "full", "shared"],
                                   "index_topk_freq": 2})
    every = model_from_hf_config(base)
    assert model_from_hf_config({**base, "index_topk_freq": None}).indexer_layers == 4     # null: absent
    assert (shared.indexer_layers, every.indexer_layers) == (2, 4)
    assert shared.indexer_params == 32 * 2 * 16 + 64 * 16 + 64 * 2
    assert every.resident_params - shared.resident_params == 2 * shared.indexer_params
    assert shared.index_kv_bytes_per_token == 2 * (16 + 4)
    gqa = model_from_hf_config({k: v for k, v in base.items() if not k.startswith(("kv_", "q_", "qk_", "v_"))})
    assert gqa.indexer_params == 64 * 2 * 16 + 64 * 16 + 64 * 2                # queries from the hidden state
    assert gqa.fp8_latent_overhead_bytes == 0 and shared.fp8_latent_overhead_bytes == 4 * (4 + 8)


def _small(**extra) -> dict:
    return {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 128,
            "vocab_size": 100, **extra}


@pytest.mark.parametrize("extra, message", [
    (dict(index_topk=2048), "index_n_heads = None is not allowed; expected an integer >= 1"),
    (dict(index_topk=0, index_n_heads=2, index_head_dim=16), "index_topk = 0 is not allowed; expected an integer >= 1"),
    (dict(index_topk=8, index_n_heads=2, index_head_dim="128"), "index_head_dim = '128' is not allowed"),
    (dict(index_topk=8, index_n_heads=2, index_head_dim=16, index_topk_freq=4),
     "index_topk_freq = 4 is not allowed; expected 1, or indexer_types"),
    (dict(index_topk=8, index_n_heads=2, index_head_dim=16, indexer_types=["full", "shared"]),
     "indexer_types = 'a list of 2 entries' is not allowed; expected a list of num_hidden_layers = 4 entries"),
    (dict(index_topk=8, index_n_heads=2, index_head_dim=16, indexer_types=["shared", "full", "full", "full"]),
     "indexer_types = 'shared' is not allowed; expected 'full' first"),
    (dict(indexer_types=["full"] * 4), "indexer_types = .* is not allowed; expected absent in a config without"),
    (dict(index_topk=8, index_n_heads=2, index_head_dim=16, indexer_types=["full", "dense", "full", "full"]),
     r"indexer_types\[1\] = 'dense' is not allowed; expected one of full, shared"),
    (dict(index_topk=8, index_n_heads=2, index_head_dim=16, index_topk_freq=0),
     "index_topk_freq = 0 is not allowed; expected an integer >= 1"),
    (dict(index_topk=8, index_n_heads=2, index_head_dim=16, sliding_window=32),
     "index_topk = 8 on a model with 4 windowed layers"),
])
def test_bad_dsa_configs_are_one_line(tmp_path, extra, message):
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_small(**extra)))
    with pytest.raises(InputError, match=message) as err:
        load_hf_config(path)
    text = str(err.value)
    assert text.startswith(str(path)) and "\n" not in text
