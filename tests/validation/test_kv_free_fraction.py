"""The KV pool a TensorRT-LLM row sizes: the free-memory fraction it states, and the same rule under an EP /
attention-DP layout (the DeepSeek-R1 DEP8 rows of NVIDIA's best-performance blog)."""

from __future__ import annotations

import dataclasses

import jax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_format, get_model
from sweepkit.errors import InputError
from sweepkit.validation import Measurement
from sweepkit.validation.levers import stated_kv_free_fraction
from sweepkit.validation.steady_rows import kv_free_fraction, row_inputs
from sweepkit.validation.steady_sizes import kv_positions, request_positions, running

FP8_ROW = "flags: --tp 8 --ep 8 --max_batch_size 896 --max_num_tokens 2048 --kv_cache_free_gpu_mem_fraction 0.93"


def _dep8(notes: str = FP8_ROW, framework: str = "TensorRT-LLM (PyTorch backend, trtllm-bench)") -> Measurement:
    """NVIDIA/TensorRT-LLM docs/source/blogs/Best_perf_practice_on_DeepSeek-R1_in_TensorRT-LLM.md, 'B200
    max-throughput for R1-0528 with FP8 KV cache' (DEP8, 1,024 in / 2,048 out, concurrency 7,168)."""
    return Measurement(source="s", device="B200", model="deepseek-v3", metric="max_output_throughput",
                       value=43146.2042, unit="tok/s", value_si=43146.2042, row=7, framework=framework, tp=8,
                       gpus=8, weight_format="fp4", kv_format="fp8", compute_format="fp4", input_tokens=1024,
                       output_tokens=2048, requests=114688, concurrency=7168, notes=notes, ep=8, dp=8)


def _one(m: Measurement):
    return jax.tree_util.tree_map(lambda a: a[0], row_inputs([m], 1024.0, 8192.0))


def test_the_stated_fraction_is_read_for_tensorrt_llm_only():
    assert stated_kv_free_fraction(_dep8()) == 0.93
    assert stated_kv_free_fraction(_dep8(notes="flags: --kv_cache_free_gpu_mem_fraction=0.85")) == 0.85
    assert stated_kv_free_fraction(_dep8(notes="flags: --tp 8")) is None
    assert stated_kv_free_fraction(_dep8(framework="vLLM v0.11.0")) is None
    assert kv_free_fraction(_dep8()) == 0.93
    assert kv_free_fraction(_dep8(notes="flags: --tp 8")) == 0.9          # TensorRT-LLM's default
    assert kv_free_fraction(_dep8(framework="vLLM v0.11.0")) == 0.0       # the engine's rule


@pytest.mark.parametrize("bad", ["1.5", "0", "0.9.1"])
def test_a_fraction_outside_0_1_is_a_one_line_error(bad):
    with pytest.raises(InputError, match=r"s row 7: notes: --kv_cache_free_gpu_mem_fraction = .* \(0, 1\]"):
        stated_kv_free_fraction(_dep8(notes=f"flags: --kv_cache_free_gpu_mem_fraction {bad}"))


def test_dep8_capacity_is_the_stated_fraction_of_what_the_layout_leaves():
    # C = f (HBM x 8 - W_layout) / kv_token, W_layout = (P + 7 P_rep) w: the non-expert weights once per DP rank
    # (layout.layout_resident_bytes); kv_token = 61 x (512 + 64) x 1 B (FP8 MLA latent)
    model, dev = get_model("deepseek-v3"), get_device("B200")
    w = get_format("fp4").bytes_per_value
    p_rep = model.resident_params - model.n_experts * model.routed_expert_params
    weights = (model.resident_params + 7 * p_rep) * w
    kv_token = 61 * (512 + 64) * 1.0
    with jax.enable_x64(True):
        row = _one(_dep8())
        assert float(kv_positions(row)) == pytest.approx(0.93 * (8 * dev.hbm_capacity_bytes - weights) / kv_token,
                                                         rel=1e-9)
        # 1,098 requests of 3,072 positions a rank: the stated 896 a rank fit, so n = 7,168
        assert float(kv_positions(row) / request_positions(row)) / 8 == pytest.approx(1098.4, abs=0.1)
        assert float(running(row)) == pytest.approx(7168.0)


def test_without_a_framework_fraction_the_layout_keeps_the_engine_rule():
    from sweepkit.costmodel.layout import layout_kv_capacity_tokens

    with jax.enable_x64(True):
        row = _one(_dep8(framework="vLLM v0.11.0"))
        absent = jax.tree_util.tree_map(lambda a: 0.0 * a, row.model)
        engine = layout_kv_capacity_tokens(row.layout, row.device, row.tp * row.layout.dp, row.model, absent,
                                           row.weight_bytes, row.kv_bytes)
        assert float(kv_positions(row)) == float(engine)


@settings(max_examples=15, deadline=None)
@given(f=st.floats(0.05, 1.0))
def test_dep8_capacity_is_linear_in_the_fraction(f):
    with jax.enable_x64(True):
        row = _one(_dep8())
        at = dataclasses.replace(row, kv_free_fraction=jax.numpy.asarray(f))
        assert float(kv_positions(at)) == pytest.approx(float(kv_positions(row)) * f / 0.93, rel=1e-9)
