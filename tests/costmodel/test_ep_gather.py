"""A DEP layout's MoE exchange as an all-gather and a reduce-scatter (``exchange = "gather"``): TensorRT-LLM's
attention-DP MoE without an all-to-all backend all-gathers every rank's quantized tokens, their scales and
routing before the fused MoE and reduce-scatters its output after it
(tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py, ``use_dp and parallel_size > 1``: ``allgather([x,
x_sf, token_selected_experts, token_final_scales], ...)``; its wide-EP backend uses all-to-alls instead). The
closed form of the ring passes, the NVFP4 bytes, which tokens it moves, and that the all-to-all default is
unchanged."""

import dataclasses

import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.layout import EXCHANGES, NVFP4_BYTES, make_layout
from sweepkit.costmodel.moe_comm import COMBINE_LATENCY_S, DISPATCH_LATENCY_S, a2a_busy_s, all_to_all_bytes, \
    all_to_all_s, ep_gather, moe_all_to_all
from sweepkit.costmodel.passes import decode_work
from sweepkit.costmodel.steps import instance, target_pass
from sweepkit.errors import InputError

pytestmark = pytest.mark.usefixtures("x64")
F = jnp.float64
DSR1, B200, H200 = get_model("deepseek-v3"), get_device("B200"), get_device("H200")


def _dep8(device=B200, fmt="fp4", exchange="gather", **kw):
    return make_layout(device, DSR1, 1, dp=8, ep=8, compute_format=fmt, exchange=exchange, dtype=F, **kw)


def test_the_gather_matches_its_ring_closed_form():
    # NVFP4 DEP8 on B200 (NVLink 900 GB/s, 5 us a step), 384 tokens a rank (D 7,168): the all-gather moves
    # 7 chunks of 384 x 7,168 x 0.5625 B, the reduce-scatter 7 of 384 x 7,168 x 2 B:
    # 7 x 384 x 7,168 x 2.5625 = 49,373,184 B, 54.86 us + 14 x 5 us = 124.86 us per MoE layer.
    lay, dev = _dep8(), device_arrays(B200, F)
    assert float(lay.dispatch_bytes) == NVFP4_BYTES == 0.5625 and float(lay.exchange) == 1.0
    t, b = ep_gather(lay, dev, F(384), F(7168))
    assert float(b) == 49_373_184
    assert float(t) * 1e6 == pytest.approx(49_373_184 / 900e9 * 1e6 + 14 * 5.0, rel=1e-12)
    # FP8 tokens are gathered at 1 B a value (DeepSeek-R1 FP8 DEP8 on H200, NVLink 450 GB/s): 7 x 128 x 7,168 x 3
    t8, b8 = ep_gather(_dep8(H200, "fp8"), device_arrays(H200, F), F(128), F(7168))
    assert float(b8) == 7 * 128 * 7168 * 3
    assert float(t8) * 1e6 == pytest.approx(7 * 128 * 7168 * 3 / 450e9 * 1e6 + 70.0, rel=1e-12)


def test_the_gather_moves_the_mean_rank_and_ignores_the_imbalance():
    # every rank receives every token, so the busiest rank's prompt does not stretch it beyond the total, and
    # the expert load (I) is the MoE compute's, not the exchange's
    dev, net = device_arrays(B200, F), model_arrays(DSR1, F)
    lay = _dep8(imbalance=1.3)
    t, b = moe_all_to_all(lay, dev, net, F(1408), F(1.0), F(576))
    g_t, g_b = ep_gather(lay, dev, F(576), F(7168))
    assert (float(t), float(b)) == (float(g_t), float(g_b))
    t1, _ = moe_all_to_all(dataclasses.replace(lay, imbalance=F(1.0)), dev, net, F(1408), F(1.0), F(576))
    assert float(t1) == float(t)
    # no DeepEP send / receive kernels: nothing of it occupies the SMs under two-batch overlap
    assert float(a2a_busy_s(lay)) == 0.0
    assert float(a2a_busy_s(_dep8(exchange="all-to-all"))) == pytest.approx(DISPATCH_LATENCY_S + COMBINE_LATENCY_S)


def test_the_all_to_all_default_is_unchanged():
    # exchange "all-to-all" (the default) prices DeepEP-style dispatch (FP8) and combine (BF16) all-to-alls of the
    # busiest rank's sends, whatever mean is passed
    dev, net = device_arrays(B200, F), model_arrays(DSR1, F)
    lay = make_layout(B200, DSR1, 1, dp=8, ep=8, compute_format="fp4", dtype=F)
    assert float(lay.exchange) == 0.0 and float(lay.dispatch_bytes) == 1.0
    k, d = net.experts_per_token, net.d_model
    want = (all_to_all_s(lay, dev, all_to_all_bytes(lay, F(384), d, k, F(1.0)), DISPATCH_LATENCY_S)
            + all_to_all_s(lay, dev, all_to_all_bytes(lay, F(384), d, k, F(2.0)), COMBINE_LATENCY_S))
    for mean in (None, F(100.0)):
        assert float(moe_all_to_all(lay, dev, net, F(384), 0.0, mean)[0]) == pytest.approx(float(want), rel=1e-12)


def test_a_decode_step_prices_the_gather_in_place_of_the_all_to_alls():
    # the same DEP8 decode step with either exchange differs by 58 MoE layers x (gather - all-to-all)
    rows, dev, net = 8 * 384.0, device_arrays(B200, F), model_arrays(DSR1, F)
    work = decode_work(F(rows * 2000.0), F(rows))
    times = {}
    for ex in EXCHANGES:
        lay = _dep8(exchange=ex, imbalance=1.0)
        times[ex] = float(target_pass(instance(B200, DSR1, None, 1, "fp4", "fp8", "fp4", dtype=F, layout=lay),
                                      work)[0])
    a2a = float(moe_all_to_all(_dep8(exchange="all-to-all", imbalance=1.0), dev, net, F(384))[0])
    gather = float(ep_gather(_dep8(imbalance=1.0), dev, F(384), F(7168))[0])
    assert times["gather"] - times["all-to-all"] == pytest.approx(58 * (gather - a2a), rel=1e-9)


def test_an_unknown_exchange_is_refused_in_one_line():
    with pytest.raises(InputError, match=r"exchange = 'ring' is not allowed; expected one of all-to-all, gather"):
        _dep8(exchange="ring")


@settings(max_examples=30, deadline=None)
@given(t=st.floats(1.0, 4096.0), scale=st.floats(1.01, 8.0), ep=st.sampled_from([2, 4, 8]))
def test_the_gather_grows_linearly_with_the_tokens(t, scale, ep):
    lay = make_layout(B200, DSR1, 1, dp=ep, ep=ep, compute_format="fp4", exchange="gather", dtype=F)
    dev = device_arrays(B200, F)
    t0, b0 = ep_gather(lay, dev, F(0.0), F(7168))
    t1, b1 = ep_gather(lay, dev, F(t), F(7168))
    t2, b2 = ep_gather(lay, dev, F(t * scale), F(7168))
    assert float(b0) == 0.0 and float(t0) == pytest.approx(2 * (ep - 1) * 5e-6, rel=1e-12)   # latency alone
    assert float(b2) == pytest.approx(scale * float(b1), rel=1e-9)
    assert float(t2 - t0) == pytest.approx(scale * float(t1 - t0), rel=1e-9)
