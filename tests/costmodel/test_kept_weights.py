"""Weights a checkpoint keeps wider than the weight format (sweepkit.costmodel.kept), against closed forms.

NVIDIA's NVFP4 DeepSeek-R1 checkpoints keep the 61 MLA attention modules in bf16 (TensorRT-LLM blog 1,
"Precision Strategy") and ModelOpt leaves ``lm_head`` unquantised; gpt-oss keeps attention, router,
embeddings and ``lm_head`` in bf16 (its config's quantization_config.modules_to_not_convert). Those P_a
weights are read at max(w, w_a) bytes and multiplied at k_a = min(k, max(1, 2 / max(w, w_a))).
"""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.attention import attention_weight_format, native_weight_format
from sweepkit.catalogue.efficiency import profile_for
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time_by_class
from sweepkit.costmodel.kept import kept_flops_added, kept_speedup
from sweepkit.costmodel.memory import resident_bytes
from sweepkit.costmodel.passes import Work, chunk_work, decode_work, flops_and_bytes
from sweepkit.errors import InputError

NVFP4 = 0.5625
FIELDS = dict(gemm_eff_max=0.4, gemm_tokens_half=0.0, moe_eff_max=0.3, moe_tokens_half=0.0, attn_prefill_eff=1.0,
              weight_bw_eff=0.8, kv_bw_eff=0.5, link_eff=1.0, allreduce_overhead_s=0.0, tp_loss=0.0,
              step_overhead_s=0.0, token_overhead_s=0.0)
NONE = Work(0.0, 0.0, 0.0)


def _arrays(model, f=jnp.float64):
    return model_arrays(model, f)


def test_nvidia_nvfp4_deepseek_is_the_v3_shapes_with_bf16_attention_and_head():
    m, base = get_model("nvidia/DeepSeek-R1-0528-FP4"), get_model("deepseek-ai/DeepSeek-R1")
    assert (m.name, m.native_weight_format, m.attention_weight_format) == ("deepseek-r1-nvfp4", "nvfp4", "bf16")
    assert base.attention_weight_format == "" and m.matmul_params == base.matmul_params
    # P_a = 61 MLA blocks + the 129,280 x 7,168 head; held: + the input embedding
    assert m.kept_params == 61 * base.attention_params + 129280 * 7168
    assert m.kept_params / 1e9 == pytest.approx(12.34, abs=0.005)
    assert m.resident_weight_bytes(NVFP4) == pytest.approx(
        base.resident_weight_bytes(NVFP4) + (m.kept_params + 129280 * 7168) * (2.0 - NVFP4), rel=1e-12)


def test_a_pass_reads_the_kept_weights_at_bf16_and_does_the_same_flops():
    m, base = get_model("deepseek-r1-nvfp4"), get_model("deepseek-v3")
    with jax.enable_x64(True):
        f = jnp.float64
        for work in (decode_work(f(2048.0 * 64), f(64.0)), chunk_work(f(0.0), f(1024.0))):
            kept = flops_and_bytes(work, _arrays(m), f(NVFP4), f(1.0))
            plain = flops_and_bytes(work, _arrays(base), f(NVFP4), f(1.0))
            assert float(kept[0]) == float(plain[0])
            assert float(kept[1] - plain[1]) == pytest.approx(m.kept_params * (2.0 - NVFP4), rel=1e-12)
        t, d = _arrays(m), _arrays(None)
        assert float(resident_bytes(t, d, f(NVFP4))) == pytest.approx(m.resident_weight_bytes(NVFP4), rel=1e-12)


@pytest.mark.parametrize("w, w_a, k, expected", [
    (NVFP4, 2.0, 4.0, 1.0),     # bf16 attention beside NVFP4 GEMMs on Blackwell: the bf16 rate
    (NVFP4, 1.0, 4.0, 2.0),     # FP8 attention beside FP4 experts on Blackwell: the FP8 rate
    (0.53125, 2.0, 1.0, 1.0),   # gpt-oss on Hopper (no FP4 path): k = 1 already
    (1.0, 1.0, 1.0, 1.0),       # FP8 attention on A100: k bounds it
    (2.0, 1.0, 1.0, 1.0),       # a bf16 row keeps bf16 (max(w, w_a))
    (NVFP4, 0.0, 4.0, 4.0),     # nothing kept: the pass's k
])
def test_kept_speedup_is_the_rate_the_kept_width_allows(w, w_a, k, expected):
    m = dataclasses.replace(get_model("deepseek-v3"), attention_weight_format={2.0: "bf16", 1.0: "fp8", 0.0: ""}[w_a])
    with jax.enable_x64(True):
        assert float(kept_speedup(_arrays(m), jnp.float64(w), jnp.float64(k))) == expected


def test_the_dense_gemm_class_prices_the_kept_share_at_its_rate_and_efficiency():
    # 1,024 prompt tokens of DeepSeek-R1 NVFP4 on one B200 (k = 4): compute-bound; the dense share at k and
    # e = 0.4, the 12.34 B kept parameters at k_a = 1 and e_a = 0.73 (the profile's B200 bf16 entry)
    m, T = get_model("deepseek-r1-nvfp4"), 1024.0
    dense = m.matmul_params - m.routed_expert_params * m.experts_per_token
    fields = {**FIELDS, "kept_gemm_eff_max": 0.73, "kept_gemm_tokens_half": 0.0}
    with jax.enable_x64(True):
        f = jnp.float64
        args = (device_arrays(get_device("B200"), f), efficiency_arrays(fields, f), f(1.0), f(NVFP4), f(1.0), f(4.0))
        kept = step_time_by_class(NONE, chunk_work(f(0.0), f(T)), _arrays(m), *args)
        plain = step_time_by_class(NONE, chunk_work(f(0.0), f(T)), _arrays(get_model("deepseek-v3")), *args)
    peak = get_device("B200").peak_flops_per_s
    assert float(kept["gemm"]) == pytest.approx(
        2 * T * ((dense - m.kept_params) / (4 * 0.4) + m.kept_params / (1 * 0.73)) / peak, rel=1e-9)
    assert float(plain["gemm"]) == pytest.approx(2 * T * dense / (4 * 0.4) / peak, rel=1e-9)
    for c in ("moe", "attn_prefill", "comm", "kernels"):
        assert float(kept[c]) == float(plain[c])


def test_the_reference_roofline_sees_the_kept_flops_at_the_pass_rate():
    # 2 P_a T (k / k_a - 1): priced at k, they take what 2 P_a T take at k_a
    m = get_model("deepseek-r1-nvfp4")
    with jax.enable_x64(True):
        f = jnp.float64
        added = kept_flops_added(chunk_work(f(0.0), f(512.0)), _arrays(m), f(NVFP4), f(4.0))
        none = kept_flops_added(chunk_work(f(0.0), f(512.0)), _arrays(get_model("deepseek-v3")), f(NVFP4), f(4.0))
    assert float(added) == pytest.approx(2 * m.kept_params * 512 * 3.0, rel=1e-12)
    assert float(none) == 0.0


def test_the_tensorrt_llm_profile_prices_b200_bf16_gemms_from_its_own_entry():
    p = profile_for("TensorRT-LLM")
    assert p.kept_fields("B200", "bf16") == {"kept_gemm_eff_max": 0.73, "kept_gemm_tokens_half": 240.0}
    assert p.kept_fields("B200", "") == {}
    assert p.fields("B200", "fp4")["gemm_eff_max"] == pytest.approx(0.4113, abs=1e-4)    # the fitted FP4 entry


@pytest.mark.parametrize("config, native, kept", [
    ({"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]}},
     "fp4", "bf16"),                                                                  # gpt-oss
    ({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                              "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}}, "nvfp4", "bf16"),
    ({"quantization_config": {"quant_method": "compressed-tensors", "ignore": ["re:.*self_attn.*"]}}, "", ""),
    ({"quantization_config": {"quant_method": "fp8"}}, "fp8", ""),                    # DeepSeek-V3: all FP8
    ({}, "", ""),                                                                     # bf16 checkpoint
    ({"attention_weight_format": "fp8"}, "", "fp8"),                                  # stated
])
def test_the_kept_format_comes_from_the_checkpoint_config(config, native, kept):
    assert native_weight_format(config, "t") == native
    assert attention_weight_format(config, native, "t") == kept


def test_a_bad_kept_format_names_the_field_and_what_is_allowed():
    with pytest.raises(InputError, match=r"attention_weight_format.*'int3'.*bf16"):
        attention_weight_format({"attention_weight_format": "int3"}, "", "models.toml [x]")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["deepseek-v3", "llama-3.1-70b", "qwen3-30b-a3b", "gpt-oss-120b"]),
       st.sampled_from([(NVFP4, 4.0), (1.0, 2.0), (2.0, 1.0)]), st.integers(1, 4096), st.integers(0, 1 << 16),
       st.booleans(), st.sampled_from(["bf16", "fp8", "nvfp4"]))
def test_keeping_weights_wider_never_makes_a_step_cheaper_and_changes_nothing_at_their_width(
        name, fmt, tokens, ctx, prompt, kept):
    # kept GEMMs at the pass format's efficiency (a profile whose entries agree): only width and rate differ
    w, k = fmt
    base = dataclasses.replace(get_model(name), attention_weight_format="")
    wide = dataclasses.replace(base, attention_weight_format=kept)
    fields = {**FIELDS, "gemm_tokens_half": 100.0, "kept_gemm_eff_max": 0.4, "kept_gemm_tokens_half": 100.0}
    with jax.enable_x64(True):
        f = jnp.float64
        args = (device_arrays(get_device("B200"), f), efficiency_arrays(fields, f), f(2.0), f(w), f(1.0), f(k))
        work = (NONE, chunk_work(f(ctx), f(tokens))) if prompt else (decode_work(f(ctx * tokens), f(tokens)), NONE)
        t_wide = sum(float(v) for v in step_time_by_class(*work, _arrays(wide), *args).values())
        t_base = sum(float(v) for v in step_time_by_class(*work, _arrays(base), *args).values())
        r_wide = float(resident_bytes(_arrays(wide), _arrays(None), f(w)))
        r_base = float(resident_bytes(_arrays(base), _arrays(None), f(w)))
    assert t_wide >= t_base * (1 - 1e-12) and r_wide >= r_base
    w_a = {"bf16": 2.0, "fp8": 1.0, "nvfp4": NVFP4}[kept]
    if w < w_a:
        assert r_wide > r_base
    if w >= w_a:
        assert t_wide == pytest.approx(t_base, rel=1e-12) and r_wide == r_base   # kept no wider than the pass
