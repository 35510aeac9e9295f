"""The grouped MoE class counts its tokens per expert over the experts the step's tokens reach (closed forms).

A grouped GEMM runs tiles only for experts that received tokens, so the saturating efficiency
e(m) = e_max m / (m + T_half) is taken at m = T k / E_read(T), E_read(T) = E (1 - (1 - k / E)^T) the expected
distinct experts (sweepkit/costmodel/passes.py), and its fixed share, E_read(T) T_half token-equivalents, is
paid by the experts in use rather than by all E. Where T k >> E every expert is in use and nothing changes.
"""

import dataclasses

import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import packaged_profile
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time_by_class
from sweepkit.costmodel.passes import Work, decode_work

pytestmark = pytest.mark.usefixtures("x64")
F = jnp.float64
OSS, DSV3, B200 = get_model("gpt-oss-120b"), get_model("deepseek-v3"), get_device("B200")
E_MAX, T_HALF = 0.38, 442.0


def _eff():
    eff = efficiency_arrays(packaged_profile().fields("B200", "fp4"), F)
    return dataclasses.replace(eff, moe_eff_max=F(E_MAX), moe_tokens_half=F(T_HALF), tp_loss=F(0.0))


def _moe_s(model, tokens, tp=1.0):
    work = decode_work(F(tokens * 1000.0), F(tokens))
    zero = Work(F(0.0), F(0.0), F(0.0))
    return float(step_time_by_class(work, zero, model_arrays(model, F), device_arrays(B200, F), _eff(), F(tp),
                                    F(0.5), F(1.0), F(4.0))["moe"])


def _e_read(model, tokens):
    e, k = model.n_experts, model.experts_per_token
    return e * (1.0 - (1.0 - k / e) ** tokens)


def _compute_s(model, tokens, experts, tp=1.0):
    """2 k P_e T / (P tp k_c e(T k / experts)): the class's compute term with the tokens spread over ``experts``."""
    k = model.experts_per_token
    m = tokens * k / experts
    e = E_MAX * m / (m + T_HALF)
    return 2 * k * model.routed_expert_params * tokens / (B200.peak_flops_per_s * tp * 4.0 * e)


def test_four_decode_rows_of_gpt_oss_pay_t_half_for_the_experts_they_reach():
    # gpt-oss-120b: E = 128 experts, k = 4, each 3 x 2,880 x 2,880 in each of 36 layers (HF openai/gpt-oss-120b
    # config.json); 4 rows reach 128 (1 - (124/128)^4) = 15.27 experts a layer, 1.048 tokens each
    assert OSS.routed_expert_params == 36 * 3 * 2880 * 2880
    e_read = _e_read(OSS, 4.0)
    assert e_read == pytest.approx(15.2655, rel=1e-4)
    want = _compute_s(OSS, 4.0, e_read)                 # compute-bound: above the experts' bytes at 8 TB/s
    assert want == pytest.approx(2 * OSS.routed_expert_params * (4 * 4 + e_read * T_HALF)
                                 / (B200.peak_flops_per_s * 4.0 * E_MAX), rel=1e-12)
    assert _moe_s(OSS, 4.0) == pytest.approx(want, rel=1e-9)
    # over all 128 experts (m = 0.125) the step would pay 128 x T_half: 8.4 times as long
    assert _compute_s(OSS, 4.0, 128.0) / want == pytest.approx((16 + 128 * T_HALF) / (16 + e_read * T_HALF), rel=1e-9)
    assert _compute_s(OSS, 4.0, 128.0) / want == pytest.approx(8.37, abs=0.01)


def test_every_expert_in_use_leaves_the_class_as_it_was():
    # DeepSeek-V3 at 7,168 tokens on 8 GPUs: E_read = 256 to double precision, m = 224
    assert _moe_s(DSV3, 7168.0, tp=8.0) == pytest.approx(_compute_s(DSV3, 7168.0, 256.0, tp=8.0), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(tokens=st.floats(1.0, 4096.0), more=st.floats(1.0, 64.0),
       name=st.sampled_from(["gpt-oss-120b", "deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b"]))
def test_class_grows_with_tokens_and_is_bounded_by_both_counts(tokens, more, name):
    model = get_model(name)
    t = _moe_s(model, tokens)
    assert _moe_s(model, tokens + more) >= t * (1 - 1e-12)                 # more tokens never cost less
    # k <= E_read(T) <= min(E, T k) for T >= 1, and more experts in use cost more: the class lies between the
    # counts (the bytes of the experts read as its floor)
    high = _compute_s(model, tokens, min(model.n_experts, tokens * model.experts_per_token))
    assert t <= max(high, _bytes_s(model, tokens)) * (1 + 1e-9)
    assert t >= _compute_s(model, tokens, model.experts_per_token) * (1 - 1e-9)


def _bytes_s(model, tokens):
    return (model.routed_expert_params * _e_read(model, tokens) * 0.5
            / (B200.hbm_bytes_per_s * float(_eff().weight_bw_eff)))
