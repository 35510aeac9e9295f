"""The measured profile: a step's seconds by operator class, against closed forms; profile files."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import (FIELDS, SEED, framework_key, load_profile, packaged_profile,
                                           parse_profile, profile_for, profile_toml)
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays, saturating, step_time, step_time_by_class
from sweepkit.costmodel.passes import Work, chunk_work, decode_work, experts_read
from sweepkit.errors import InputError

FIELDS_07 = dict(gemm_eff_max=0.7, gemm_tokens_half=0.0, moe_eff_max=0.5, moe_tokens_half=16.0,
                 attn_prefill_eff=0.5, weight_bw_eff=0.8, kv_bw_eff=0.8, link_eff=1.0, allreduce_overhead_s=0.0,
                 tp_loss=0.0, step_overhead_s=0.0, token_overhead_s=0.0)
NONE = Work(0.0, 0.0, 0.0)


def _parts(model, decode, prefill, fields=FIELDS_07, tp=1.0, device="H100", wb=1.0, kb=1.0, k=2.0):
    with jax.enable_x64(True):
        f = jnp.float64
        parts = step_time_by_class(decode, prefill, model_arrays(get_model(model), f),
                                   device_arrays(get_device(device), f), efficiency_arrays(fields, f), f(tp), f(wb),
                                   f(kb), f(k))
        return {c: float(v) for c, v in parts.items()}


def test_decode_step_of_a_dense_model_is_weights_plus_kv_over_the_bandwidth():
    # Llama-3.1-8B fp8 on one H100: 256 rows of 1,000 cached tokens. Memory-bound: weights (P_mm + T D) x 1 B
    # and the KV (ctx + b) x 2 L H_kv d_h x 1 B, each over 0.8 x 3.35 TB/s.
    m, bw = get_model("llama-3.1-8b"), 0.8 * 3.35e12
    parts = _parts("llama-3.1-8b", decode_work(256e3, 256.0), NONE)
    assert parts["gemm"] == pytest.approx((m.matmul_params + 256 * m.d_model) / bw, rel=1e-9)
    assert parts["attn_decode"] == pytest.approx((256e3 + 256) * m.kv_bytes_per_token(1.0) / bw, rel=1e-9)
    assert parts["moe"] == 0.0 and parts["attn_prefill"] == 0.0 and parts["comm"] == 0.0
    assert (parts["gemm"], parts["attn_decode"]) == pytest.approx((2.80e-3, 6.27e-3), rel=2e-3)  # docstring


def test_prefill_gemm_is_compute_bound_at_the_saturating_efficiency():
    # 4,096 prompt tokens, T_half 512: eff = 0.7 x 4096 / 4608; FLOPs 2 P_dense T at k = 2 over the bf16 peak.
    m = get_model("llama-3.1-8b")
    fields = {**FIELDS_07, "gemm_tokens_half": 512.0}
    parts = _parts("llama-3.1-8b", NONE, chunk_work(0.0, 4096.0), fields)
    eff = 0.7 * 4096 / (4096 + 512)
    assert parts["gemm"] == pytest.approx(2 * m.matmul_params * 4096 / (989e12 * 2 * eff), rel=1e-9)
    flops = 2 * m.n_layers * m.attention_width * 4096 * 4097
    assert parts["attn_prefill"] == pytest.approx(max(flops / (989e12 * 0.5),
                                                      4096 * m.kv_bytes_per_token(1.0) / (0.8 * 3.35e12)), rel=1e-9)


def test_moe_experts_are_priced_apart_from_the_dense_share():
    # Mixtral-8x7B: the dense share is P_mm - k P_e; the experts read E_read(T) x P_e weights.
    m = get_model("mixtral-8x7b")
    parts = _parts("mixtral-8x7b", decode_work(8e3, 8.0), NONE)
    with jax.enable_x64(True):
        e_read = float(experts_read(jnp.float64(8.0), model_arrays(m, jnp.float64)))
    bw = 0.8 * 3.35e12
    dense = m.matmul_params - m.experts_per_token * m.routed_expert_params
    assert parts["gemm"] == pytest.approx((dense + 8 * m.d_model) / bw, rel=1e-9)
    assert parts["moe"] == pytest.approx(m.routed_expert_params * e_read / bw, rel=1e-9)


def test_tensor_parallel_all_reduces_and_overheads():
    # tp 4: 2 L all-reduces of T D 2 bytes, each 2 (tp-1)/tp S / (link c_x) + 2 (tp-1) x 5 us + t_ar.
    m = get_model("llama-3.1-70b")
    fields = {**FIELDS_07, "link_eff": 0.5, "allreduce_overhead_s": 10e-6, "step_overhead_s": 1e-3,
              "token_overhead_s": 1e-6}
    parts = _parts("llama-3.1-70b", decode_work(64e3, 64.0), NONE, fields, tp=4.0)
    size = 64 * m.d_model * 2.0
    per = 2 * 3 / 4 * size / (450e9 * 0.5) + 2 * 3 * 5e-6 + 10e-6
    assert parts["comm"] == pytest.approx(2 * m.n_layers * per, rel=1e-9)
    assert parts["overhead"] == pytest.approx(1e-3 + 64e-6, rel=1e-12)


def test_tp_loss_stretches_the_device_classes_only():
    base = _parts("llama-3.1-70b", decode_work(64e3, 64.0), NONE, tp=4.0)
    lossy = _parts("llama-3.1-70b", decode_work(64e3, 64.0), NONE, {**FIELDS_07, "tp_loss": 0.1}, tp=4.0)
    # s_tp = 1 + l_tp (tp - 1) (D L / P_mm) / r_0: Llama-3.1-70B 1 + 0.1 x 3 x (8,192 x 80 / 69,501,714,432) / 1e-5
    stretch = 1 + 0.1 * 3 * (8192 * 80 / 69_501_714_432) / 1e-5
    assert stretch == pytest.approx(1.2829, abs=1e-4)
    for c in ("gemm", "attn_decode"):
        assert lossy[c] == pytest.approx(stretch * base[c], rel=1e-12)
    assert lossy["comm"] == base["comm"]


@given(st.floats(0.0, 1e5), st.floats(1.0, 1e5), st.floats(0.05, 1.0), st.just(0.0) | st.floats(1e-3, 4096.0))
def test_saturating_efficiency_rises_to_its_maximum(t, dt, e_max, half):
    with jax.enable_x64(True):
        a, b = float(saturating(t, e_max, half)), float(saturating(t + dt, e_max, half))
        assert 0.0 <= a <= b * (1 + 1e-12) and b <= e_max * (1 + 1e-12)
        assert float(saturating(half, e_max, half)) == pytest.approx(e_max / 2 if half > 0 else e_max)


@given(st.floats(1.0, 2048.0), st.floats(0.0, 1e6), st.floats(1.0, 4096.0))
def test_step_time_grows_with_rows_context_and_prompt_tokens(rows, ctx, prompt):
    small = sum(_parts("llama-3.1-8b", decode_work(ctx, rows), chunk_work(0.0, prompt)).values())
    more_rows = sum(_parts("llama-3.1-8b", decode_work(ctx, rows + 1), chunk_work(0.0, prompt)).values())
    more_ctx = sum(_parts("llama-3.1-8b", decode_work(ctx + 1e4, rows), chunk_work(0.0, prompt)).values())
    more_prompt = sum(_parts("llama-3.1-8b", decode_work(ctx, rows), chunk_work(0.0, prompt + 64)).values())
    assert small <= more_rows and small <= more_ctx and small <= more_prompt


def test_step_time_vmaps_over_rows_and_is_zero_for_an_empty_step():
    with jax.enable_x64(True):
        f = jnp.float64
        m, d = model_arrays(get_model("llama-3.1-8b"), f), device_arrays(get_device("H100"), f)
        eff = efficiency_arrays(FIELDS_07, f)
        rows = jnp.asarray([0.0, 1.0, 64.0])
        one = lambda b: step_time(decode_work(b * 512.0, b), NONE, m, d, eff, f(1), f(1), f(1), f(2))  # noqa: E731
        grid = jax.vmap(one)(rows)
        assert [float(x) for x in grid] == pytest.approx([float(one(b)) for b in rows], rel=1e-12)
        assert float(grid[0]) == 0.0


def test_profile_files_round_trip_and_bad_fields_are_one_line(tmp_path):
    seed = packaged_profile(SEED)
    assert seed.fields("H100", "fp8")["gemm_eff_max"] == 0.55 and seed.overheads["step_overhead_s"] == 0.5e-3
    p = dataclasses.replace(seed, name="t", framework="vLLM",
                            entries={("H100", "fp8"): {"gemm_eff_max": 0.61, "tp_loss": 0.02}},
                            sources={("H100", "fp8"): "fitted"})
    back = parse_profile(profile_toml(p), "t.toml")
    assert back.fields("H100", "fp8")["gemm_eff_max"] == 0.61 and back.fields("H100", "fp8")["kv_bw_eff"] == 0.8
    assert back.framework == "vLLM" and back.sources[("H100", "fp8")] == "fitted"
    bad = tmp_path / "bad.toml"
    bad.write_text(profile_toml(p).replace("gemm_eff_max = 0.61", "gemm_eff_max = 3.0"))
    with pytest.raises(InputError) as exc:
        load_profile(bad)
    assert str(exc.value).startswith(f"{bad} [efficiency.H100.fp8]: gemm_eff_max = 3.0 is not allowed")
    assert "\n" not in str(exc.value)
    with pytest.raises(InputError, match="no such profile file"):
        load_profile(tmp_path / "missing.toml")
    bad.write_text(profile_toml(p).replace("kv_bw_eff = 0.8\n", ""))
    with pytest.raises(InputError, match=r"\[default\]: missing field kv_bw_eff"):
        load_profile(bad)


def test_frameworks_pick_their_shipped_profile_or_the_seed():
    assert framework_key("TensorRT-LLM v0.20 (PyTorch backend)") == "tensorrt-llm"
    assert profile_for("no-such-framework") == packaged_profile(SEED)
    assert set(FIELDS) <= set(profile_for("TensorRT-LLM").fields("H100", "fp8"))


def test_mxfp4_experts_are_read_at_their_own_bytes_and_windowed_layers_attend_to_w_positions():
    # gpt-oss-20b (HF config.json: MXFP4 experts, a window of 128 on 12 of 24 layers), one decode row at
    # 20,000 cached tokens on one H100, bf16 weights: the experts stream at w_e = 0.53 B, not 2 B; the
    # windowed layers read 129 positions, the full ones 20,001
    from sweepkit.costmodel.arrays import model_arrays as arrays

    m, bw = get_model("gpt-oss-20b"), 0.8 * 3.35e12
    with jax.enable_x64(True):
        a = arrays(m, jnp.float64)
        w_e, k_e = float(a.expert_weight_bytes), float(a.experts_per_token)
        kv_w, kv = float(a.window_kv_values_per_token), float(a.kv_values_per_token)
    flat = dict(FIELDS_07, moe_tokens_half=0.0)          # a flat MoE efficiency: one row is memory-bound
    parts = _parts("gpt-oss-20b", decode_work(20000.0, 1.0), NONE, fields=flat, wb=2.0, kb=2.0, k=1.0)
    assert 0.5 < w_e < 0.6
    assert parts["moe"] == pytest.approx(m.routed_expert_params * k_e * w_e / bw, rel=1e-9)
    assert parts["attn_decode"] == pytest.approx((20001 * (kv - kv_w) + 129 * kv_w) * 2.0 / bw, rel=1e-9)
