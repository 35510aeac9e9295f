"""Windowed attention (sliding window, chunked attention): KV read per pass, against closed forms.

A windowed layer reads at most W + 1 KV positions per row (Mistral 7B, arXiv 2310.06825 sec. 2: "the hidden
state in position i of layer k attends to all hidden states from the previous layer with positions between
i - W and i"); gpt-oss (arXiv 2508.10925 sec. 2) alternates a banded window of 128 with full attention.
"""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_model
from sweepkit.costmodel.arrays import model_arrays
from sweepkit.costmodel.passes import (attention_flops, chunk_work, decode_work, flops_and_bytes, kv_values_read,
                                      verify_work)

WINDOWED = ["gpt-oss-120b", "gpt-oss-20b", "mistral-7b", "llama-4-maverick"]


def _cost(model, work_fn, *args) -> tuple[float, float]:
    with jax.enable_x64(True):
        f = jnp.float64
        flops, b = flops_and_bytes(work_fn(*[f(a) for a in args]), model_arrays(model, f), f(2.0), f(2.0))
        return float(flops), float(b)


def _bytes(model, work_fn, *args) -> float:
    return _cost(model, work_fn, *args)[1]


def _full(model):
    """The same model with every layer attending to the whole context."""
    return dataclasses.replace(model, window_layers=0, sliding_window=0)


def test_gpt_oss_decode_reads_the_window_on_half_the_layers():
    # 8 rows x 4,096 cached: full layers read K = 32,776 positions, windowed ones 8 x 129 = 1,032.
    m = get_model("gpt-oss-120b")
    k, cap = 8 * 4096 + 8, 8 * 129
    saved = _bytes(_full(m), decode_work, 8 * 4096, 8) - _bytes(m, decode_work, 8 * 4096, 8)
    assert saved == pytest.approx((k - cap) * m.window_kv_bytes_per_token(2.0), rel=1e-12)


def test_mistral_long_context_decode_reads_w_plus_one_positions_per_row():
    # Every Mistral-7B layer has W = 4,096: a 32K-context decode of 4 rows reads 4 x 4,097 positions of KV.
    m = get_model("mistral-7b")
    kv = _bytes(m, decode_work, 4 * 32768, 4) - _bytes(m, decode_work, 0, 4) + 4 * m.kv_bytes_per_token(2.0)
    assert kv == pytest.approx(4 * 4097 * m.kv_bytes_per_token(2.0), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(WINDOWED), st.integers(0, 1 << 20), st.integers(1, 256), st.integers(1, 8))
def test_windows_never_read_more_and_equal_full_attention_inside_the_window(name, ctx, batch, positions):
    m = get_model(name)
    for fn, args in ((decode_work, (ctx, batch)), (verify_work, (ctx, batch, positions)), (chunk_work, (ctx, batch))):
        windowed, full = _cost(m, fn, *args), _cost(_full(m), fn, *args)
        assert windowed[0] <= full[0] * (1 + 1e-12) and windowed[1] <= full[1] * (1 + 1e-12)
        if ctx <= batch * m.sliding_window and fn is decode_work:   # every row within its window
            assert windowed == pytest.approx(full, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(WINDOWED), st.integers(0, 1 << 20), st.integers(1, 256))
def test_decode_bytes_grow_with_context_until_the_window_caps_them(name, ctx, batch):
    m = get_model(name)
    assert _bytes(m, decode_work, ctx + 1000, batch) >= _bytes(m, decode_work, ctx, batch)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["llama-3-8b", "mixtral-8x7b", "deepseek-v3", "qwen3-235b-a22b", "kimi-k2"]),
       st.floats(0, 1e7), st.floats(1, 1e4))
def test_models_without_windows_read_k_times_kv_exactly(name, ctx, batch):
    # Bit-for-bit the formula before windows existed: K x kv_values_per_token.
    with jax.enable_x64(True):
        m = model_arrays(get_model(name), jnp.float64)
        work = decode_work(jnp.float64(ctx), jnp.float64(batch))
        assert float(kv_values_read(work, m)) == float(work.kv_tokens * m.kv_values_per_token)


def test_gpt_oss_prefill_attention_flops_on_windowed_layers():
    # A 2,048-token chunk after 30,720 cached: A = 2,048 x (2 x 30,720 + 2,049); the 18 windowed layers of
    # gpt-oss-120b (q = 64 x 64) do 2 x 2,048 x 129 pairs each, the 18 full layers all A.
    m = get_model("gpt-oss-120b")
    a, capped = 2048 * (2 * 30720 + 2049), 2 * 2048 * 129
    expected = 2 * 18 * 4096 * a + 2 * 18 * 4096 * capped
    with jax.enable_x64(True):
        got = attention_flops(chunk_work(jnp.float64(30720), jnp.float64(2048)), model_arrays(m, jnp.float64))
    assert float(got) == pytest.approx(expected, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["llama-3-8b", "mixtral-8x7b", "deepseek-v3", "qwen3-235b-a22b"]),
       st.floats(0, 1e7), st.floats(1, 1e4), st.floats(1, 8))
def test_models_without_windows_do_2_l_q_a_exactly(name, ctx, batch, positions):
    with jax.enable_x64(True):
        m = model_arrays(get_model(name), jnp.float64)
        work = verify_work(jnp.float64(ctx), jnp.float64(batch), jnp.float64(positions))
        assert float(attention_flops(work, m)) == float(2.0 * m.n_layers * m.q_dim * work.attn_pairs)


def test_kv_capacity_still_counts_every_layer():
    # The cache is sized for the full context on every layer (a paged cache without per-layer eviction).
    m = model_arrays(get_model("gpt-oss-120b"))
    assert float(m.kv_values_per_token) == 2 * 36 * 8 * 64 and float(m.window_kv_values_per_token) == 2 * 18 * 8 * 64
    assert float(m.window_tokens) == 128.0
