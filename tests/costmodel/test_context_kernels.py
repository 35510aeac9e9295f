"""The fixed time of each kernel of a context pass run without a CUDA graph (``context_kernel_s``, t_k,ctx):
the class it adds to, the profile that carries it (TensorRT-LLM's gptSessionBenchmark rows) and a first-token
latency it prices in closed form."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import (CONTEXT_KERNEL_FIELD, framework_key, packaged_profile, parse_profile,
                                           profile_for, profile_toml)
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time_by_class
from sweepkit.costmodel.kernels import layer_kernels
from sweepkit.costmodel.passes import Work, chunk_work, decode_work
from sweepkit.errors import InputError
from sweepkit.validation import parse_measurements
from sweepkit.validation.kernel_fit import with_kernel
from sweepkit.validation.serving_points import engine_profile

GPTSESSION = "TensorRT-LLM v0.9.0 (gptSessionBenchmark, static batching)"


def _parts(decode: bool, prefill_tokens: float, kernel_s: float, context_kernel_s: float, speedup: float = 2.0):
    f = jnp.float64
    fields = dict(packaged_profile().fields("H200", "fp8"), kernel_s=kernel_s, context_kernel_s=context_kernel_s)
    with jax.enable_x64(True):
        z = Work(f(0.0), f(0.0), f(0.0))
        d = decode_work(f(16 * 1000.0), f(16.0)) if decode else z
        p = chunk_work(f(0.0), f(prefill_tokens)) if prefill_tokens else z
        return {k: float(v) for k, v in step_time_by_class(
            d, p, model_arrays(get_model("llama-2-7b"), f), device_arrays(get_device("H200"), f),
            efficiency_arrays(fields, f), f(1.0), f(1.0), f(1.0), f(speedup)).items()}


def test_a_context_pass_adds_layers_times_kernels_times_t_k_ctx():
    # Llama-2-7B in FP8: 32 layers x (10 + 4) kernels = 448; at t_k,ctx = 6.5 us, 2.912 ms per context pass
    n, q = layer_kernels(get_model("llama-2-7b"))
    assert (n, q) == (10.0, 4.0)
    assert _parts(False, 128.0, 0.0, 6.5e-6)["kernels"] == pytest.approx(32 * 14 * 6.5e-6, rel=1e-12)
    assert _parts(False, 128.0, 0.0, 6.5e-6)["kernels"] == pytest.approx(2.912e-3, rel=1e-12)
    # bf16 GEMMs quantise nothing: 320 kernels
    assert _parts(False, 2048.0, 0.0, 6.5e-6, speedup=1.0)["kernels"] == pytest.approx(320 * 6.5e-6, rel=1e-12)
    # on top of t_k, which every pass pays
    assert _parts(True, 128.0, 1e-6, 6.5e-6)["kernels"] == pytest.approx(448 * 7.5e-6, rel=1e-12)
    # a decode-only step pays t_k alone: graphs capture generation steps
    assert _parts(True, 0.0, 1e-6, 6.5e-6)["kernels"] == pytest.approx(448 * 1e-6, rel=1e-12)
    assert _parts(True, 0.0, 0.0, 6.5e-6)["kernels"] == 0.0
    # every other class is unchanged
    base = _parts(False, 128.0, 0.0, 0.0)
    assert {k: v for k, v in _parts(False, 128.0, 0.0, 6.5e-6).items() if k != "kernels"} == \
        {k: v for k, v in base.items() if k != "kernels"}


def test_gptsession_rows_get_their_own_profile_and_other_rows_do_not():
    assert framework_key(GPTSESSION) == "tensorrt-llm-gptsession"
    assert framework_key("TensorRT-LLM v0.17 (trtllm-bench)") == "tensorrt-llm"
    p = profile_for(GPTSESSION)
    assert p.overheads[CONTEXT_KERNEL_FIELD] == pytest.approx(6.5e-6)
    assert CONTEXT_KERNEL_FIELD not in profile_for("TensorRT-LLM").overheads
    assert CONTEXT_KERNEL_FIELD not in profile_for("TensorRT-LLM v0.14 + Triton tensorrtllm_backend").overheads
    # every other field is the shipped TensorRT-LLM profile's
    trt = profile_for("TensorRT-LLM")
    assert p.default == trt.default and p.entries == trt.entries
    assert {k: v for k, v in p.overheads.items() if k != CONTEXT_KERNEL_FIELD} == trt.overheads
    m = parse_measurements("source,device,model,metric,value,unit,framework,input_tokens,output_tokens,concurrency\n"
                           f's,H200,llama-2-7b,ttft,5.7,ms,"{GPTSESSION}",128,1,1\n', "demo.csv")[0]
    assert engine_profile(m).name == "tensorrt-llm-gptsession"


def test_the_field_round_trips_and_a_bad_value_is_refused():
    p = profile_for(GPTSESSION)
    back = parse_profile(profile_toml(p), "round-trip")
    assert back.overheads == p.overheads
    text = profile_toml(p).replace("context_kernel_s = 6.5e-06", "context_kernel_s = 0.5")
    with pytest.raises(InputError, match=r"round-trip \[framework\].*context_kernel_s.*\[0, 0.001\]"):
        parse_profile(text, "round-trip")
    with pytest.raises(InputError, match="kernel field 'gemm_eff_max'"):
        with_kernel(p, 1e-6, "x", field="gemm_eff_max")
    assert with_kernel(p, 2e-6, "x", CONTEXT_KERNEL_FIELD).overheads[CONTEXT_KERNEL_FIELD] == 2e-6
