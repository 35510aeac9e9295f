"""Redundant experts (EPLB slots) and two-batch overlap in the layouts, against closed forms."""

import dataclasses

import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import packaged_profile
from sweepkit.costmodel.arrays import model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays
from sweepkit.costmodel.layout import (check_layout, layout_resident_bytes, layout_work, make_layout,
                                       per_gpu_weight_bytes)
from sweepkit.costmodel.moe_comm import (COMBINE_LATENCY_S, DISPATCH_LATENCY_S, all_to_all_bytes, all_to_all_s,
                                         overlapped)
from sweepkit.costmodel.passes import decode_work, experts_read
from sweepkit.costmodel.steps import instance, target_pass
from sweepkit.errors import InputError

pytestmark = pytest.mark.usefixtures("x64")
F = jnp.float64
DSV3, H100 = get_model("deepseek-v3"), get_device("H100")


def _lay(ep=72, redundant=32, overlap=False, imbalance=1.05):
    return make_layout(H100, DSV3, 1, dp=ep, ep=ep, imbalance=imbalance, compute_format="fp8", gpus_per_node=8,
                       redundant_experts=redundant, two_batch_overlap=overlap, dtype=F)


def test_lmsys_ep72_is_expressible_with_32_redundant_experts_and_refused_without():
    # lmsys.org/blog/2025-05-05-large-scale-ep: EP72 decode of DeepSeek-V3 holds 256 + 32 = 288 slots, 4 per GPU.
    check_layout(DSV3, H100, 1, 72, 72, "cluster.toml", 8, 32)
    with pytest.raises(InputError, match=r"ep = 72 is not allowed; expected a divisor of deepseek-v3's 256 routed "
                                         r"experts \(.*\), or redundant_experts = 32 \(EPLB replicas: 288 slots\)"):
        check_layout(DSV3, H100, 1, 72, 72, "cluster.toml", 8)


@pytest.mark.parametrize("args, why", [
    ((1, 72, 72, 16), "ep = 72 is not allowed with 16 redundant experts; expected a divisor of the 272 expert slots"),
    ((8, 1, 1, 8), "redundant_experts = 8 is not allowed with ep = 1"),
    ((1, 8, 8, -1), "redundant_experts = -1 is not allowed; expected a count >= 0"),
    ((1, 8, 8, 512), "redundant_experts = 512 is not allowed; expected at most deepseek-v3's 256"),
])
def test_impossible_redundant_layouts_are_one_line(args, why):
    tp, dp, ep, r = args
    with pytest.raises(InputError) as exc:
        check_layout(DSV3, H100, tp, dp, ep, "levers.toml [levers.x]", 8, r)
    msg = str(exc.value)
    assert msg.startswith("levers.toml [levers.x]: ") and why in msg and "\n" not in msg
    with pytest.raises(InputError, match="dense"):
        check_layout(get_model("llama-3.1-8b"), H100, 1, 1, 2, "x", None, 2)


def test_redundant_slots_are_resident_and_cap_the_expert_bytes_streamed():
    m, none = model_arrays(DSV3, F), model_arrays(None, F)
    p_e = DSV3.routed_expert_params
    base, red = _lay(ep=64, redundant=0), _lay(ep=64, redundant=32)
    assert float(red.expert_slots) == 288.0
    extra = float(layout_resident_bytes(red, m, none, F(1.0)) - layout_resident_bytes(base, m, none, F(1.0)))
    assert extra == pytest.approx(32 * p_e, rel=1e-12)
    # a GPU's share: the non-expert weights (tp = 1) and 288 / 72 = 4 expert slots per GPU
    per = per_gpu_weight_bytes(DSV3, 1, 72, 1, 1.0, 32)
    assert per == pytest.approx(per_gpu_weight_bytes(DSV3, 1, 72, 1, 1.0) + 32 * p_e / 72, rel=1e-12)
    # a large batch touches every expert: with I = 1.3 the busiest rank streams min(S, I E) = 288 slots, not 256
    work = decode_work(F(16384 * 2000.0), F(16384.0))
    e_read = float(experts_read(work.tokens, m))
    assert e_read == pytest.approx(256.0, rel=1e-6)
    _, d_w, _ = layout_work(_lay(imbalance=1.3), m, work, F(1.0), F(1.0))
    _, d_w0, _ = layout_work(_lay(ep=64, redundant=0, imbalance=1.3), m, work, F(1.0), F(1.0))
    rep = (DSV3.matmul_params - DSV3.experts_per_token * p_e)
    assert float(d_w) == pytest.approx(71 * rep + p_e * (288.0 - e_read), rel=1e-9)
    assert float(d_w0) == pytest.approx(63 * rep + p_e * (256.0 - e_read), rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.floats(1e-4, 1.0), st.floats(1e-4, 1.0), st.integers(1, 64), st.floats(0.0, 1.0))
def test_overlap_closed_form(c, a, layers, busy_share):
    got = float(overlapped(F(c), F(a), F(layers), F(1.0)))
    assert got == pytest.approx(max(c, a) + min(c, a) / (2 * layers), rel=1e-12)
    assert max(c, a) <= got <= c + a                      # never slower than serial, never faster than the larger
    assert float(overlapped(F(c), F(a), F(layers), F(0.0))) == pytest.approx(c + a, rel=1e-12)
    # B, the SM-occupying share of A, adds to the compute it cannot hide behind; without overlap it changes nothing
    b = busy_share * a
    busy = float(overlapped(F(c), F(a), F(layers), F(1.0), F(b)))
    assert busy == pytest.approx(max(c + b, a) + min(c + b, a) / (2 * layers), rel=1e-12)
    assert got - 1e-15 <= busy
    assert float(overlapped(F(c), F(a), F(layers), F(0.0), F(b))) == pytest.approx(c + a, rel=1e-12)


@pytest.mark.parametrize("profiled", [False, True])
def test_two_batch_overlap_pass_is_the_two_micro_batch_pass_with_its_all_to_alls_hidden(profiled):
    # DEP over 72 H100s, 256 rows of 2,000 cached tokens per GPU: without overlap the pass in two micro-batches
    # costs 2 (c + a) + host (c: one micro-batch's compute, a: its 58 layers' all-to-alls); with overlap
    # max(2 c + B, 2 a) + min(2 c + B, 2 a) / (2 x 58) + host, B = 2 x 58 x (41 + 66) us the calls' SM time.
    b = 256 * 72
    work = decode_work(F(b * 2000.0), F(b))
    eff = efficiency_arrays(packaged_profile().fields("H100", "fp8"), F) if profiled else None

    def inst(overlap, microbatches):
        i = instance(H100, DSV3, None, 1, "fp8", "fp8", "fp8", dtype=F, microbatches=microbatches,
                     layout=_lay(overlap=overlap))
        return dataclasses.replace(i, efficiency=eff)

    two = float(target_pass(inst(False, 2), work)[0])
    tbo = float(target_pass(inst(True, 1), work)[0])
    lay, m = _lay(), model_arrays(DSV3, F)
    per_gpu = b / 2 / 72
    a_layer = sum(float(all_to_all_s(lay, inst(False, 1).device,
                                     all_to_all_bytes(lay, F(per_gpu), F(DSV3.d_model), F(8), F(x)), F(call)))
                  for x, call in ((1.0, DISPATCH_LATENCY_S), (2.0, COMBINE_LATENCY_S)))
    a = 2 * float(lay.moe_layers) * a_layer
    busy = 2 * 58 * (41e-6 + 66e-6)
    # the host time per token counts one DP rank's b / 72 tokens (each rank schedules its own requests)
    host = float(eff.step_overhead_s + eff.token_overhead_s * b / 72) if profiled else H100.pass_overhead_s
    c = two - host - a
    assert c > 0 and a > 0
    assert tbo == pytest.approx(max(c + busy, a) + min(c + busy, a) / (2 * 58) + host, rel=1e-9)
    assert tbo < two
    assert float(m.n_layers) == 61.0 and float(lay.moe_layers) == 58.0


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([8, 16, 32, 48, 64, 72, 96]), st.integers(0, 64), st.floats(1.0, 4.0),
       st.floats(1.0, 1e5))
def test_redundant_slots_only_add_resident_bytes_and_never_lower_the_streamed_cap(ep, extra, imb, tokens):
    r = -DSV3.n_experts % ep + ep * (extra // ep)            # replicas that make ep divide the slots
    if r > DSV3.n_experts:
        return
    check_layout(DSV3, H100, 1, ep, ep, "x", 8, r)
    m, none = model_arrays(DSV3, F), model_arrays(None, F)
    work = decode_work(F(tokens * 100.0), F(tokens))
    with_r = make_layout(H100, DSV3, 1, dp=ep, ep=ep, imbalance=imb, redundant_experts=r, dtype=F)
    without = dataclasses.replace(with_r, expert_slots=F(DSV3.n_experts))
    gap = float(layout_resident_bytes(with_r, m, none, F(1.0)) - layout_resident_bytes(without, m, none, F(1.0)))
    assert gap == pytest.approx(r * DSV3.routed_expert_params, rel=1e-12, abs=1e-3)
    _, w_r, _ = layout_work(with_r, m, work, F(1.0), F(1.0))
    _, w_0, _ = layout_work(without, m, work, F(1.0), F(1.0))
    assert float(w_r) >= float(w_0) - 1e-6
    assert float(w_r) - float(w_0) <= r * DSV3.routed_expert_params * (1 + 1e-12) + 1e-6
