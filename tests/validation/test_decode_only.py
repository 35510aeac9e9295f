"""Decode-only rows (a disaggregated decode pool's node test: a batch per GPU at a cached context, no output
length; LMSYS, lmsys.org/blog/2025-05-05-large-scale-ep) priced by the steady state as one decode step."""

import dataclasses

import jax.numpy as jnp
import pytest

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import profile_for
from sweepkit.costmodel.efficiency import efficiency_arrays
from sweepkit.costmodel.layout import make_layout
from sweepkit.costmodel.passes import decode_work
from sweepkit.costmodel.steps import instance, target_pass_cost
from sweepkit.validation import parse_measurements
from sweepkit.validation.profiles import profile_values, steady_row
from sweepkit.validation.steady_rows import concurrency, decode_only

HEAD = ("source,device,model,metric,value,unit,framework,weight_format,kv_format,compute_format,gpus,ep,"
        "input_tokens,concurrency,scenario\n")


def _row(framework="SGLang", scenario="decode-only node test", batch=16, ctx=500):
    csv = HEAD + f"demo,H100,deepseek-v3,output_throughput,1000,tok/s/gpu,{framework},fp8,fp8,fp8,8,8,{ctx},{batch}," \
                 f"{scenario}\n"
    return parse_measurements(csv, "demo.csv")[0]


@pytest.mark.parametrize("framework, tbo", [("SGLang", False), ("SGLang (DeepEP + TBO)", True)])
def test_a_decode_only_row_is_one_decode_step_of_its_stated_batch(framework, tbo, x64):
    # EP8 over one H100 node (DP attention on every GPU), 16 rows per GPU at 500 cached tokens: n = 128 rows, no
    # prompt; output tokens/s = n / t_step, the profiled decode pass of that layout (with TBO where named).
    m = _row(framework)
    assert decode_only(m) and steady_row(m) and concurrency(m) == 16 * 8
    prof = profile_for("SGLang")
    [got] = profile_values([m], [prof])
    dev, model, f = get_device("H100"), get_model("deepseek-v3"), jnp.float64
    lay = make_layout(dev, model, 1, dp=8, ep=8, compute_format="fp8", two_batch_overlap=tbo, dtype=f)
    inst = dataclasses.replace(instance(dev, model, None, 1, "fp8", "fp8", "fp8", dtype=f, layout=lay),
                               efficiency=efficiency_arrays(prof.fields("H100", "fp8"), f))
    t = float(target_pass_cost(inst, decode_work(f(128 * 500.0), f(128.0))).t_s)
    assert got == pytest.approx(128 / t, rel=1e-9)
    assert m.value_si == pytest.approx(8000.0)              # tok/s/gpu x 8 GPUs, compared as such


def test_a_simulated_mtp_run_or_a_row_without_a_batch_is_not_decode_only():
    assert not decode_only(_row(scenario="decode-only node test with simulated MTP"))
    assert not decode_only(_row(batch=""))
    assert not decode_only(_row(scenario="prefill-only"))


def test_a_decode_only_row_is_modelled_by_the_steady_state_not_the_serving_engine():
    from sweepkit.validation.points import status
    from sweepkit.validation.serving_points import MODELLED, serving_status
    from sweepkit.validation.store import priced_by

    m = _row()
    assert status(m) == MODELLED and priced_by(m).startswith("steady state: ")
    assert serving_status(m) != MODELLED                     # no output length: the engine cannot run it
    lost = _row(scenario="decode-only node test with simulated MTP")
    assert status(lost) != MODELLED and priced_by(lost) == ""


def test_without_a_profile_a_decode_only_row_says_why_it_has_no_value():
    from sweepkit.validation.points import evaluate_points
    from sweepkit.validation.store import NODE_TEST_NO_PROFILE, rows

    m = _row()
    values = evaluate_points([m], {}, serving=True, profile="reference")
    assert values == [None]
    [row] = rows([m], values, "demo.csv", "0" * 64, profile="reference")
    assert row["status"] == NODE_TEST_NO_PROFILE and row["priced_by"] == ""
