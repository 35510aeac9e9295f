"""Models of public serving measurements: counts against the model cards, layouts, KV bytes, config.json copies.

Card figures (as printed; the tolerance is 1% or half a unit of the last printed digit, whichever is wider):

- gpt-oss-120b / -20b: arXiv 2508.10925 Table 1, 116.83B / 20.91B total, 5.13B / 3.61B active (active counts
  the unembedding, not the input embedding);
- Qwen3-235B-A22B: 235B / 22B; Qwen3-32B 32.8B, Qwen3-14B 14.8B, Qwen3-8B 8.2B (huggingface.co/Qwen model cards);
- Llama-4 Scout 109B / 17B, Maverick 400B / 17B (huggingface.co/meta-llama model cards; totals include the
  vision encoder, which sweepkit does not model: Scout's text-only 107.77B is 1.1% under the card);
- Kimi-K2: 1T / 32B (huggingface.co/moonshotai/Kimi-K2-Instruct, "Model Summary"; active without the input
  embedding);
- Mixtral-8x22B: 141B / 39B (mistral.ai/news/mixtral-8x22b); Mistral-7B-v0.1 7.24B (HF safetensors total);
- GLM-4.5-Air 106B / 12B, GLM-4.5 355B / 32B (huggingface.co/zai-org model cards; active without embeddings);
- Llama-2-7B 6.74B (HF safetensors total);
- Qwen3.5-35B-A3B 35B / 3B, Qwen3.5-9B 9B, Qwen3.5-397B-A17B 397B / 17B (huggingface.co/Qwen model cards; the
  totals include the vision encoder, which sweepkit does not model, and not the MTP layer: text-only 34.66B,
  8.95B, 396.35B); Qwen3-Next-80B-A3B 80B / 3B (active without embeddings: 3.25B).
"""

import json
import warnings
from pathlib import Path

import pytest

from sweepkit.catalogue import get_model, load_hf_config, model_from_hf_config
from sweepkit.errors import InputError
from sweepkit.evaluate import evaluate

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"

# name: (card total, card active or None, what the card's active count includes)
CARDS = {
    "gpt-oss-120b": ("116.83B", "5.13B", "unembedding"),
    "gpt-oss-20b": ("20.91B", "3.61B", "unembedding"),
    "qwen3-235b-a22b": ("235B", "22B", "both"),
    "qwen3-32b": ("32.8B", None, "both"),
    "qwen3-14b": ("14.8B", None, "both"),
    "qwen3-8b": ("8.2B", None, "both"),
    "llama-4-scout": ("109B", "17B", "both"),
    "llama-4-maverick": ("400B", "17B", "both"),
    "kimi-k2": ("1T", "32B", "unembedding"),
    "mixtral-8x22b": ("141B", "39B", "both"),
    "qwen3.5-35b-a3b": ("35B", "3B", "both"),
    "qwen3.5-9b": ("9B", None, "both"),
    "qwen3.5-397b-a17b": ("397B", "17B", "both"),
    "qwen3-next-80b-a3b": ("80B", "3B", "none"),
    "mistral-7b": ("7.24B", None, "both"),
    "glm-4.5-air": ("106B", "12B", "none"),
    "glm-4.5": ("355B", "32B", "none"),
    "llama-2-7b": ("6.74B", None, "both"),
}
SCALE = {"B": 1e9, "T": 1e12}


def card_value(text: str) -> tuple[float, float]:
    """'116.83B' -> (116.83e9, tolerance): 1% or half a unit of the last printed digit, whichever is wider."""
    number, unit = text[:-1], SCALE[text[-1]]
    decimals = len(number.split(".")[1]) if "." in number else 0
    value = float(number) * unit
    return value, max(0.01 * value, 0.5 * 10.0 ** -decimals * unit)


def test_card_value_reads_the_printed_precision():
    assert card_value("116.83B") == (116.83e9, pytest.approx(1.1683e9))
    assert card_value("1T") == (1e12, 0.5e12) and card_value("17B") == (17e9, 0.5e9)


@pytest.mark.parametrize("name", sorted(CARDS))
def test_totals_and_active_against_the_model_cards(name):
    total, active, counted = CARDS[name]
    model = get_model(name)
    value, tol = card_value(total)
    scout = name == "llama-4-scout"                       # the card's total includes the vision encoder
    assert abs(model.resident_params - value) <= (0.012 * value if scout else tol)
    assert model.official_params == pytest.approx(value)
    if active is not None:
        emb = model.embedding_params
        ours = {"both": model.active_params, "unembedding": model.active_params - emb,
                "none": model.active_params - 2 * emb}[counted]
        value, tol = card_value(active)
        assert abs(ours - value) <= tol and model.official_active_params == pytest.approx(value)


def test_gpt_oss_counts_match_the_card_table_closely():
    # arXiv 2508.10925 Table 1: 116.83B / 5.13B and 20.91B / 3.61B; sweepkit omits the expert biases (< 0.05%).
    big, small = get_model("gpt-oss-120b"), get_model("gpt-oss-20b")
    assert big.resident_params == pytest.approx(116.83e9, rel=1e-3)
    assert small.resident_params == pytest.approx(20.91e9, rel=1e-3)
    assert big.active_params - big.embedding_params == pytest.approx(5.13e9, rel=2e-3)
    assert small.active_params - small.embedding_params == pytest.approx(3.61e9, rel=2e-3)


@pytest.mark.parametrize("name, kv, window_kv", [
    ("gpt-oss-120b", 73_728, 36_864),        # 2 x 36 x 8 x 64 x 2 B; half the layers are windowed
    ("gpt-oss-20b", 49_152, 24_576),         # 2 x 24 x 8 x 64 x 2 B
    ("kimi-k2", 70_272, 0),                  # MLA: 61 x (512 + 64) x 2 B
    ("qwen3-235b-a22b", 192_512, 0),         # 2 x 94 x 4 x 128 x 2 B
    ("llama-4-maverick", 196_608, 147_456),  # 2 x 48 x 8 x 128 x 2 B; 36 chunked layers
    ("mistral-7b", 131_072, 131_072),        # every layer has the 4096 window
    ("glm-4.5-air", 188_416, 0),             # 2 x 46 x 8 x 128 x 2 B
])
def test_kv_bytes_per_token(name, kv, window_kv):
    model = get_model(name)
    assert model.kv_bytes_per_token(2.0) == kv and model.window_kv_bytes_per_token(2.0) == window_kv


def test_layouts_from_the_configs():
    scout, maverick = get_model("llama-4-scout"), get_model("llama-4-maverick")
    # Llama-4: every layer MoE in Scout, alternate layers in Maverick (interleave_moe_layer_step 1 / 2), one
    # shared expert of intermediate_size beside the routed ones, dense layers of intermediate_size_mlp.
    assert (scout.n_moe_layers, scout.n_shared_experts, scout.moe_d_ff) == (48, 1, 8192)
    assert (maverick.n_moe_layers, maverick.n_dense_layers, maverick.d_ff) == (24, 24, 16384)
    assert (scout.sliding_window, scout.window_layers) == (8192, 36)    # chunked on 3 of every 4 layers
    oss = get_model("gpt-oss-120b")
    assert (oss.sliding_window, oss.window_layers, oss.attention_sinks) == (128, 18, True)
    assert oss.native_weight_format == "fp4" and get_model("deepseek-v3").native_weight_format == "fp8"
    assert oss.expert_weight_format == "fp4" and get_model("deepseek-v3").expert_weight_format == ""
    kimi = get_model("kimi-k2")
    assert (kimi.is_mla, kimi.n_dense_layers, kimi.n_experts, kimi.n_shared_experts) == (True, 1, 384, 1)
    assert kimi.mtp_layers == 0
    assert get_model("deepseek-v3").mtp_layers == 1 and get_model("glm-4.5-air").mtp_layers == 1
    assert get_model("qwen3-32b").window_layers == 0                   # use_sliding_window = false


def test_mtp_draft_of_a_windowed_model_keeps_its_window_only_if_windowed():
    draft = get_model("gpt-oss-120b").with_layers(1)
    assert (draft.window_layers, draft.sliding_window, draft.mtp_layers) == (0, 0, 0)


FIELDS_IGNORED = {"name", "source", "official_params", "official_active_params"}


@pytest.mark.parametrize("folder", sorted(p.name for p in DATA.iterdir() if p.is_dir()))
def test_public_config_json_loads_like_the_catalogue(folder):
    mine = load_hf_config(DATA / folder / "config.json")
    ref = get_model(folder)
    assert mine.name == folder
    assert {k: v for k, v in mine.__dict__.items() if k not in FIELDS_IGNORED} == \
        {k: v for k, v in ref.__dict__.items() if k not in FIELDS_IGNORED}
    assert (mine.resident_params, mine.active_params) == (ref.resident_params, ref.active_params)


def test_a_config_json_path_works_in_evaluate():
    import sweepkit

    path = str(DATA / "gpt-oss-20b" / "config.json")
    mine = sweepkit.evaluate(device="GB200", model=path, batch=8, context=4096, weight_format="fp4")
    assert mine == sweepkit.evaluate(device="GB200", model="gpt-oss-20b", batch=8, context=4096, weight_format="fp4")


def _write(tmp_path, config: dict) -> Path:
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(config))
    return path


def _base(**extra) -> dict:
    return {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 128,
            "vocab_size": 100, **extra}


@pytest.mark.parametrize("extra, message", [
    (dict(num_local_experts=8, num_experts=16, num_experts_per_tok=2),
     "num_local_experts = 8, num_experts = 16 disagree"),
    (dict(n_routed_experts=8, num_experts_per_tok=2, n_group=3),
     "n_group = 3 is not allowed; expected a divisor of the expert count 8"),
    (dict(n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=5),
     "topk_group = 5 is not allowed; expected an integer in \\[1, n_group = 4\\]"),
    (dict(num_local_experts=8, num_experts_per_tok=1, moe_layers=[1, 9]),
     "moe_layers = \\[1, 9\\] is not allowed; expected a list of layer indices in \\[0, num_hidden_layers = 4\\)"),
    (dict(n_routed_experts=8, num_experts_per_tok=2, first_k_dense_replace=4),
     "first_k_dense_replace = 4 is not allowed"),
    (dict(num_local_experts=8, num_experts_per_tok=1, interleave_moe_layer_step=5),
     "interleave_moe_layer_step = 5, first_k_dense_replace = 0 and mlp_only_layers leave no MoE layer"),
    (dict(n_shared_experts=1), "n_shared_experts = 1 is not allowed; expected 0 or absent"),
    (dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48),
     "shared_expert_intermediate_size = 48 is not allowed; expected a multiple of moe_intermediate_size = 32"),
    (dict(sliding_window=16, layer_types=["sliding_attention", "full_attention"]),
     "layer_types = 'a list of 2 entries' is not allowed; expected a list of num_hidden_layers = 4 entries"),
    (dict(layer_types=["sliding_attention"] * 4), "sliding_window = None is not allowed"),
    (dict(sliding_window=0), "sliding_window = 0 is not allowed; expected an integer >= 1"),
    (dict(quantization_config="mxfp4"), "quantization_config = 'mxfp4' is not allowed"),
    (dict(attention_sinks="yes"), "attention_sinks = 'yes' is not allowed; expected true or false"),
    (dict(expert_weight_format="fp4"), "expert_weight_format = 'fp4' is not allowed; expected absent"),
    (dict(num_local_experts=8, num_experts_per_tok=2, expert_weight_format="fp5"),
     "expert_weight_format = 'fp5' is not allowed; expected .*nvfp4"),
])
def test_bad_moe_and_attention_configs_are_one_line(tmp_path, extra, message):
    path = _write(tmp_path, _base(**extra))
    with pytest.raises(InputError, match=message) as err:
        load_hf_config(path)
    text = str(err.value)
    assert text.startswith(str(path)) and "\n" not in text


def test_missing_field_of_a_nested_text_config_is_named(tmp_path):
    config = json.loads((DATA / "llama-4-maverick" / "config.json").read_text())
    del config["text_config"]["num_hidden_layers"]
    path = _write(tmp_path, config)
    with pytest.raises(InputError, match=f"{path}: config.json is missing num_hidden_layers"):
        load_hf_config(path)
    with pytest.raises(InputError, match="text_config = 'list' is not allowed"):
        model_from_hf_config({"text_config": [1]}, where="x.json")


def test_qwen_moe_shared_expert_width_is_whole_experts():
    # Qwen1.5-MoE-A2.7B config.json: moe_intermediate_size 1408, shared_expert_intermediate_size 5632 = 4 experts.
    m = model_from_hf_config(_base(num_experts=60, num_experts_per_tok=4, moe_intermediate_size=1408,
                                   shared_expert_intermediate_size=5632))
    assert (m.n_shared_experts, m.moe_d_ff) == (4, 1408)


def test_zero_experts_is_a_dense_model():
    # Some dense configs carry num_experts = 0 (e.g. Qwen2-style configs of dense checkpoints).
    assert not model_from_hf_config(_base(num_experts=0, num_experts_per_tok=0)).is_moe


def test_mtp_on_a_model_without_mtp_layers_is_the_seeds_hypothetical_head_without_a_warning():
    # The seed chapter prices an MTP head on llama-3-8b (mtp_layers = 0); grids/seed.toml relies on it.
    assert get_model("llama-3-8b").mtp_layers == 0 and get_model("glm-4.5").mtp_layers == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = evaluate(device="H100", model="llama-3-8b", draft="mtp", batch=1, context=512, gamma=3, alpha=0.7)
    assert round(r["s_per_token_spec"] * 1e3, 3) == 3.076
