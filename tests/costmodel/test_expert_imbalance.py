"""The expert imbalance I of an EP layout, priced on the busiest EP rank by the grouped MoE class (closed forms).

The busiest rank's experts run I times the mean tokens per expert, so under a measured profile its grouped
GEMMs reach the efficiency of that many, e(I m) with m = T k / E_read(T) (sweepkit/costmodel/efficiency.py), not the
dense GEMMs' efficiency at the step's T tokens.
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
from sweepkit.costmodel.layout import imbalance_flops, layout_work, make_layout
from sweepkit.costmodel.passes import Work, decode_work
from sweepkit.costmodel.steps import instance, target_pass

pytestmark = pytest.mark.usefixtures("x64")
F = jnp.float64
DSV3, B200 = get_model("deepseek-v3"), get_device("B200")


def _eff(e_max=0.25, t_half=180.0):
    eff = efficiency_arrays(packaged_profile().fields("B200", "fp4"), F)
    return dataclasses.replace(eff, moe_eff_max=F(e_max), moe_tokens_half=F(t_half), tp_loss=F(0.0))


def _moe_s(tokens, imbalance, eff):
    net, dev = model_arrays(DSV3, F), device_arrays(B200, F)
    work = decode_work(F(tokens * 2000.0), F(tokens))
    zero = Work(F(0.0), F(0.0), F(0.0))
    return float(step_time_by_class(work, zero, net, dev, eff, F(8.0), F(0.5), F(1.0), F(4.0), dp=F(8.0),
                                    expert_imbalance=F(imbalance))["moe"])


def test_imbalance_flops_closed_form():
    # DeepSeek-V3: k = 8 routed experts, each 3 x 7,168 x 2,048 = 44.04 M parameters in each of its 58 MoE layers
    # (HF deepseek-ai/DeepSeek-V3 config.json: 61 layers, the first 3 dense)
    lay = make_layout(B200, DSV3, 1, dp=8, ep=8, imbalance=1.3, dtype=F)
    net = model_arrays(DSV3, F)
    assert DSV3.routed_expert_params == 58 * 3 * 7168 * 2048
    want = 2 * 8 * 58 * 3 * 7168 * 2048 * 1000 * 0.3
    assert float(imbalance_flops(lay, net, F(1000.0))) == pytest.approx(want, rel=1e-12)
    assert want == pytest.approx(12.26e12, rel=1e-3)
    # no expert parallelism, no imbalance: the experts split inside TP
    assert float(imbalance_flops(make_layout(B200, DSV3, 8, imbalance=1.3, dtype=F), net, F(1000.0))) == 0.0
    # layout_work's FLOPs are exactly these (no indexer on DeepSeek-V3)
    d_f, _, _ = layout_work(lay, net, decode_work(F(1000.0 * 2000.0), F(1000.0)), F(0.5), F(1.0))
    assert float(d_f) == pytest.approx(want, rel=1e-12)


def test_busiest_rank_runs_its_larger_groups_at_their_own_efficiency():
    # compute-bound MoE (7,168 tokens, m = 7,168 x 8 / 256 = 224 per expert): t_e(I) / t_e(1) =
    # I e(m) / e(I m) = (I m + T_half) / (m + T_half)
    eff = _eff()
    m, i = 224.0, 1.3
    ratio = _moe_s(7168.0, i, eff) / _moe_s(7168.0, 1.0, eff)
    assert ratio == pytest.approx((i * m + 180.0) / (m + 180.0), rel=1e-9)
    # the closed form of the class: 2 k P_e T I / (P n k_c e(I m)) against the device's bf16 peak
    e = 0.25 * i * m / (i * m + 180.0)
    want = 2 * 8 * DSV3.routed_expert_params * 7168 * i / (B200.peak_flops_per_s * 8 * 4.0 * e)
    assert _moe_s(7168.0, i, eff) == pytest.approx(want, rel=1e-9)


def test_saturated_efficiency_scales_the_class_by_i():
    # with T_half = 0 the efficiency no longer depends on the tokens: the busiest rank takes exactly I times as long
    eff = _eff(t_half=0.0)
    assert _moe_s(7168.0, 1.7, eff) == pytest.approx(1.7 * _moe_s(7168.0, 1.0, eff), rel=1e-12)


def test_pass_prices_the_imbalance_once():
    # TP8 with the experts spread over 8 EP ranks inside the TP group (no all-to-all, whose bytes also grow with
    # I): the I = 1.3 pass exceeds the I = 1 pass by the MoE class's difference alone, so the layout term no
    # longer carries the imbalance FLOPs
    eff = _eff()
    work = decode_work(F(7168 * 2000.0), F(7168.0))

    def t(imbalance):
        lay = make_layout(B200, DSV3, 8, ep=8, imbalance=imbalance, compute_format="fp4", dtype=F)
        inst = dataclasses.replace(instance(B200, DSV3, None, 8, "fp4", "fp8", "fp4", dtype=F, layout=lay),
                                   efficiency=eff)
        return float(target_pass(inst, work)[0])

    net, dev = model_arrays(DSV3, F), device_arrays(B200, F)
    zero = Work(F(0.0), F(0.0), F(0.0))

    def moe(imbalance):
        return float(step_time_by_class(work, zero, net, dev, eff, F(8.0), F(0.53125), F(1.0), F(4.0),
                                        expert_imbalance=F(imbalance))["moe"])

    # at 7,168 tokens every expert is read either way, so the busiest rank adds no weight bytes
    assert t(1.3) - t(1.0) == pytest.approx(moe(1.3) - moe(1.0), rel=1e-9)
    assert moe(1.3) > moe(1.0)


@settings(max_examples=40, deadline=None)
@given(st.floats(1.0, 20000.0), st.floats(1.0, 4.0), st.floats(0.0, 1000.0))
def test_moe_class_non_decreasing_in_imbalance_and_i_1_is_the_even_split(tokens, imbalance, t_half):
    eff = _eff(t_half=t_half)
    even, skewed = _moe_s(tokens, 1.0, eff), _moe_s(tokens, imbalance, eff)
    assert skewed >= even * (1 - 1e-12)
    # never more than I times the even split (the larger groups run at least as efficiently)
    assert skewed <= imbalance * even * (1 + 1e-12)
