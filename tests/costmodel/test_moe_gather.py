"""Gathered MoE tensor parallelism under attention data parallelism (SGLang ``--enable-dp-attention`` without an
all-to-all backend): the all-gather and combine against their ring closed form, no all-to-all, no imbalance.

SGLang gathers every DP rank's tokens before the MoE layer (python/sglang/srt/layers/dp_attention.py
``dp_gather``: an all-gather of the max-length-padded buffer, an all-reduce of the sum-length one in extend
batches) and all-reduces the experts' partial sums after it, each rank keeping its own slice
(``tensor_model_parallel_all_reduce`` then ``dp_scatter``; fused into one reduce-scatter by PR #22642, April
2026); the cookbook's server arguments: enable_dp_attention "DP for attention, TP for FFN (hybrid)"
(docs.sglang.io)."""

import dataclasses

import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.layout import check_layout, layout_work, make_layout
from sweepkit.costmodel.moe_comm import GATHER_COMBINE_PASSES, a2a_busy_s, moe_all_to_all, moe_gather
from sweepkit.costmodel.passes import decode_work
from sweepkit.costmodel.steps import instance, target_pass
from sweepkit.errors import InputError

pytestmark = pytest.mark.usefixtures("x64")
F = jnp.float64
DSV3, H200 = get_model("deepseek-v3"), get_device("H200")


def _gathered(**kw):
    return make_layout(H200, DSV3, 1, dp=8, ep=1, compute_format="fp8", dtype=F, **kw)


def test_gather_and_combine_match_the_ring_closed_form():
    # 256 decode rows per GPU of DeepSeek-V3 (D 7,168, BF16 activations) on 8 x H200 (NVLink 450 GB/s, 5 us a
    # step): one rank's chunk 256 x 7,168 x 2 = 3,670,016 B; all-gather (1 pass) + all-reduce (2 passes) of
    # 7 ring steps each: 3 x 7 x 3,670,016 B = 77,070,336 B, 171.27 us + 21 x 5 us = 276.27 us.
    lay, dev = _gathered(), device_arrays(H200, F)
    t, b = moe_gather(lay, dev, F(256), F(7168))
    assert float(lay.moe_tp) == 8.0 and GATHER_COMBINE_PASSES == 2.0
    assert float(b) == pytest.approx(3 * 7 * 256 * 7168 * 2, rel=1e-12)
    assert float(t) * 1e6 == pytest.approx(77_070_336 / 450e9 * 1e6 + 21 * 5.0, rel=1e-12)
    # a batch holding prompt tokens gathers by an all-reduce of the zero-filled buffer: one pass more
    t4, b4 = moe_gather(lay, dev, F(256), F(7168), F(1.0))
    assert float(b4) == pytest.approx(4 / 3 * float(b), rel=1e-12)
    assert float(t4) * 1e6 == pytest.approx(4 * 7 * 3_670_016 / 450e9 * 1e6 + 28 * 5.0, rel=1e-12)


def test_the_gathered_layout_pays_no_all_to_all_and_no_imbalance():
    lay, dev, net = _gathered(imbalance=1.3), device_arrays(H200, F), model_arrays(DSV3, F)
    t, b = moe_all_to_all(lay, dev, net, F(256))
    g_t, g_b = moe_gather(lay, dev, F(256), F(7168))
    assert (float(t), float(b)) == (float(g_t), float(g_b))
    assert float(a2a_busy_s(lay)) == 0.0
    d_f, d_w, _ = layout_work(lay, net, decode_work(F(2048 * 2000.0), F(2048.0)), F(1.0), F(1.0))
    assert float(d_f) == 0.0                                   # no busiest expert rank: I does not apply
    dense = float(net.matmul_params - net.experts_per_token * net.routed_expert_params)
    assert float(d_w) == pytest.approx(7 * dense, rel=1e-12)   # the dense weights once per DP rank, experts once
    # DEP8 over the same GPUs dispatches and combines by all-to-alls instead
    dep = make_layout(H200, DSV3, 1, dp=8, ep=8, imbalance=1.3, compute_format="fp8", dtype=F)
    assert float(dep.moe_tp) == 1.0 and float(moe_all_to_all(dep, dev, net, F(256))[0]) != pytest.approx(float(t))


def test_a_decode_step_prices_the_gather_in_place_of_the_moe_layers_all_reduces():
    # The same step as attention DP8 with gathered MoE TP and as attention DP8 with the MoE communication removed
    # (dp = 1 layouts do not gather): the difference is 58 MoE layers x one gather + combine.
    lay = _gathered()
    inst = instance(H200, DSV3, None, 1, "fp8", "fp8", "fp8", dtype=F, layout=lay)
    rows = 8 * 256.0
    t, _ = target_pass(inst, decode_work(F(rows * 2000.0), F(rows)))
    g_t, _ = moe_gather(lay, device_arrays(H200, F), F(256), F(7168))
    free = instance(H200, DSV3, None, 1, "fp8", "fp8", "fp8", dtype=F,
                    layout=dataclasses.replace(lay, moe_tp=F(1.0)))
    # moe_tp = 1 at ep = 1: the all-to-all path, which is 0 at ep = 1
    t_free, _ = target_pass(free, decode_work(F(rows * 2000.0), F(rows)))
    assert float(t - t_free) == pytest.approx(58 * float(g_t), rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([2, 4, 8]), st.floats(1.0, 4096.0))
def test_gather_time_grows_with_tokens_and_ranks(dp, tokens):
    lay = make_layout(H200, DSV3, 1, dp=dp, ep=1, dtype=F)
    dev = device_arrays(H200, F)
    t, _ = moe_gather(lay, dev, F(tokens), F(7168))
    t2, _ = moe_gather(lay, dev, F(tokens * 2), F(7168))
    assert 0.0 < float(t) < float(t2)
    if dp < 8:
        wider = make_layout(H200, DSV3, 1, dp=2 * dp, ep=1, dtype=F)
        assert float(moe_gather(wider, dev, F(tokens), F(7168))[0]) > float(t)


def test_attention_dp_takes_ep_1_or_ep_n_and_nothing_between():
    check_layout(DSV3, H200, 1, 8, 1, "demo")
    check_layout(DSV3, H200, 1, 8, 8, "demo")
    with pytest.raises(InputError, match="ep = 4 is not allowed with dp = 8; expected ep = tp x dp = 8 .* or ep = 1"):
        check_layout(DSV3, H200, 1, 8, 4, "demo")
