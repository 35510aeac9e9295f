"""Expert- and data-parallel rows in the analytic steady state: the replica's layout, its KV and its pass."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import packaged_profile, profile_for
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time
from sweepkit.costmodel.layout import layout_kv_capacity_tokens, make_layout
from sweepkit.validation import Measurement
from sweepkit.validation.profiles import priced_by_profile, steady_row
from sweepkit.validation.steady import running, row_step_time, step_work
from sweepkit.validation.steady_rows import row_inputs

F = jnp.float64


def _row(tp, dp, ep, gpus=8, device="H200", model="deepseek-v3", isl=2000, osl=2000, metric="total_throughput",
         framework="SGLang", fmt="fp8") -> Measurement:
    unit = "s" if metric == "tpot" else "tok/s"
    return Measurement(source="s", device=device, model=model, metric=metric, value=1.0, unit=unit, value_si=1.0,
                       row=1, framework=framework, tp=tp, gpus=gpus, weight_format=fmt, kv_format=fmt,
                       compute_format=fmt, input_tokens=isl, output_tokens=osl, request_rate=float("inf"),
                       percentile="mean", ep=ep, dp=dp)


def _one(rows, budget=1e9):
    return jax.tree_util.tree_map(lambda x: x[0], row_inputs(rows, 1e9, budget))


def test_dep_rows_are_steady_rows_priced_by_their_framework_profile():
    dep = _row(8, 8, 8)                        # SGLang --tp 8 --dp 8 --enable-dp-attention --ep 8: DEP8
    assert steady_row(dep) and steady_row(_row(4, 1, 4, gpus=4, device="H100", model="glm-4.5-air"))
    assert not steady_row(dataclasses.replace(dep, pp=2, gpus=16))
    got = priced_by_profile([dep])
    assert set(got) == {0} and np.isfinite(got[0]) and got[0] > 0
    assert profile_for("SGLang").framework == "SGLang"


def test_dep8_holds_its_kv_per_attention_rank():
    # DeepSeek-V3 FP8 on 8 x H200: each of the 8 DP ranks keeps its own requests' latent (r_kv = 1) and its own
    # copy of the non-expert weights; with an unbounded batch and budget n = C / (I + O), C the layout's capacity.
    with jax.enable_x64(True):
        dep = _one([_row(8, 8, 8)])
        lay = make_layout(get_device("H200"), get_model("deepseek-v3"), 1, dp=8, ep=8, compute_format="fp8", dtype=F)
        none = model_arrays(None, F)
        cap = float(layout_kv_capacity_tokens(lay, device_arrays(get_device("H200"), F), F(8.0),
                                              model_arrays(get_model("deepseek-v3"), F), none, F(1.0), F(1.0)))
        assert float(running(dep)) == pytest.approx(cap / 4000.0, rel=1e-12)
        assert (float(dep.tp), float(dep.layout.dp), float(dep.layout.ep), float(dep.replicas)) == (1, 8, 8, 1)


def test_a_row_without_a_layout_is_priced_exactly_as_before():
    # The identity layout (dp = ep = r_kv = 1) adds exact zeros: t_step is step_time bit for bit.
    prof = profile_for("TensorRT-LLM")
    for m in (_row(8, 1, 1, framework="TensorRT-LLM"), _row(2, 1, 1, gpus=2, device="H100", model="llama-3.1-70b")):
        with jax.enable_x64(True):
            r = _one([m], 8192.0)
            eff = jax.tree_util.tree_map(lambda x: x[0], efficiency_arrays([prof.fields(m.device, "fp8")], F))
            d, p = step_work(r)
            want = step_time(d, p, r.model, r.device, eff, r.tp, r.weight_bytes, r.kv_bytes, r.compute_speedup)
            assert float(r.laid) == 0.0 and float(row_step_time(r, eff)) == float(want)


def test_dep8_pays_all_to_alls_and_imbalance_where_tp8_pays_all_reduces():
    seed = packaged_profile()
    with jax.enable_x64(True):
        eff = jax.tree_util.tree_map(lambda x: x[0], efficiency_arrays([seed.fields("H200", "fp8")], F))
        dep = _one([_row(8, 8, 8)], 8192.0)
        balanced = dataclasses.replace(dep, layout=dataclasses.replace(dep.layout, imbalance=F(1.0)))
        assert float(row_step_time(dep, eff)) > float(row_step_time(balanced, eff))
        no_a2a = dataclasses.replace(balanced, layout=dataclasses.replace(balanced.layout, moe_layers=F(0.0)))
        assert float(row_step_time(balanced, eff)) > float(row_step_time(no_a2a, eff))


def test_dp_attention_without_ep_gathers_its_tokens_for_tensor_parallel_experts():
    # SGLang --tp 8 --dp 8 --enable-dp-attention without an all-to-all backend: attention DP8 (the same KV per
    # rank as DEP8), the experts tensor-parallel over the 8 GPUs on the gathered tokens: no expert imbalance,
    # an all-gather and an all-reduce per MoE layer in place of the all-to-alls.
    seed = packaged_profile()
    with jax.enable_x64(True):
        eff = jax.tree_util.tree_map(lambda x: x[0], efficiency_arrays([seed.fields("H200", "fp8")], F))
        gathered, dep = _one([_row(8, 8, 1)], 8192.0), _one([_row(8, 8, 8)], 8192.0)
        assert (float(gathered.layout.dp), float(gathered.layout.ep), float(gathered.layout.moe_tp)) == (8, 1, 8)
        assert float(running(gathered)) == float(running(dep))
        skewed = dataclasses.replace(gathered, layout=dataclasses.replace(gathered.layout, imbalance=F(2.0)))
        assert float(row_step_time(skewed, eff)) == float(row_step_time(gathered, eff))
        no_gather = dataclasses.replace(gathered, layout=dataclasses.replace(gathered.layout, moe_tp=F(1.0)))
        assert float(row_step_time(gathered, eff)) > float(row_step_time(no_gather, eff))



def test_the_mean_step_of_a_dep_row_waits_for_the_rank_that_prefills():
    # DEP8 DeepSeek-V3, 2,000 / 4,000: the mean step prefills n / O < 1 prompt, all of it on one rank
    # (costmodel.rank_balance, s = 8) under TensorRT-LLM's in-flight batching; under SGLang's prefill-first
    # scheduler prompts run in prefill steps of their own, batched over the ranks (s = 1).
    from sweepkit.costmodel.rank_balance import busiest_rank_scale
    from sweepkit.validation.steady import _instance

    with jax.enable_x64(True):
        eff = efficiency_arrays(profile_for("tensorrt-llm").fields("H200", "fp8"), F)
        trt, sgl = (_one([_row(8, 8, 8, osl=4000, framework=f)]) for f in ("TensorRT-LLM", "SGLang"))
        assert float(trt.prefill_first) == 0.0 and float(sgl.prefill_first) == 1.0
        _, prefill = step_work(trt)
        assert 0.0 < float(prefill.rows) < 1.0
        for row, s in ((trt, 8.0), (sgl, 1.0)):
            lay = _instance(row, eff).layout
            assert float(busiest_rank_scale(lay.dp, prefill, lay.rank_budget)) == s
        even = dataclasses.replace(trt, prefill_first=F(1.0))          # the same row, its prompts spread evenly
        assert float(row_step_time(trt, eff)) > float(row_step_time(even, eff))
