"""The fixed time of the kernels a decoder layer launches (sweepkit.costmodel.kernels): counts, the class, the
profile field that carries it, the fit that keeps it, and LMSYS's EP72 decode step it brings within 25 %."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import packaged_profile, parse_profile, profile_for, profile_toml
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time_by_class
from sweepkit.costmodel.kernels import KERNEL_S, layer_kernels
from sweepkit.costmodel.passes import Work, decode_work
from sweepkit.errors import InputError
from sweepkit.validation import Measurement
from sweepkit.validation.framework_fit import calibrate_framework, with_kernel_time
from sweepkit.validation.steady import measured_throughput
from sweepkit.validation.steady_rows import row_inputs


def test_layer_counts_follow_the_structure():
    # DeepSeek-V3: 58 MoE layers of 24 kernels (GQA 6 + MLA 7 + FFN 4 + routing 4 + shared expert 3), 3 dense
    # layers of 17; quantisations 4 + 1 (q_b) + 1 (shared experts, MoE layers only).
    n, q = layer_kernels(get_model("deepseek-v3"))
    assert n == pytest.approx((24 * 58 + 17 * 3) / 61) and q == pytest.approx(5 + 58 / 61)
    assert n + q == pytest.approx(29.61, abs=0.005)                      # the module docstring's figure
    assert layer_kernels(get_model("llama-3.1-8b")) == (10.0, 4.0)
    n, q = layer_kernels(get_model("glm-4.5-air"))                     # 45 MoE layers, 1 dense, no MLA
    assert n == pytest.approx((17 * 45 + 10) / 46) and q == pytest.approx(4 + 45 / 46)


def test_the_sglang_kernel_time_is_half_the_published_unfused_pair():
    # sglang pull 32994, H100: rmsnorm + static FP8 quant, 512 tokens x 4,096, unfused: 0.007168 ms.
    assert KERNEL_S["sglang"][0] == pytest.approx(7.168e-6 / 2)
    assert "32994" in KERNEL_S["sglang"][1]


def _parts(model, fmt_speedup, kernel_s, tokens=256.0):
    f = jnp.float64
    fields = dict(packaged_profile().fields("H100", "fp8"), kernel_s=kernel_s)
    with jax.enable_x64(True):
        d = decode_work(f(tokens * 1000.0), f(tokens))
        z = Work(f(0.0), f(0.0), f(0.0))
        return {k: float(v) for k, v in step_time_by_class(
            d, z, model_arrays(get_model(model), f), device_arrays(get_device("H100"), f), efficiency_arrays(fields, f),
            f(1.0), f(1.0), f(1.0), f(fmt_speedup)).items()}


def test_the_kernels_class_is_layers_times_kernels_times_t_k():
    m = get_model("deepseek-v3")
    n, q = layer_kernels(m)
    assert _parts("deepseek-v3", 2.0, 3.584e-6)["kernels"] == pytest.approx(61 * (n + q) * 3.584e-6, rel=1e-12)
    # bf16 GEMMs (k = 1) quantise nothing: 61 x 23.66 x 3.584 us = 5.17 ms
    assert _parts("deepseek-v3", 1.0, 3.584e-6)["kernels"] == pytest.approx(61 * n * 3.584e-6, rel=1e-12)
    assert _parts("deepseek-v3", 2.0, 3.584e-6, tokens=0.0)["kernels"] == 0.0      # an empty step
    without = _parts("llama-3.1-8b", 2.0, 0.0)
    assert without["kernels"] == 0.0
    # a profile without kernel_s prices every other class exactly as before
    assert {k: v for k, v in _parts("llama-3.1-8b", 2.0, 3.6e-6).items() if k != "kernels"} == \
        {k: v for k, v in without.items() if k != "kernels"}


def test_a_profile_without_kernel_s_prices_as_zero():
    f = jnp.float64
    fields = packaged_profile().fields("H100", "fp8")
    assert "kernel_s" not in fields
    with jax.enable_x64(True):
        assert float(efficiency_arrays(fields, f).kernel_s) == 0.0


def test_the_profile_file_keeps_kernel_s_and_its_source_and_refuses_a_bad_one():
    p = profile_for("SGLang")
    assert p.overheads["kernel_s"] == pytest.approx(3.584e-6) and "32994" in p.kernel_source
    back = parse_profile(profile_toml(p), "round-trip")
    assert back.overheads == p.overheads and back.kernel_source == p.kernel_source
    assert "kernel_s" not in profile_for("vLLM").overheads and "kernel_s" not in profile_for("TensorRT-LLM").overheads
    text = profile_toml(p).replace("kernel_s = 3.584e-06", "kernel_s = 0.5")
    with pytest.raises(InputError, match=r"round-trip \[framework\].*kernel_s.*\[0, 0.001\]"):
        parse_profile(text, "round-trip")


def _row(i, o, value=1.0):
    return Measurement(source="s", device="H100", model="llama-3.1-8b", metric="max_output_throughput", value=value,
                       unit="tok/s", value_si=value, row=1, framework="SGLang", tp=1, gpus=1, weight_format="fp8",
                       kv_format="fp8", compute_format="fp8", input_tokens=i, output_tokens=o, split="train")


def test_calibrate_holds_the_kernel_time_fixed_and_recovers_rows_generated_with_it():
    start = with_kernel_time(packaged_profile(), "SGLang")
    assert start.overheads["kernel_s"] == KERNEL_S["sglang"][0]
    assert with_kernel_time(packaged_profile(), "vLLM") is packaged_profile()
    truth = dataclasses.replace(start, entries={("H100", "fp8"): dict(gemm_eff_max=0.6, gemm_tokens_half=150.0,
                                                                       weight_bw_eff=0.85, kv_bw_eff=0.75)})
    rows = [_row(i, o) for i, o in ((128, 128), (128, 2048), (1000, 1000), (2048, 128), (5000, 500))]
    with jax.enable_x64(True):
        eff = efficiency_arrays([truth.fields("H100", "fp8")] * len(rows))
        values = np.asarray(jax.vmap(measured_throughput)(row_inputs(rows, 1024, 8192), eff))
    rows = [dataclasses.replace(m, value=float(v), value_si=float(v), row=k + 1)
            for k, (m, v) in enumerate(zip(rows, values))]
    fit = calibrate_framework(rows, "SGLang", file="synthetic.csv", sha256="-")
    assert fit.profile.overheads["kernel_s"] == KERNEL_S["sglang"][0]          # data, not a fitted field
    assert fit.profile.kernel_source == KERNEL_S["sglang"][1]
    assert np.max(np.abs(fit.after_pct)) < 1.0


@pytest.fixture(scope="module")
def lmsys():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from bench_layouts import LMSYS_DECODE_TOK_S_PER_NODE, lmsys_step_s

    from sweepkit.costmodel.layout import IMBALANCE_EPLB
    return lambda rows, overlap, prof: lmsys_step_s(rows, overlap=overlap, imbalance=IMBALANCE_EPLB, profile=prof), \
        LMSYS_DECODE_TOK_S_PER_NODE


def test_lmsys_ep72_decode_under_the_sglang_profile_is_within_25_percent(lmsys):
    # lmsys.org/blog/2025-05-05-large-scale-ep: 22,282 output tok/s per node, EP72 on 9 x 8 H100, 256 rows of
    # 2,000 cached tokens per GPU, two-batch overlap; the overlap's ablation: -27 % at 32 rows per GPU.
    step, measured = lmsys
    prof = profile_for("SGLang")
    per_node = 8 * 256 / step(256, True, prof)
    assert abs(per_node / measured - 1.0) < 0.25
    without = dataclasses.replace(prof, overheads={k: v for k, v in prof.overheads.items() if k != "kernel_s"})
    assert 8 * 256 / step(256, True, without) / measured - 1.0 > 0.40       # +43 % without the kernels' time
    assert step(32, False, prof) / step(32, True, prof) - 1.0 < -0.2         # the overlap costs at 32 rows


def test_a_prefill_node_test_is_one_prefill_step_of_its_prompts(lmsys):
    # LMSYS EP32 prefill: 16,384 tokens per GPU = 4 prompts of 4,096, 32 GPUs, two-batch overlap; input tok/s of
    # the 32 GPUs = 32 x 4 x 4,096 / t_step, t_step the bench's one prefill step (I = 1 on the "with" side).
    from bench_layouts import lmsys_prefill_step_s

    from sweepkit.validation import load_measurements
    from sweepkit.validation.profiles import profile_values
    from sweepkit.validation.levers import lever_parts, perfectly_balanced
    from sweepkit.validation.steady_rows import node_test, prefill_only

    rows = [m for m in load_measurements()[0] if m.pair_id == "LMS02"]
    assert len(rows) == 2 and all(prefill_only(m) and node_test(m) and m.concurrency == 4 for m in rows)
    with_, without = sorted(rows, key=lambda m: not m.lever.endswith(":with"))
    assert perfectly_balanced(with_) and not perfectly_balanced(without)
    assert lever_parts(with_, without) == [("expert balance", "")]          # the pair is expressed
    assert with_.value_si == pytest.approx(59337 / 8 * 32) and without.value_si == pytest.approx(50302 / 8 * 32)
    prof = profile_for("SGLang")
    got = profile_values([with_, without], [prof, prof])
    for v, imb in zip(got, (1.0, 1.3)):
        assert v == pytest.approx(32 * 4 * 4096 / lmsys_prefill_step_s(imb, prof), rel=1e-9)
    assert all(abs(v / m.value_si - 1.0) < 0.15 for v, m in zip(got, (with_, without)))
