"""The screen against the cost model it simplifies: the batch-1 decode step is the cost model's target pass
(same FLOPs, bytes, all-reduces and pipeline slots), the KV fit is the memory model's, and the bound moves
the right way with the SLOs (Hypothesis)."""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_draft, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.layout import layout_kv_capacity_tokens, make_layout
from sweepkit.costmodel.memory import kv_capacity_tokens
from sweepkit.costmodel.passes import decode_work
from sweepkit.costmodel.steps import instance, target_pass
from sweepkit.plan.build import demand, run_screen, tokens_per_step
from sweepkit.plan.screen import STEP_OVERHEAD_S
from sweepkit.plan.space import enumerate_space, make_space
from sweepkit.serving.workloads import get_workload

ONE = dict(mode=("colocated",), batching=("prefill-priority",), token_budget=(8192,), batch_cap=(256,),
           kv=("reserved",), weight_format=("bf16",), kv_format=("bf16",), spec=("none",))


@pytest.mark.parametrize("model, device, tp, pp", [("llama-3.1-8b", "H100", 1, 1), ("llama-3.1-70b", "H100", 4, 1),
                                                    ("llama-3.1-70b", "H200", 2, 2),
                                                    ("falcon-180b", "H100", 8, 1)])   # one all-reduce per layer
def test_batch_one_decode_is_the_cost_models_target_pass(model, device, tp, pp):
    """TPOT lower bound = one target pass of one row holding the mean request's KV (no power cap binds at
    batch 1), with the serving cluster's 0.5 ms step overhead."""
    w = get_workload("chat")
    table = enumerate_space(make_space(model, [device], tp * pp, dict(ONE, tp=(tp,), pp=(pp,))))
    b = run_screen(table, model, w)
    d = demand(w)
    ctx = float(d.prompt_tokens + d.output_tokens)              # a reserved row holds its whole sequence
    inst = instance(get_device(device), get_model(model), None, tp, "bf16", "bf16", "bf16", 0, jnp.float32,
                    pp=pp, microbatches=pp)
    inst = dataclasses.replace(inst, device=dataclasses.replace(inst.device, pass_overhead_s=jnp.float32(STEP_OVERHEAD_S)))
    t, _ = target_pass(inst, decode_work(jnp.float32(ctx), jnp.float32(1.0)))
    assert len(table["tp"]) == 1
    assert b["tpot_lb_s"][0] == pytest.approx(float(t), rel=2e-3)


@pytest.mark.parametrize("model, device, tp, dp, ep, fmt", [
    ("qwen3-30b-a3b", "H100", 1, 2, 2, "bf16"), ("qwen3-30b-a3b", "H100", 2, 1, 1, "bf16"),
    ("deepseek-v3", "H200", 1, 8, 8, "fp8"), ("deepseek-v3", "H200", 2, 4, 8, "fp8")])
def test_batch_one_decode_of_an_expert_layout_is_the_cost_models(model, device, tp, dp, ep, fmt):
    """A mixture-of-experts instance with expert and attention-data parallelism: the TPOT bound is the cost
    model's target pass under the same :class:`~sweepkit.costmodel.layout.Layout` (imbalance, replicated
    weights, all-to-alls in place of the MoE layers' all-reduces), and the KV fit is the layout's capacity."""
    w = get_workload("chat")
    fixed = dict(ONE, tp=(tp,), pp=(1,), dp=(dp,), ep=(ep,), weight_format=(fmt,), kv_format=(fmt,))
    table = enumerate_space(make_space(model, [device], tp * dp, fixed))
    assert len(table["tp"]) == 1 and (table["dp"][0], table["ep"][0]) == (dp, ep)
    b = run_screen(table, model, w)
    d = demand(w)
    ctx = float(d.prompt_tokens + d.output_tokens)
    m, dev = get_model(model), get_device(device)
    lay = make_layout(dev, m, tp, dp=dp, ep=ep, compute_format=fmt, dtype=jnp.float32)
    inst = instance(dev, m, None, tp, fmt, fmt, fmt, 0, jnp.float32, layout=lay)
    inst = dataclasses.replace(inst, device=dataclasses.replace(inst.device, pass_overhead_s=jnp.float32(STEP_OVERHEAD_S)))
    t, _ = target_pass(inst, decode_work(jnp.float32(ctx), jnp.float32(1.0)))
    assert b["tpot_lb_s"][0] == pytest.approx(float(t), rel=2e-3)
    byte = 1.0 if fmt == "fp8" else 2.0
    cap = layout_kv_capacity_tokens(lay, device_arrays(dev, jnp.float32), jnp.float32(tp * dp), model_arrays(m),
                                    model_arrays(get_draft("none", m)), byte, byte)
    assert bool(b["fits"][0]) == bool(float(cap) >= ctx)


def test_attention_data_parallelism_holds_more_mla_kv():
    """DeepSeek-V3 (MLA) on 8 x H200 in FP8: TP8 copies the latent KV on every GPU (r_kv = 8), DEP8 holds one
    copy per DP rank, so its bound takes larger batches and more tokens per GPU under the same SLOs."""
    w = get_workload("chat")
    out = {}
    for tp, dp, ep in ((8, 1, 1), (1, 8, 8)):
        fixed = dict(ONE, tp=(tp,), pp=(1,), dp=(dp,), ep=(ep,), weight_format=("fp8",), kv_format=("fp8",),
                     batching=("chunked",), kv=("paged",), batch_cap=(512,))
        b = run_screen(enumerate_space(make_space("deepseek-v3", ["H200"], 8, fixed)), "deepseek-v3", w)
        out[dp] = (float(b["batch"][0]), float(b["tok_s_per_gpu"][0]))
    assert out[8][0] > out[1][0] and out[8][1] > out[1][1] > 0


def test_kv_fit_is_the_memory_models():
    """Llama-3.1-70B bf16 fits 2 x H100 only with room for KV; on one H100 its weights alone overflow."""
    w = get_workload("chat")
    for tp, fits in ((1, False), (2, True)):
        table = enumerate_space(make_space("llama-3.1-70b", ["H100"], tp, dict(ONE, tp=(tp,), pp=(1,))))
        b = run_screen(table, "llama-3.1-70b", w)
        m = get_model("llama-3.1-70b")
        cap = kv_capacity_tokens(device_arrays(get_device("H100")), jnp.float32(tp), model_arrays(m),
                                 model_arrays(get_draft("none", m)), 2.0, 2.0)
        assert bool(b["fits"][0]) is fits
        assert (float(cap) > 0) is fits


def test_speculation_accepts_the_workloads_tokens():
    """E = 1 + sum of the cumulative products of the chat/MTP alphas (0.75, 0.69, 0.65)."""
    e, gamma, draft = tokens_per_step("chat", "mtp:3")
    assert (gamma, draft) == (3, "mtp")
    assert e == pytest.approx(1 + 0.75 + 0.75 * 0.69 + 0.75 * 0.69 * 0.65)


TABLE = enumerate_space(make_space("llama-3.1-8b", ["H100"], 2, {"batch_cap": (64, 256), "token_budget": (8192,)}))


@given(tpot=st.floats(0.005, 0.2), factor=st.floats(1.0, 4.0))
def test_a_looser_slo_never_lowers_the_bound(tpot, factor):
    w = get_workload("chat")
    tight = run_screen(TABLE, "llama-3.1-8b", w, ttft_slo_s=1.0, tpot_slo_s=tpot)
    loose = run_screen(TABLE, "llama-3.1-8b", w, ttft_slo_s=1.0 * factor, tpot_slo_s=tpot * factor)
    assert np.all(loose["feasible"] >= tight["feasible"])
    assert np.all(loose["tok_s_per_gpu"] >= tight["tok_s_per_gpu"] * (1 - 1e-5))
    assert np.all(tight["batch"] <= np.array(TABLE["batch_cap"]))


def test_no_slo_leaves_only_memory():
    b = run_screen(TABLE, "llama-3.1-8b", get_workload("chat"), math.inf, math.inf)
    assert b["feasible"].all() and np.isfinite(b["usd_per_mtok"]).all()


def test_a_hybrid_models_rows_hold_their_linear_attention_state():
    """Qwen3.5-9B bf16 on one H100 without SLOs: b = floor(C / (I + O + s)), s = 51,511,296 B of Gated DeltaNet
    state over 32,768 B of KV per token = 1,572 positions per row (sweepkit.costmodel.memory.state_positions)."""
    w = get_workload("chat")
    table = enumerate_space(make_space("qwen3.5-9b", ["H100"], 1, dict(ONE, tp=(1,), pp=(1,), batch_cap=(1 << 20,))))
    b = run_screen(table, "qwen3.5-9b", w, math.inf, math.inf)
    m = get_model("qwen3.5-9b")
    cap = float(kv_capacity_tokens(device_arrays(get_device("H100")), jnp.float32(1), model_arrays(m),
                                   model_arrays(get_draft("none", m)), 2.0, 2.0))
    d = demand(w, math.inf, math.inf)
    row = float(d.prompt_tokens + d.output_tokens)
    assert bool(b["fits"][0]) and b["batch"][0] == pytest.approx(math.floor(cap / (row + 1572.0)), abs=1.0)
    assert b["batch"][0] < math.floor(cap / row) / 2                  # the state more than halves the rows
