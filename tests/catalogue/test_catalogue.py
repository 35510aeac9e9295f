"""Catalogue: derived model quantities against official totals and seed anchors; loading HF config.json."""

import json

import pytest

from sweepkit.catalogue import (
    device_names, draft_names, format_names, get_device, get_draft, get_format, get_model, load_hf_config,
    load_models, model_names,
)
from sweepkit.errors import InputError


# Model cards that print a coarser total than 1% (Kimi-K2 "1T"; Llama-4 Scout "109B", vision encoder included):
# tests/catalogue/test_modern_models.py checks them at the card's printed precision.
COARSE_CARDS = {"kimi-k2", "llama-4-scout"}


@pytest.mark.parametrize("name", [n for n in model_names() if n not in COARSE_CARDS])
def test_parameter_counts_within_one_percent_of_official(name):
    # Official totals (model cards / HF configs of Llama-3-8B, Llama-3-70B, Llama-3.2-1B/3B, Qwen2.5-7B): 8.03 B,
    # 70.55 B, 1.24 B, 3.21 B, 7.62 B.
    model = get_model(name)
    assert model.resident_params == pytest.approx(model.official_params, rel=0.01)


@pytest.mark.parametrize("name, kv", [("llama-3-8b", 131_072), ("llama-3-70b", 327_680), ("llama-3.2-1b", 32_768),
                                      ("llama-3.2-3b", 114_688), ("qwen2.5-7b", 57_344)])
def test_kv_bytes_per_token_bf16(name, kv):
    # KV B/token (bf16) = 2 x L x H_kv x d_h x 2 B, from each HF config.json.
    assert get_model(name).kv_bytes_per_token(2.0) == kv


def test_seed_anchor_streamed_bytes_and_mtp_layer():
    # the reference simulator (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim): "Llama-3-8B streamed 15,009,316,864 B"; 70B layer = 855.6 M params;
    # sec. 3 (decode table): the 8B MTP draft has 743.4 M matmul params (1 layer + shared LM head).
    assert get_model("llama-3-8b").matmul_params * 2 == 15_009_316_864
    assert get_model("llama-3-70b").params_per_layer == pytest.approx(855.6e6, rel=1e-4)
    mtp = get_draft("mtp", get_model("llama-3-8b"))
    assert mtp.model.matmul_params == pytest.approx(743.4e6, rel=1e-4)
    assert mtp.resident_params == get_model("llama-3-8b").params_per_layer


def test_seed_residency_of_70b_at_tp4():
    # the reference simulator (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim): 70.55 B params x 2 B = 141.1 GB -> 35.276 GB per GPU at TP4; MTP adds 1.711 GB.
    target = get_model("llama-3-70b")
    assert target.resident_params * 2 / 4 / 1e9 == pytest.approx(35.276, abs=1e-3)
    assert get_draft("mtp", target).resident_params * 2 / 1e9 == pytest.approx(1.711, abs=1e-3)


def test_formats_bytes_per_value():
    # the reference simulator (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim), "Formats": bf16 2, fp8 1, int8 1, int4 0.515625 (AWQ g128), fp4 0.53125 (MXFP4).
    # nvfp4 0.5 + 1/16 (one E4M3 scale per 16), fp6 0.75 + 1/32 (OCP MX v1.0).
    expected = {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.515625, "fp4": 0.53125, "nvfp4": 0.5625,
                "fp6": 0.78125}
    assert {f: get_format(f).bytes_per_value for f in format_names()} == expected


def test_devices_have_sources_and_dense_flops():
    for name in ["A100", "A100-40GB", "H100", "H200", "B200", "MI300X"]:
        dev = get_device(name)
        assert dev.source and dev.peak_flops_per_s < 3e15      # dense bf16, never the 2:4-sparse figure
    assert get_device("H100").ridge_flop_per_byte == pytest.approx(203, abs=0.5)  # the reference simulator (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim)
    assert (get_device("H100").price_usd_per_gpu_hour, get_device("H200").price_usd_per_gpu_hour,
            get_device("B200").price_usd_per_gpu_hour) == (3.0, 3.5, 5.0)
    assert get_device("B200").speedup("fp4") == 4.0 and get_device("A100").speedup("fp8") == 1.0


def test_unknown_names_list_the_known_ones():
    with pytest.raises(InputError, match="device = 'H900'.*H100"):
        get_device("H900")
    with pytest.raises(InputError, match="llama-3-8b"):
        get_model("gpt-5")
    with pytest.raises(InputError, match="bf16"):
        get_format("fp2")
    with pytest.raises(InputError, match="mtp"):
        get_draft("eagle", get_model("llama-3-8b"))
    assert set(draft_names()) >= {"none", "mtp", "llama-3.2-1b"} and "H100" in device_names()


def test_draft_must_share_vocab():
    with pytest.raises(InputError, match="vocab"):
        get_draft("qwen2.5-7b", get_model("llama-3-8b"))


def test_load_hf_config_matches_catalogue(tmp_path):
    config = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False,
              "architectures": ["LlamaForCausalLM"], "rope_theta": 500000.0}
    path = tmp_path / "my-llama" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    model = load_hf_config(path)
    assert model.name == "my-llama"
    assert model.resident_params == load_models()["llama-3-8b"].resident_params
    assert model.head_dim == 128


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    (json.dumps({"hidden_size": 4096}), "missing num_hidden_layers"),
    (json.dumps({"hidden_size": 4096, "num_hidden_layers": 0, "num_attention_heads": 32, "intermediate_size": 1,
                 "vocab_size": 10}), "num_hidden_layers = 0"),
    (json.dumps({"hidden_size": 4096, "num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 5,
                 "intermediate_size": 1, "vocab_size": 10}), "divisor"),
])
def test_bad_config_json_is_a_clear_error(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        load_hf_config(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_missing_config_file(tmp_path):
    with pytest.raises(InputError, match="no such config.json"):
        load_hf_config(tmp_path / "nope" / "config.json")


LLAMA_8B_CONFIG = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False}


def test_evaluate_and_a_grid_take_a_config_json_path(tmp_path, monkeypatch):
    """A HF config.json path works wherever a catalogue model name does: evaluate (relative to the current
    folder), a grid's model and draft axes (relative to the grid file), and the grid's digest covers the
    config's text (an edited config is another grid, never a reused run)."""
    import sweepkit
    from sweepkit.sweep.grid import load_grid

    folder = tmp_path / "models" / "my-llama"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(LLAMA_8B_CONFIG))
    monkeypatch.chdir(tmp_path)
    mine = sweepkit.evaluate(device="H100", model="models/my-llama/config.json", draft="mtp")
    ref = sweepkit.evaluate(device="H100", model="llama-3-8b", draft="mtp")
    assert mine == ref
    grid = tmp_path / "g.toml"
    grid.write_text('name = "g"\n[axes]\nmodel = ["models/my-llama/config.json", "llama-3-8b"]\n'
                    'draft = ["mtp", "llama-3.2-1b"]\n')
    spec = load_grid(grid)
    assert spec.axes["model"] == ("models/my-llama/config.json", "llama-3-8b") and spec.n_points == 4
    (folder / "config.json").write_text(json.dumps({**LLAMA_8B_CONFIG, "num_hidden_layers": 16}))
    assert load_grid(grid).sha256 != spec.sha256
    grid.write_text('name = "g"\n[axes]\nmodel = ["models/none/config.json"]\n')
    with pytest.raises(InputError, match=r"axes.model = 'models/none/config.json': no such config.json"):
        load_grid(grid)


def test_a_grid_and_evaluate_take_a_models_file(tmp_path, monkeypatch):
    import sweepkit
    from sweepkit.sweep.grid import load_grid

    def toml(config):
        return "\n".join(f"{k} = {json.dumps(v)}" for k, v in config.items())

    fields = toml(LLAMA_8B_CONFIG)
    short = toml({**LLAMA_8B_CONFIG, "num_hidden_layers": 16})
    (tmp_path / "mine.toml").write_text(f"[models.my-8b]\n{fields}\n[models.my-8b-short]\n{short}\n")
    grid = tmp_path / "g.toml"
    grid.write_text('name = "g"\nmodels_file = "mine.toml"\n[axes]\nmodel = ["my-8b", "my-8b-short"]\n')
    spec = load_grid(grid)
    assert spec.axes["model"] == ("my-8b", "my-8b-short")
    monkeypatch.chdir(tmp_path)
    mine = sweepkit.evaluate(device="H100", model="my-8b", draft="mtp", models_file="mine.toml")
    assert mine == sweepkit.evaluate(device="H100", model="llama-3-8b", draft="mtp")
    (tmp_path / "clash.toml").write_text(f"[models.llama-3-8b]\n{fields}\n")
    with pytest.raises(InputError, match=r"clash.toml: models.llama-3-8b = 'llama-3-8b' is not allowed"):
        sweepkit.evaluate(device="H100", model="llama-3-8b", models_file="clash.toml")
