"""The tensor-parallel stretch s_tp = 1 + l_tp (tp - 1) (D L / P_mm) / r_0 against closed forms and its
invariants (its place in the step, on the device classes only: tests/costmodel/test_efficiency.py).

Why the model's activation width per parameter: under tensor parallelism each layer all-reduces D activations a
token (Shoeybi et al., "Megatron-LM", arXiv:1909.08053, section 3) against P_mm / L parameters a token of matmul
work, so synchronisation and narrower shards cost a share of a layer's time that grows with D L / P_mm.
TensorRT-LLM's perf-overview tables (v0.9, A100 bf16, github.com/NVIDIA/TensorRT-LLM docs/source/performance)
give the size of it: a 2,048-token prompt's first token takes 249.2 ms on Llama-2-70B TP8 and 456.0 ms on
Falcon-180B TP8, 2.6 times the parameters for 1.8 times the time.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_model
from sweepkit.costmodel.arrays import model_arrays
from sweepkit.costmodel.efficiency import TP_LOSS_RATIO, tp_stretch

pytestmark = pytest.mark.usefixtures("x64")


def test_closed_forms():
    """Llama-3.1-70B: r = 8,192 x 80 / 69,501,714,432 = 9.4293e-6; Falcon-180B: 14,848 x 80 / 178,552,307,712
    = 6.6526e-6; l_tp = 0.0308 at TP8."""
    llama, falcon = model_arrays(get_model("llama-3.1-70b")), model_arrays(get_model("falcon-180b"))
    # the closed forms below hold for the catalogue's own shapes (sweepkit/catalogue/models.toml)
    for name, shape in (("llama-3.1-70b", (8192, 80, 69_501_714_432)), ("falcon-180b", (14848, 80, 178_552_307_712))):
        m = get_model(name)
        assert (m.d_model, m.n_layers, m.matmul_params) == shape
    r_llama = 8192 * 80 / 69_501_714_432
    r_falcon = 14848 * 80 / 178_552_307_712
    assert r_llama == pytest.approx(9.4293e-6, rel=1e-4) and r_falcon == pytest.approx(6.6526e-6, rel=1e-4)
    assert float(tp_stretch(llama, 0.0308, 8.0)) == pytest.approx(1 + 0.0308 * 7 * r_llama / 1e-5, rel=1e-12)
    assert float(tp_stretch(llama, 0.0308, 8.0)) == pytest.approx(1.2033, abs=1e-4)
    assert float(tp_stretch(falcon, 0.0308, 8.0)) == pytest.approx(1.1434, abs=1e-4)
    assert TP_LOSS_RATIO == 1e-5


def test_one_device_and_an_empty_model_are_not_stretched():
    llama = model_arrays(get_model("llama-3.1-70b"))
    assert float(tp_stretch(llama, 0.5, 1.0)) == 1.0
    empty = model_arrays(None)
    assert float(tp_stretch(empty, 0.5, 8.0)) == 1.0


@settings(deadline=None, max_examples=40)
@given(loss=st.one_of(st.just(0.0), st.floats(1e-4, 0.5)), tp=st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0]),
       name=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "mixtral-8x7b", "falcon-180b",
                             "deepseek-v3"]))
def test_stretch_grows_with_devices_loss_and_width(loss, tp, name):
    """s_tp >= 1, (s_tp - 1) linear in l_tp and in tp - 1, and proportional to D L / P_mm across models."""
    m = get_model(name)
    arrays = model_arrays(m)
    s = float(tp_stretch(arrays, loss, tp))
    assert s >= 1.0
    assert s - 1.0 == pytest.approx(loss * (tp - 1.0) * m.d_model * m.n_layers / m.matmul_params / 1e-5,
                                    rel=1e-9, abs=1e-15)
    assert float(tp_stretch(arrays, loss, 2 * tp)) >= s
    # linear in l_tp and in tp - 1, without restating the formula: twice the loss, twice the excess; from tp to
    # 2 tp the excess grows by (2 tp - 1) / (tp - 1)
    assert float(tp_stretch(arrays, 2 * loss, tp)) - 1.0 == pytest.approx(2 * (s - 1.0), rel=1e-9, abs=1e-15)
    if tp > 1:
        grown = float(tp_stretch(arrays, loss, 2 * tp)) - 1.0
        assert grown == pytest.approx((s - 1.0) * (2 * tp - 1.0) / (tp - 1.0), rel=1e-9, abs=1e-15)
    ref = model_arrays(get_model("llama-3.1-70b"))
    if loss > 0 and tp > 1:
        ratio = (s - 1.0) / (float(tp_stretch(ref, loss, tp)) - 1.0)
        assert ratio == pytest.approx((m.d_model * m.n_layers / m.matmul_params) / (8192 * 80 / 69_501_714_432),
                                      rel=1e-9)
