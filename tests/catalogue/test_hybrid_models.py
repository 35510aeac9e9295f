"""Hybrid linear-attention models (Qwen3-Next, Qwen3.5): config fields, closed-form counts, state, config errors.

Shapes: HF Qwen/Qwen3.5-35B-A3B (text_config), Qwen/Qwen3.5-9B, Qwen/Qwen3.5-397B-A17B and
Qwen/Qwen3-Next-80B-A3B-Instruct config.json. Gated DeltaNet weights: HF transformers ``Qwen3NextGatedDeltaNet``
(in_proj_qkvz, in_proj_ba, conv1d, A_log, dt_bias, out_proj); the gated attention's q_proj yields the query and
an output gate, D x 2 H d_h.
"""

import copy

import pytest

from sweepkit.catalogue import get_draft, get_model, model_from_hf_config
from sweepkit.errors import InputError

QWEN35 = {"hidden_size": 2048, "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 2,
          "head_dim": 256, "intermediate_size": 4096, "vocab_size": 1000, "full_attention_interval": 4,
          "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
          "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "attn_output_gate": True,
          "mamba_ssm_dtype": "float32"}


def test_fields_of_the_catalogue_entries():
    m = get_model("Qwen/Qwen3.5-35B-A3B")
    assert (m.linear_layers, m.attention_layers, m.linear_key_heads, m.linear_value_heads) == (30, 10, 16, 32)
    assert (m.linear_key_dim, m.linear_value_dim, m.linear_conv_kernel, m.linear_state_bytes) == (128, 128, 4, 4)
    assert m.attention_output_gate and m.is_hybrid and m.mtp_layers == 1
    assert (get_model("qwen3.5-9b").linear_layers, get_model("qwen3.5-397b-a17b").linear_layers) == (24, 45)
    nxt = get_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert (nxt.linear_layers, nxt.linear_state_bytes) == (36, 2)     # no mamba_ssm_dtype: the model's bf16
    assert get_model("Qwen/Qwen3.5-397B-A17B (nvidia NVFP4)").name == "qwen3.5-397b-a17b"
    assert not get_model("qwen3-30b-a3b").is_hybrid and get_model("qwen3-30b-a3b").attention_layers == 48


def test_qwen35_35b_counts_in_closed_form():
    m = get_model("qwen3.5-35b-a3b")
    d = 2048
    linear = d * (2 * 16 * 128 + 2 * 32 * 128) + 2 * d * 32 + 4 * (2 * 16 * 128 + 32 * 128) + 2 * 32 + 32 * 128 * d
    attention = d * 2 * 16 * 256 + 2 * d * 2 * 256 + 16 * 256 * d
    assert (m.linear_params, linear) == (33_718_336, 33_718_336)
    assert (m.attention_params, attention) == (27_262_976, 27_262_976)
    moe = (256 + 1) * 3 * d * 512 + 256 * d                            # routed + shared experts, router
    assert m.resident_params == 30 * linear + 10 * attention + 40 * moe + 2 * 248_320 * d
    active = 30 * linear + 10 * attention + 40 * ((8 + 1) * 3 * d * 512 + 256 * d) + 2 * 248_320 * d
    assert m.active_params == active


def test_kv_state_and_flops_of_one_sequence():
    # 35B-A3B: KV only on the 10 full-attention layers, 2 x 10 x 2 x 256 values per token (bf16: 20,480 B);
    # state per linear layer 32 x 128 x 128 x 4 B + (4 - 1) x 8,192 x 2 B = 2,146,304 B; FLOPs per token and
    # layer 7 x 32 x 128 x 128 + 2 x 4 x 8,192 = 3,735,552.
    m = get_model("qwen3.5-35b-a3b")
    assert (m.kv_values_per_token, m.kv_bytes_per_token(2.0)) == (10_240, 20_480.0)
    assert m.linear_state_bytes_per_sequence == 30 * 2_146_304 == 64_389_120
    assert m.linear_flops_per_token == 30 * 3_735_552
    # 9B (24 linear of 32 layers, H_kv 4): 2 x 8 x 4 x 256 = 16,384 values per token
    assert get_model("qwen3.5-9b").kv_values_per_token == 16_384


def test_the_mtp_draft_of_a_hybrid_is_a_full_attention_layer():
    # The last layer of a 3:1 stack attends over the whole context, as Qwen3.5's MTP layer does.
    target = get_model("qwen3.5-35b-a3b")
    mtp = get_draft("mtp", target).model
    assert (mtp.linear_layers, mtp.attention_layers, mtp.kv_values_per_token) == (0, 1, 1024)
    assert mtp.linear_state_bytes_per_sequence == 0


def test_layer_types_and_the_interval_agree():
    by_interval = model_from_hf_config(QWEN35)
    types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(8)]
    by_types = model_from_hf_config({**{k: v for k, v in QWEN35.items() if k != "full_attention_interval"},
                                     "layer_types": types})
    assert by_interval.linear_layers == by_types.linear_layers == 6
    assert by_interval == by_types


def test_linear_fields_without_linear_layers_price_as_full_attention():
    types = ["full_attention"] * 8
    plain = {k: v for k, v in QWEN35.items() if not k.startswith("linear_") and k not in
             ("full_attention_interval", "mamba_ssm_dtype")}
    m = model_from_hf_config({**plain, "layer_types": types, **{k: QWEN35[k] for k in QWEN35 if
                                                               k.startswith("linear_")}})
    assert (m.linear_layers, m.is_hybrid, m.attention_layers) == (0, False, 8)
    ref = model_from_hf_config(plain)
    assert (m.resident_params, m.kv_values_per_token) == (ref.resident_params, ref.kv_values_per_token)


def _bad(**changes):
    config = copy.deepcopy(QWEN35)
    for k, v in changes.items():
        if v is None:
            config.pop(k)
        else:
            config[k] = v
    return config


@pytest.mark.parametrize("changes, words", [
    (dict(linear_num_value_heads=None), "linear_num_value_heads"),
    (dict(linear_key_head_dim=0), "linear_key_head_dim"),
    (dict(linear_conv_kernel_dim=True), "linear_conv_kernel_dim"),
    (dict(linear_num_value_heads=24), "a multiple of linear_num_key_heads = 16"),
    (dict(full_attention_interval=None), "layer_types or full_attention_interval"),
    (dict(full_attention_interval=9), "at least one full-attention layer"),
    (dict(full_attention_interval=0), "full_attention_interval"),
    (dict(mamba_ssm_dtype="float8"), "mamba_ssm_dtype"),
    (dict(attn_output_gate="yes"), "attn_output_gate"),
    (dict(layer_types=["linear_attention"] * 8), "at least one full_attention layer"),
    (dict(layer_types=["linear_attention", "full_attention"] * 4), "full_attention_interval"),
    (dict(layer_types=["linear_attention"] * 7 + ["sliding_attention"], full_attention_interval=None,
          sliding_window=128), "window_layers"),
])
def test_bad_linear_fields_are_one_line_errors(changes, words):
    with pytest.raises(InputError) as err:
        model_from_hf_config(_bad(**changes), where="cfg.json")
    message = str(err.value)
    assert "\n" not in message and message.startswith("cfg.json") and words in message


def test_linear_layers_without_their_fields_are_an_error():
    plain = {k: v for k, v in QWEN35.items() if not k.startswith("linear_") and k != "full_attention_interval"}
    with pytest.raises(InputError, match="linear_num_key_heads"):
        model_from_hf_config({**plain, "layer_types": ["linear_attention"] * 7 + ["full_attention"]}, where="c")
    with pytest.raises(InputError, match="full_attention_interval"):
        model_from_hf_config({**plain, "full_attention_interval": 4}, where="c")
