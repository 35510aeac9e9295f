"""Hybrid linear attention (Gated DeltaNet beside full attention): FLOPs, bytes and capacity against closed forms.

Gated delta rule per token and value head (Yang, Kautz, Hatamizadeh, arXiv 2412.06464, eq. 10): S k (2 d_k d_v),
alpha S (d_k d_v), rank-one update (2 d_k d_v), S q (2 d_k d_v) = 7 d_k d_v FLOPs, plus the causal convolution's
2 K FLOPs per channel; the state (H_v d_k d_v values, float32 in Qwen3.5's config ``mamba_ssm_dtype``) and the
convolution's last K - 1 inputs (bf16) are read and written once per sequence and pass. Qwen3.5-9B (HF
Qwen/Qwen3.5-9B config.json): 32 layers, 24 Gated DeltaNet (H_k 16, H_v 32, d_k = d_v = 128, K 4), 8 gated
full-attention layers (H 16, H_kv 4, d_h 256), dense FFN.
"""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_draft, get_model
from sweepkit.costmodel.arrays import model_arrays
from sweepkit.costmodel.kernels import layer_kernels
from sweepkit.costmodel.layout import layout_work, make_layout
from sweepkit.costmodel.memory import kv_bytes_per_token, sequence_positions, state_positions
from sweepkit.costmodel.passes import (attention_flops, chunk_work, combine, decode_work, flops_and_bytes,
                                      kv_bytes_read, verify_work)
from sweepkit.evaluate import evaluate

F_LAYER = 7 * 32 * 128 * 128 + 2 * 4 * (2 * 16 * 128 + 32 * 128)      # 3,735,552 FLOPs per token and layer
S_LAYER = 32 * 128 * 128 * 4 + (4 - 1) * (2 * 16 * 128 + 32 * 128) * 2  # 2,146,304 B per sequence and layer


def _f(x):
    return jnp.float64(x)


def _arrays(model):
    return model_arrays(model, jnp.float64)


def _price(model, work_fn, *args, w=2.0, kv=2.0):
    with jax.enable_x64(True):
        f, b = flops_and_bytes(work_fn(*[_f(a) for a in args]), _arrays(model), _f(w), _f(kv))
        return float(f), float(b)


def test_one_linear_layer_closed_form():
    assert (F_LAYER, S_LAYER) == (3_735_552, 2_146_304)
    m = get_model("qwen3.5-35b-a3b").with_layers(2)                    # one linear layer, one full layer
    assert (m.linear_layers, m.attention_layers) == (1, 1)
    with jax.enable_x64(True):
        net = _arrays(m)
        # one decode row at 1,000 cached: the full layer's 2 q A = 2 x 4,096 x 2 x 1,001, the linear layer's F_lin
        work = decode_work(_f(1000.0), _f(1.0))
        assert float(attention_flops(work, net)) == 2 * 4096 * 2 * 1001 + F_LAYER
        # KV of the full layer (2 x 2 x 256 values, bf16) plus the state read and written once
        assert float(kv_bytes_read(work, net, _f(2.0))) == 1001 * 1024 * 2 + 2 * S_LAYER


def test_qwen35_9b_decode_pass_closed_form():
    m = get_model("qwen3.5-9b")
    b, ctx = 8, 8 * 4096
    flops, bytes_ = _price(m, decode_work, ctx, b)
    p_mm = m.matmul_params
    assert flops == 2 * p_mm * b + 2 * 8 * 4096 * 2 * (ctx + b) + b * 24 * F_LAYER
    assert bytes_ == p_mm * 2 + b * 4096 * 2 + (ctx + b) * 16_384 * 2 + 2 * b * 24 * S_LAYER


def test_prefill_chunks_are_linear_in_the_prompt_on_linear_layers():
    # A chunk of n new tokens: the full layers' pairs grow as n^2, the linear layers' work as n, and the
    # chunk reads and writes one sequence's state.
    m = get_model("qwen3.5-9b")
    with jax.enable_x64(True):
        net = _arrays(m)
        for n in (512.0, 4096.0):
            work = chunk_work(_f(0.0), _f(n))
            assert float(attention_flops(work, net)) == 2 * 8 * 4096 * n * (n + 1) + n * 24 * F_LAYER
            assert float(kv_bytes_read(work, net, _f(2.0))) == n * 16_384 * 2 + 2 * 24 * S_LAYER
        two = combine(chunk_work(_f(0.0), _f(64.0)), verify_work(_f(640.0), _f(5.0), _f(4.0)))
        assert float(two.rows) == 6.0


def test_state_positions_and_the_decode_grid_fit():
    m = get_model("qwen3.5-35b-a3b")
    with jax.enable_x64(True):
        t, none = _arrays(m), _arrays(get_draft("none", m))
        assert float(kv_bytes_per_token(t, none, _f(2.0))) == 20_480.0
        assert float(state_positions(t, none, _f(2.0))) == 64_389_120 / 20_480 == 3_144.0
        assert float(sequence_positions(t, none, _f(1024.0), _f(2.0))) == 1024.0 + 3_144.0
    cap = evaluate(device="H200", model="qwen3.5-35b-a3b", batch=1, context=1024)["kv_capacity_tokens"]
    fits = int(cap // (1024 + 1 + 3_144))                              # rows whose KV and state fit
    assert evaluate(device="H200", model="qwen3.5-35b-a3b", batch=fits, context=1024)["fits_in_memory"]
    assert not evaluate(device="H200", model="qwen3.5-35b-a3b", batch=fits + 1, context=1024)["fits_in_memory"]
    assert fits < cap // 1025                                          # fewer rows than the KV alone allows


def _all_full(model):
    return dataclasses.replace(model, linear_layers=0)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["qwen3.5-9b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"]), st.integers(1, 64),
       st.integers(1, 1 << 17), st.integers(1, 1 << 17))
def test_hybrid_cost_grows_with_context_slower_than_all_full_attention(name, b, ctx, more):
    hybrid = get_model(name)
    full = _all_full(hybrid)
    grow = [tuple(x - y for x, y in zip(_price(m, decode_work, b * (ctx + more), b),
                                        _price(m, decode_work, b * ctx, b))) for m in (hybrid, full)]
    (f_h, b_h), (f_f, b_f) = grow
    assert 0.0 < f_h < f_f and 0.0 < b_h < b_f
    # the full layers' share: L_a / L of the all-full-attention growth, exactly
    ratio = hybrid.attention_layers / hybrid.n_layers
    assert f_h == pytest.approx(ratio * f_f, rel=1e-9) and b_h == pytest.approx(ratio * b_f, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["qwen3-30b-a3b", "llama-3.1-8b", "gpt-oss-20b", "deepseek-v3.2"]), st.integers(1, 64),
       st.integers(0, 1 << 17), st.integers(0, 4096))
def test_a_model_without_linear_layers_prices_exactly_as_before(name, b, ctx, prompt):
    # no linear layers: L_a = L, F_lin = s_lin = 0, so the hybrid terms vanish bit for bit whatever R is
    m = get_model(name)
    with jax.enable_x64(True):
        net = _arrays(m)
        assert float(net.attention_layers) == m.n_layers and float(net.linear_state_bytes) == 0.0
        work = combine(decode_work(_f(b * ctx), _f(b)), chunk_work(_f(0.0), _f(prompt)))
        f, by = flops_and_bytes(work, net, _f(2.0), _f(2.0))
        f0, by0 = flops_and_bytes(dataclasses.replace(work, rows=_f(0.0)), net, _f(2.0), _f(2.0))
        assert (float(f), float(by)) == (float(f0), float(by0))


def test_kernels_of_a_hybrid_layer():
    # 30 Gated DeltaNet mixers of 8 kernels and 10 gated attention blocks of 6 + 1, each with a MoE FFN of
    # 4 + 4 routing + 3 shared-expert kernels; 4 quantisations + 1 for the shared experts (sweepkit.costmodel.kernels)
    assert layer_kernels(get_model("qwen3.5-35b-a3b")) == ((30 * 8 + 10 * 7) / 40 + 4 + 4 + 3, 5.0) == (18.75, 5.0)
    assert layer_kernels(get_draft("mtp", get_model("qwen3.5-9b")).model) == (7 + 4, 4.0)


def test_attention_tp_copies_the_kv_not_the_state():
    # Qwen3.5-35B-A3B (H_kv = 2) on TP4: each token's KV on r_kv = 2 ranks; the state split by value heads
    m = get_model("qwen3.5-35b-a3b")
    with jax.enable_x64(True):
        lay = make_layout(get_device("H200"), m, 4, dtype=jnp.float64)
        assert float(lay.kv_replicas) == 2.0
        net = _arrays(m)
        work = decode_work(_f(8 * 4096.0), _f(8.0))
        _, _, d_other = layout_work(lay, net, work, _f(2.0), _f(2.0))
        assert float(d_other) == (8 * 4096 + 8) * 20_480.0
