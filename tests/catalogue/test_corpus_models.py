"""Models and the accelerator of the measured corpus: GPT-J-6B, Falcon-180B, Yi-34B, MiniMax-M2.5, GLM-5.2, Kimi-K2.6
and the Ascend 910B, against closed forms and the published counts.

Published figures (tolerance: 1% or half a unit of the last printed digit, as tests/catalogue/test_modern_models.py):

- GPT-J-6B: 6,053,381,344 parameters, 28 layers, d_model 4,096, d_ff 16,384, 16 heads of 256
  (huggingface.co/EleutherAI/gpt-j-6b model card); sweepkit leaves out the biases and LayerNorms (0.06%);
- Falcon-180B: 180B (huggingface.co/tiiuae/falcon-180B; Almazrouei et al., arXiv 2311.16867);
- Yi-34B: 34B (arXiv 2403.04652 Table 1), 34.4B HF safetensors total;
- MiniMax-M2.5: 230B total, 10B activated (huggingface.co/MiniMaxAI/MiniMax-M2.5; the M2 shapes);
- GLM-5.2: 744B total, 40B active (GLM-5 model card, github.com/zai-org/GLM-5); huggingface.co reports 753B for
  the checkpoint, which holds the MTP layer beside the 78 layers;
- Kimi-K2.6: 1T / 32B, Kimi-K2's language model (61 layers, 384 + 1 experts, MLA) plus a 0.4B MoonViT encoder.
"""


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.scripts import load_script
from sweepkit.catalogue import device_key, get_device, get_model, model_from_hf_config, model_key
from sweepkit.errors import InputError


def card(text: str) -> tuple[float, float]:
    """'230B' -> (230e9, tolerance): 1% or half a unit of the last printed digit, whichever is wider."""
    number = text[:-1]
    decimals = len(number.split(".")[1]) if "." in number else 0
    value = float(number) * 1e9
    return value, max(0.01 * value, 0.5 * 10.0 ** -decimals * 1e9)


def test_gpt_j_closed_form_and_card():
    # Ungated GELU MLP: 4 D^2 attention + 2 D (4 D) MLP = 12 D^2 per layer; untied embedding and LM head.
    m, d = get_model("gpt-j-6b"), 4096
    assert (m.gated_mlp, m.n_layers, m.head_dim, m.d_ff, m.n_kv_heads) == (False, 28, 256, 16_384, 16)
    assert m.params_per_layer == 12 * d * d == 201_326_592
    assert m.resident_params == 28 * 12 * d * d + 2 * 50_400 * d == 6_050_021_376
    assert m.resident_params == pytest.approx(6_053_381_344, rel=1e-3)      # the card less biases and norms
    assert m.kv_bytes_per_token(2.0) == 2 * 28 * 16 * 256 * 2 == 458_752


def test_falcon_180b_multigroup_attention_and_card():
    # new_decoder_architecture: fused QKV of (H + 2 H_kv) d_h = (232 + 16) x 64; dense D x D; GELU MLP 2 D (4 D).
    m, d = get_model("falcon-180b"), 14_848
    assert (m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff, m.gated_mlp, m.tied_embeddings) == \
        (232, 8, 64, 4 * d, False, True)
    assert m.params_per_layer == d * (232 + 16) * 64 + d * d + 8 * d * d == 2_219_835_392
    value, tol = card("180B")
    assert abs(m.resident_params - value) <= tol and m.official_params == value
    assert m.kv_bytes_per_token(2.0) == 2 * 80 * 8 * 64 * 2 == 163_840


def test_yi_34b_counts_and_kv():
    m = get_model("yi-34b")
    value, tol = card("34B")
    assert abs(m.resident_params - value) <= tol
    assert m.resident_params == pytest.approx(34.4e9, rel=2e-3)             # HF safetensors total
    assert m.kv_bytes_per_token(2.0) == 2 * 60 * 8 * 128 * 2 == 245_760


def test_minimax_m25_counts_layout_and_kv():
    m = get_model("minimax-m2.5")
    assert (m.n_experts, m.experts_per_token, m.n_shared_experts, m.moe_d_ff, m.n_dense_layers) == (256, 8, 0, 1536, 0)
    assert m.window_layers == 0 and m.native_weight_format == "fp8"
    value, tol = card("230B")
    assert abs(m.resident_params - value) <= tol
    value, tol = card("10B")
    assert abs(m.active_params - 2 * m.embedding_params - value) <= tol   # the card's active count has no embeddings
    # GQA 8 KV heads of 128 on all 62 layers: 248 KiB per token in bf16.
    assert m.kv_bytes_per_token(2.0) == 2 * 62 * 8 * 128 * 2 == 253_952


def test_glm_52_sparse_attention_with_shared_indexers():
    m = get_model("glm-5.2")
    assert (m.is_mla, m.is_dsa, m.index_topk, m.index_n_heads, m.index_head_dim) == (True, True, 2048, 32, 128)
    # indexer_types: own indexers on layers 0, 1, 2 and every fourth from 6 (IndexShare): 3 + 18 = 21 of 78.
    assert (m.indexer_layers, m.n_dense_layers, m.n_experts, m.n_shared_experts, m.mtp_layers) == (21, 3, 256, 1, 1)
    assert m.indexer_params == 2048 * 32 * 128 + 6144 * 128 + 6144 * 32 == 9_371_648
    value, tol = card("744B")
    assert abs(m.resident_params - value) <= tol
    assert m.resident_params + m.params_per_layer == pytest.approx(753e9, rel=1e-3)   # HF's count with the MTP layer
    value, tol = card("40B")
    assert abs(m.active_params - m.embedding_params - value) <= tol       # active with the LM head
    # bf16 latents 78 x (512 + 64) x 2 B + FP8 indexer keys on the 21 indexer layers, 21 x (128 + 4) B.
    assert m.kv_bytes_per_token(2.0) == 78 * 576 * 2 + 21 * 132 == 92_628


def test_kimi_k26_is_priced_with_kimi_k2_shapes():
    assert model_key("moonshotai/Kimi-K2.6") == "kimi-k2"
    m = get_model("moonshotai/Kimi-K2.6")
    assert (m.n_layers, m.n_experts, m.n_shared_experts, m.kv_lora_rank, m.vocab) == (61, 384, 1, 512, 163_840)


@pytest.mark.parametrize("hf_id, key", [
    ("tiiuae/falcon-180B", "falcon-180b"), ("EleutherAI/gpt-j-6b", "gpt-j-6b"), ("01-ai/Yi-34B", "yi-34b"),
    ("MiniMaxAI/MiniMax-M2.5", "minimax-m2.5"), ("zai-org/GLM-5.2-FP8", "glm-5.2"), ("zai-org/GLM-5.2", "glm-5.2"),
    ("moonshotai/Kimi-K2.6", "kimi-k2"), ("moonshotai/Kimi-K2.5", "kimi-k2"),
])
def test_the_corpus_hf_ids_resolve(hf_id, key):
    assert model_key(hf_id) == key


BASE = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 128,
        "vocab_size": 100}


def test_gated_mlp_counts_two_or_three_matrices():
    gated, plain = model_from_hf_config(BASE), model_from_hf_config({**BASE, "gated_mlp": False})
    assert gated.params_per_layer - plain.params_per_layer == 64 * 128        # one D x F matrix fewer
    assert plain.dense_mlp_params == 2 * 64 * 128 and gated.dense_mlp_params == 3 * 64 * 128


@settings(max_examples=40, deadline=None)
@given(d=st.integers(1, 512), f=st.integers(1, 2048), layers=st.integers(1, 64), heads=st.sampled_from([1, 2, 4]),
       vocab=st.integers(1, 5000))
def test_an_ungated_mlp_holds_one_d_by_f_matrix_fewer_per_layer(d, f, layers, heads, vocab):
    cfg = {"hidden_size": d * heads, "num_hidden_layers": layers, "num_attention_heads": heads,
           "intermediate_size": f, "vocab_size": vocab}
    gated, plain = model_from_hf_config(cfg), model_from_hf_config({**cfg, "gated_mlp": False})
    assert gated.resident_params - plain.resident_params == layers * d * heads * f
    assert gated.matmul_params - plain.matmul_params == layers * d * heads * f
    assert gated.kv_bytes_per_token(2.0) == plain.kv_bytes_per_token(2.0)


def test_falcon_spellings():
    falcon = {"model_type": "falcon", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "vocab_size": 100}
    assert model_from_hf_config({**falcon, "multi_query": True}).n_kv_heads == 1         # Falcon-7B: MQA
    assert model_from_hf_config({**falcon, "multi_query": False}).n_kv_heads == 4        # MHA
    grouped = model_from_hf_config({**falcon, "new_decoder_architecture": True, "num_kv_heads": 2,
                                    "ffn_hidden_size": 96})
    assert (grouped.n_kv_heads, grouped.d_ff, grouped.gated_mlp, grouped.tied_embeddings) == (2, 96, False, True)
    assert model_from_hf_config({**falcon, "tie_word_embeddings": False}).tied_embeddings is False


MINIMAX = {**BASE, "num_local_experts": 4, "num_experts_per_tok": 2, "shared_intermediate_size": 0}


@pytest.mark.parametrize("extra, message", [
    (dict(gated_mlp="yes"), "gated_mlp = 'yes' is not allowed; expected true or false"),
    (dict(MINIMAX, attn_type_list=[0, 0, 0, 1]),
     "attn_type_list has 3 lightning-attention layers .* sweepkit prices softmax attention with a KV cache only"),
    (dict(MINIMAX, attn_type_list=[1, 1, 2, 1]), "attn_type_list = .* is not allowed; expected a list of "
                                                 "num_hidden_layers = 4 entries, each 1"),
    (dict(MINIMAX, attn_type_list=[1, 1]), "attn_type_list = 'a list of 2 entries' is not allowed"),
    (dict(n_routed_experts=4, num_experts_per_tok=2, first_k_dense_replace=1,
          mlp_layer_types=["dense", "dense", "sparse", "sparse"]),
     "mlp_layer_types .2 dense layers. disagrees with first_k_dense_replace = 1"),
    (dict(n_routed_experts=4, num_experts_per_tok=2, mlp_layer_types=["dense", "moe", "sparse", "sparse"]),
     "mlp_layer_types = .* is not allowed; expected a list of num_hidden_layers = 4 entries, each one of dense"),
    (dict(model_type="falcon", new_decoder_architecture="true"), "new_decoder_architecture = 'true' is not allowed"),
])
def test_bad_values_are_one_line_errors_naming_the_file(extra, message):
    with pytest.raises(InputError, match=message) as err:
        model_from_hf_config({**BASE, **extra}, where="x/config.json")
    assert str(err.value).startswith("x/config.json") and "\n" not in str(err.value)


def test_minimax_all_softmax_layers_load_and_mlp_layer_types_count_dense_layers():
    assert model_from_hf_config({**MINIMAX, "attn_type_list": [1] * 4}).n_shared_experts == 0
    glm = model_from_hf_config({**BASE, "n_routed_experts": 4, "num_experts_per_tok": 2,
                                "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]})
    assert glm.n_dense_layers == 1


def test_ascend_910b_figures_and_formats():
    d = get_device("Ascend-910B")
    got = (d.peak_flops_per_s / 1e12, d.hbm_bytes_per_s / 1e12, d.hbm_capacity_bytes / 1e9, d.tdp_w,
           d.link_bytes_per_s / 1e9, d.scaleup_domain_gpus, d.scaleout_bytes_per_s * 8 / 1e9)
    # 313 TF FP16 (910B3), 64 GB HBM2e at 1.6 TB/s, 400 W, HCCS 392 GB/s = 196 GB/s each way, 8 NPUs, 200GE.
    assert got == pytest.approx((313, 1.6, 64, 400, 196, 8, 200))
    assert d.speedup("int8") == 2.0 and d.speedup("fp8") == 1.0 and d.speedup("fp4") == 1.0   # no FP8 / FP4 units
    assert device_key("Ascend 910B NPU") == device_key("Huawei Ascend 910B") == "Ascend-910B"


def test_the_corpus_builder_maps_the_gpustack_device_name():
    build = load_script("benchmarks/data/build_measured.py")
    assert build.device("Ascend 910B NPU") == "Ascend-910B" and build.compute("int8", "Ascend-910B") == "int8"
    assert build.compute("fp8", "Ascend-910B") == "bf16"                        # no FP8 on the 910B


def test_corpus_rows_are_modelled():
    from sweepkit.validation.measurements import parse_measurements

    head = "source,url,framework,device,tp,gpus,model,weight_format,batch,context_tokens,metric,value,unit,split\n"
    rows = "".join(f"t,https://example.org,vLLM,{dev},1,,{model},bf16,1,512,step_time,5,ms,test\n" for dev, model in [
        ("Ascend 910B NPU", "Qwen/Qwen3-8B"), ("H100", "tiiuae/falcon-180B"), ("H100", "EleutherAI/gpt-j-6b"),
        ("A100", "01-ai/Yi-34B"), ("MI355X", "MiniMaxAI/MiniMax-M2.5"), ("H200", "zai-org/GLM-5.2-FP8"),
        ("GB200", "moonshotai/Kimi-K2.6")])
    ms = parse_measurements(head + rows, "m.csv")
    assert [m.unknown for m in ms] == [""] * 7
