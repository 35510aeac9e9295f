"""Quantised checkpoints' names resolve to their base model, and state their format.

NVIDIA's TensorRT Model Optimizer checkpoints (huggingface.co/nvidia: ``nvidia/Llama-3.3-70B-Instruct-FP4``,
``nvidia/Qwen3-235B-A22B-FP4``, ``nvidia/Llama-4-Maverick-17B-128E-Instruct-FP8``, ...; "Only the weights and
activations of the linear operators within transformer blocks are quantized") keep the base model's
config.json shapes, as do RedHat's llm-compressor ``-FP8-dynamic`` checkpoints. TensorRT-LLM's perf-overview
names its models so; AMD's Quark checkpoints add ``-FP8-KV`` and ``-MXFP4``; MLPerf names its benchmarks'
reference checkpoints ``llama2-70b-99``, ``llama3.1-405b``, ``gptj-99``.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import device_key, get_model, model_key
from sweepkit.catalogue.aliases import QUANT_SUFFIXES, checkpoint_format, checkpoint_kv_format
from sweepkit.catalogue.model_registry import load_models
from sweepkit.errors import InputError
from sweepkit.validation import parse_measurements

HEADER = "source,device,model,metric,value,unit,weight_format,kv_format,compute_format\n"


@pytest.mark.parametrize("name, key", [
    ("nvidia/Llama-3.3-70B-Instruct-FP4", "llama-3.1-70b"),       # through the alias of Llama-3.3-70B-Instruct
    ("nvidia/Llama-3.3-70B-Instruct-FP8", "llama-3.1-70b"),
    ("nvidia/Llama-3.1-405B-Instruct-FP4", "llama-3.1-405b"),
    ("nvidia/Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b"),
    ("nvidia/Qwen3-235B-A22B-FP4", "qwen3-235b-a22b"),
    ("nvidia/Qwen3-30B-A3B-FP4", "qwen3-30b-a3b"),
    ("nvidia/Llama-4-Maverick-17B-128E-Instruct-FP4", "llama-4-maverick"),
    ("nvidia/Llama-4-Scout-17B-16E-Instruct-FP4", "llama-4-scout"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "llama-3.1-8b"),
    ("Qwen/Qwen3-32B-FP8", "qwen3-32b"),
    # NVIDIA's DeepSeek NVFP4 checkpoints keep attention in bf16: named in aliases.toml, not read off the suffix.
    ("nvidia/DeepSeek-R1-0528-FP4", "deepseek-r1-nvfp4"),
    ("nvidia/DeepSeek-V3-0324-FP4", "deepseek-r1-nvfp4"),
    ("nvidia/DeepSeek-R1-0528-FP4-v2", "deepseek-r1-nvfp4"),
    # AMD Quark checkpoints (huggingface.co/amd): FP8 weights, activations and KV; MXFP4.
    ("amd/Llama-3.3-70B-Instruct-FP8-KV", "llama-3.1-70b"),
    ("amd/Mixtral-8x7B-Instruct-v0.1-FP8-KV", "mixtral-8x7b"),
    ("amd/DeepSeek-R1-0528-MXFP4-Preview", "deepseek-v3"),
    # MLPerf Inference's benchmark names (mlcommons/inference) name their reference checkpoints.
    ("llama2-70b-99", "llama-2-70b"),
    ("llama2-70b-interactive-99.9", "llama-2-70b"),
    ("llama3.1-405b", "llama-3.1-405b"),
    ("llama3.1-8b", "llama-3.1-8b"),
    ("gptj-99", "gpt-j-6b"),
])
def test_quantised_checkpoint_resolves_to_its_base_model(name, key):
    assert model_key(name) == key
    assert get_model(name).name == key


def test_an_unknown_base_model_stays_unknown():
    with pytest.raises(InputError, match="acme/unknown-9b-FP8"):
        get_model("acme/unknown-9b-FP8")


def test_checkpoint_format():
    assert checkpoint_format("nvidia/Qwen3-30B-A3B-FP4") == "fp4"
    assert checkpoint_format("nvidia/Qwen3.5-397B-A17B-NVFP4") == "fp4"
    assert checkpoint_format("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic") == "fp8"
    assert checkpoint_format("meta-llama/Llama-3.1-8B-Instruct") is None
    assert checkpoint_format("fp8") is None                       # a suffix alone names no checkpoint
    assert checkpoint_format("amd/DeepSeek-R1-0528-MXFP4-Preview") == "fp4"
    assert checkpoint_kv_format("amd/Llama-3.3-70B-Instruct-FP8-KV") == "fp8"
    assert checkpoint_kv_format("nvidia/Llama-3.3-70B-Instruct-FP8") is None


@pytest.mark.parametrize("name, key", [
    ("B200-SXM-180GB", "B200"), ("NVIDIA DGX B200", "B200"), ("NVIDIA H100-SXM-80GB", "H100"),
    ("Instinct MI300X OAM", "MI300X"), ("AMD MI355X", "MI355X"), ("NVIDIA GB200 NVL72", "GB200"),
])
def test_system_names_of_public_results_resolve(name, key):
    assert device_key(name) == key


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(sorted(load_models())), suffix=st.sampled_from(sorted(QUANT_SUFFIXES)),
       org=st.sampled_from(["nvidia", "RedHatAI", "acme"]), upper=st.booleans())
def test_any_catalogue_model_with_a_quantisation_suffix_resolves_to_itself(key, suffix, org, upper):
    name = f"{org}/{key}{suffix.upper() if upper else suffix}"
    assert model_key(name) == key
    assert checkpoint_format(name) == QUANT_SUFFIXES[suffix]


def _row(model, weight="", kv="", compute="", device="B200"):
    text = HEADER + f"s,{device},{model},max_output_throughput,1000,tok/s,{weight},{kv},{compute}\n"
    return parse_measurements(text, "demo.csv")[0]


def test_a_row_naming_a_quantised_checkpoint_takes_its_format_where_it_states_none():
    m = _row("nvidia/Llama-3.3-70B-Instruct-FP4")
    assert (m.weight_format, m.compute_format, m.kv_format) == ("fp4", "fp4", "bf16")
    m = _row("nvidia/Llama-3.1-8B-Instruct-FP8", kv="fp8")
    assert (m.weight_format, m.compute_format, m.kv_format) == ("fp8", "fp8", "fp8")
    m = _row("amd/Llama-3.3-70B-Instruct-FP8-KV")
    assert (m.weight_format, m.compute_format, m.kv_format) == ("fp8", "fp8", "fp8")
    assert _row("amd/Llama-3.3-70B-Instruct-FP8-KV", kv="bf16").kv_format == "bf16"


def test_a_device_without_the_format_computes_weight_only():
    # NVFP4 on Hopper and FP8 on Ampere have no tensor-core path: the weights keep the format, compute is bf16
    m = _row("nvidia/Llama-3.3-70B-Instruct-FP4", device="H100")
    assert (m.weight_format, m.compute_format) == ("fp4", "bf16")
    m = _row("nvidia/Llama-3.1-8B-Instruct-FP8", device="A100")
    assert (m.weight_format, m.compute_format) == ("fp8", "bf16")
    assert _row("nvidia/Llama-3.1-8B-Instruct-FP8", device="H100").compute_format == "fp8"
    assert _row("nvidia/Llama-3.1-8B-Instruct-FP8", device="acme-x1").compute_format == "bf16"   # unknown device


def test_stated_formats_win_and_plain_names_keep_the_defaults():
    m = _row("nvidia/Llama-3.3-70B-Instruct-FP4", weight="fp4", compute="bf16")   # stated W4A16 stays W4A16
    assert (m.weight_format, m.compute_format) == ("fp4", "bf16")
    m = _row("nvidia/Llama-3.3-70B-Instruct-FP4", weight="fp8")                   # another stated weight format
    assert (m.weight_format, m.compute_format) == ("fp8", "bf16")
    m = _row("meta-llama/Llama-3.1-8B-Instruct")
    assert (m.weight_format, m.compute_format, m.kv_format) == ("bf16", "bf16", "bf16")


def test_aliased_hf_names_are_unambiguous_without_their_organisation():
    # resolve() also matches an aliased HF id's Name under another organisation (nvidia/..., amd/...), so no
    # two aliases may share a Name and differ in the model they name.
    from collections import defaultdict

    from sweepkit.catalogue.aliases import alias_table, normalise

    named = defaultdict(set)
    for spelling, key in alias_table("models").items():
        if "/" in spelling:
            named[normalise(spelling.rsplit("/", 1)[-1])].add(key)
    assert {name: keys for name, keys in named.items() if len(keys) > 1} == {}
