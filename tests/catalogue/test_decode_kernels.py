"""Decode-attention kernels per framework release (sweepkit.catalogue.decode_kernels) and their price."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import decode_kernels, get_device, get_model
from sweepkit.catalogue.decode_kernels import kernel_table, release_of, vector_decode_eff
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time_by_class
from sweepkit.costmodel.passes import Work, decode_work
from sweepkit.errors import InputError

V09 = "TensorRT-LLM v0.9.0 (gptSessionBenchmark, static batching)"
FIELDS = dict(gemm_eff_max=0.7, gemm_tokens_half=0.0, moe_eff_max=0.5, moe_tokens_half=16.0, attn_prefill_eff=0.8,
              weight_bw_eff=0.8, kv_bw_eff=0.8, link_eff=1.0, allreduce_overhead_s=0.0, tp_loss=0.0,
              step_overhead_s=0.0, token_overhead_s=0.0)


def _shape(name):
    m = get_model(name)
    return m.n_heads, m.n_kv_heads, m.head_dim


def test_releases_are_read_after_the_framework_word():
    assert release_of(V09) == (0, 9)
    assert release_of("TensorRT-LLM v0.14 + Triton tensorrtllm_backend") == (0, 14)
    assert release_of("TensorRT-LLM (PyTorch backend, trtllm-bench, commit b6261862)") is None
    assert release_of("TensorRT-LLM") is None and release_of("") is None


def test_v0_9_runs_masked_mha_where_its_xqa_check_fails():
    # DecoderXQARunner::shouldUse at v0.9: head 128 / 256 and 8 or 1 query heads per KV head
    assert vector_decode_eff(V09, *_shape("mistral-7b"), "fp8") == 0.1            # 32 / 8 = 4
    assert vector_decode_eff(V09, *_shape("mixtral-8x7b"), "bf16") == 0.2         # 4
    assert _shape("falcon-180b") == (232, 8, 64)
    assert vector_decode_eff(V09, *_shape("falcon-180b"), "bf16") == 0.2          # 29, head 64
    assert vector_decode_eff(V09, *_shape("llama-2-70b"), "fp8") == 0.0           # 8, head 128: XQA
    assert vector_decode_eff(V09, *_shape("gpt-j-6b"), "fp8") == 0.0              # MHA, head 256
    assert vector_decode_eff(V09, *_shape("llama-2-7b"), "bf16") == 0.0           # MHA, head 128


def test_later_releases_other_frameworks_and_unpriced_formats_keep_tensor_cores():
    shape = _shape("mistral-7b")
    for fw in ("TensorRT-LLM v0.14 + Triton tensorrtllm_backend", "TensorRT-LLM v0.10", "TensorRT-LLM",
               "TensorRT-LLM (PyTorch backend)", "vLLM 0.4.0", "SGLang 0.3"):
        assert vector_decode_eff(fw, *shape, "fp8") == 0.0, fw
    assert vector_decode_eff("TensorRT-LLM v0.8.0", *shape, "fp8") == 0.1       # 'through' 0.9 covers 0.8
    assert vector_decode_eff(V09, *shape, "int8") == 0.0                         # no vector_eff for int8
    assert vector_decode_eff(V09, 32, 0, 128, "fp8") == 0.0


def test_every_entry_cites_its_source():
    for entries in kernel_table().values():
        for e in entries:
            assert "github.com/NVIDIA/TensorRT-LLM" in e["source"] and "train split" in e["vector_eff_source"]


def test_a_bad_table_is_one_line(monkeypatch):
    monkeypatch.setattr(decode_kernels, "read_packaged",
                        lambda _: {"framework": {"x": [{"through": "0.9", "vector_eff": {"fp8": 2.0}}]}})
    kernel_table.cache_clear()
    try:
        with pytest.raises(InputError, match=r"vector_eff.fp8 = 2.0 is not allowed"):
            kernel_table()
        monkeypatch.setattr(decode_kernels, "read_packaged", lambda _: {"framework": {"x": [{"through": "new"}]}})
        kernel_table.cache_clear()
        with pytest.raises(InputError, match="through = 'new' is not a release"):
            kernel_table()
    finally:
        monkeypatch.undo()
        kernel_table.cache_clear()


def _attn_decode(model, ctx, batch, e_vec, device="H100", tp=1.0):
    with jax.enable_x64(True):
        f = jnp.float64
        eff = efficiency_arrays({**FIELDS, "vector_decode_eff": e_vec}, f)
        parts = step_time_by_class(decode_work(f(ctx), f(batch)), Work(0.0, 0.0, 0.0),
                                   model_arrays(get_model(model), f), device_arrays(get_device(device), f), eff,
                                   f(tp), f(1.0), f(1.0), f(2.0))
        return float(parts["attn_decode"])


def test_masked_mha_prices_the_decode_flops_on_the_fp32_peak():
    # Mistral-7B fp8 KV on one H100, 120 rows at 1,152 cached tokens (the v0.9 128/2048 row at its mean
    # context): 2 L q A = 2 x 32 x 4,096 x 2 x (138,240 + 120) = 72.57 GFLOP over 67 TF x 0.12 = 9.03 ms,
    # against the KV read (138,360 x 65,536 B) / (0.8 x 3.35 TB/s) = 3.38 ms on tensor cores.
    ctx, b = 120 * 1152.0, 120.0
    flops = 2 * 32 * 4096 * 2 * (ctx + b)
    kv = (ctx + b) * 2 * 32 * 8 * 128 / (0.8 * 3.35e12)
    assert _attn_decode("mistral-7b", ctx, b, 0.0) == pytest.approx(kv, rel=1e-9)
    assert _attn_decode("mistral-7b", ctx, b, 0.12) == pytest.approx(flops / (67e12 * 0.12), rel=1e-9)
    assert (flops / (67e12 * 0.12), kv) == pytest.approx((9.03e-3, 3.38e-3), rel=2e-3)
    # under MHA the same kernel stays KV-bound: Llama-2-7B reads 4x Mistral's KV for the same FLOPs
    assert _attn_decode("llama-2-7b", ctx, b, 0.12) == pytest.approx(_attn_decode("llama-2-7b", ctx, b, 0.0))
    # a device without a catalogued FP32 peak keeps the tensor-core roofline
    assert get_device("B200").vector_flops_per_s == 0.0
    assert _attn_decode("mistral-7b", ctx, b, 0.12, "B200") == _attn_decode("mistral-7b", ctx, b, 0.0, "B200")


@settings(max_examples=25, deadline=None)
@given(ctx=st.floats(0.0, 1e6, allow_subnormal=False), batch=st.floats(1.0, 1024.0), e=st.floats(0.01, 1.0), tp=st.sampled_from([1.0, 8.0]))
def test_a_cuda_core_kernel_never_prices_decode_below_the_tensor_core_roofline(ctx, batch, e, tp):
    base = _attn_decode("falcon-180b", ctx, batch, 0.0, tp=tp)
    vec = _attn_decode("falcon-180b", ctx, batch, e, tp=tp)
    assert vec >= base * (1 - 1e-12)
    flops = 2 * 80 * 14848 * 2 * (ctx + batch)
    assert vec == pytest.approx(max(base, flops / (67e12 * tp * e)), rel=1e-9)
