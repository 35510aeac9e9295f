"""Lever pairs: the flags a row was served with, what a pair changes, which pairs are expressed, and the
steady state under the stated scheduler flags."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue.efficiency import profile_for
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time_by_class
from sweepkit.validation import Measurement, evaluate_points
from sweepkit.validation.levers import (EXPRESSED, flags, host_overlap, lever_family, lever_parts, pair_status,
                                        scheduler_defaults, scheduler_scales, stated, two_batch_overlap)
from sweepkit.validation.steady import row_step_time, running, step_work
from sweepkit.validation.steady_rows import row_inputs
from sweepkit.validation.store import rows
from sweepkit.validation.summary import pair_families, pairs, sign_agreement


def _row(metric="tpot", notes="flags: defaults", framework="vLLM v0.11.0", device="H100", tp=1, gpus=1,
         lever="", pair="", value=1.0, isl=2000, osl=100, model="qwen3-14b", fmt="bf16") -> Measurement:
    unit = "s" if metric in ("tpot", "itl") else "tok/s"
    return Measurement(source="s", device=device, model=model, metric=metric, value=value, unit=unit,
                       value_si=value, row=1, framework=framework, tp=tp, gpus=gpus, weight_format=fmt,
                       kv_format=fmt, compute_format=fmt, input_tokens=isl, output_tokens=osl, requests=1000,
                       request_rate=float("inf"), percentile="mean", notes=notes, lever=lever, pair_id=pair)


def test_flags_are_read_from_the_notes():
    m = _row(notes="dataset case 'x'; flags: --async-scheduling --max-num-batched-tokens 4096 --max-model-len "
                   "32768; device: A100 SXM 80GB", device="A100")
    assert flags(m).startswith("--async-scheduling") and host_overlap(m)
    assert stated(m, ("max-num-batched-tokens",)) == 4096.0
    assert stated(_row(notes="flags: --max_num_seqs=512"), ("max-num-seqs",)) == 512.0
    assert not host_overlap(_row()) and flags(_row(notes="no flags here")) == ""


def test_vllm_defaults_per_device_and_the_scales_they_give():
    # vllm/engine/arg_utils.py: 8,192 tokens / 1,024 sequences on >= 70 GiB GPUs other than A100, else 2,048 / 256
    assert scheduler_defaults(_row(device="H100")) == (8192.0, 1024.0)
    assert scheduler_defaults(_row(device="A100")) == (2048.0, 256.0)
    # SGLang's chunked-prefill size by GPU memory (python/sglang/srt/server_args.py); its cap is not known (0)
    assert scheduler_defaults(_row(framework="SGLang v0.5.3")) == (8192.0, 0.0)
    assert scheduler_defaults(_row(framework="SGLang v0.5.3", device="B200")) == (16384.0, 0.0)
    assert scheduler_defaults(_row(framework="TensorRT-LLM v0.20")) is None
    assert scheduler_scales(_row(device="A100", notes="flags: --max-num-batched-tokens 4096")) == (2.0, 1.0)
    assert scheduler_scales(_row(notes="flags: --max-num-seqs=512")) == (1.0, 0.5)
    assert scheduler_scales(_row(framework="SGLang", notes="flags: --max-running-requests=256")) == (1.0, 1.0)


def test_lever_parts_and_what_is_not_expressed():
    base = _row(lever="x:without", pair="P")
    mi = _row(framework="MindIE 2.1", notes="flags: --tp 4", tp=4, gpus=4, lever="x:with", pair="P")
    assert lever_family(mi, base) == "framework+layout"
    st_ = pair_status(mi, base, "serving engine: reference", "steady state: vllm")
    assert st_.startswith("not expressed: framework: no loaded-row profile for MindIE") and "priced apart" in st_
    asy = _row(notes="flags: --async-scheduling -tp 2", tp=2, gpus=2, lever="x:with", pair="P")
    assert [p for p, _ in lever_parts(asy, base)] == ["layout", "async scheduling"]
    assert pair_status(asy, base, "steady state: vllm", "steady state: vllm") == EXPRESSED
    assert pair_status(asy, base, "", "steady state: vllm") == "not expressed: a side is not modelled"
    spec = _row(notes="flags: MTP speculative (num_speculative_tokens=1)", lever="x:with", pair="P")
    assert pair_status(spec, base, "steady state: vllm", "steady state: vllm").startswith(
        "not expressed: speculative: needs the draft's acceptance")
    same = _row(lever="x:with", pair="P")
    assert pair_status(same, base, "steady state: vllm", "steady state: vllm").endswith(
        "the rows differ in nothing the model reads")


def _inputs(points):
    prof = profile_for("vLLM")
    with jax.enable_x64(True):
        r = row_inputs(points, 1024, prof.token_budget)
        eff = efficiency_arrays([prof.fields(m.device, m.compute_format) for m in points])
    return r, eff


def test_async_scheduling_takes_the_larger_of_device_and_host_time():
    pts = [_row(), _row(notes="flags: --async-scheduling")]
    with jax.enable_x64(True):
        r, eff = _inputs(pts)
        t = np.asarray(jax.vmap(row_step_time)(r, eff))
        parts = jax.vmap(lambda row, e: step_time_by_class(*step_work(row), row.model, row.device, e, row.tp,
                                                           row.weight_bytes, row.kv_bytes,
                                                           row.compute_speedup))(r, eff)
        host = np.asarray(parts.pop("overhead"))
        device = np.asarray(sum(parts.values()))
    assert t[0] == pytest.approx(device[0] + host[0], rel=1e-12)
    assert t[1] == pytest.approx(max(device[1], host[1]), rel=1e-12)
    assert t[1] < t[0]


@settings(max_examples=15, deadline=None)
@given(budget=st.sampled_from([512, 2048, 4096, 16384]), isl=st.sampled_from([128, 2000, 32000]),
       osl=st.sampled_from([4, 100, 2000]))
def test_a_stated_budget_moves_the_running_requests_by_its_ratio(budget, isl, osl):
    # n = min(b_max, C / (I + O), N_default x N / N_default / (1 + I / O), c): the budget term scales by N / 8192
    pts = [_row(isl=isl, osl=osl), _row(isl=isl, osl=osl, notes=f"flags: --max-num-batched-tokens {budget}")]
    with jax.enable_x64(True):
        r, _ = _inputs(pts)
        n0, n1 = np.asarray(jax.vmap(running)(r))
        free = dataclasses.replace(r, framework_cap=r.framework_cap * 1e9, concurrency=r.concurrency * 0 + 1e12,
                                   device=dataclasses.replace(r.device, hbm_capacity_bytes=r.device.hbm_capacity_bytes * 1e6))
        f0, f1 = np.asarray(jax.vmap(running)(free))
    raw = 8192.0 / (1.0 + isl / osl)                                  # n >= 1: one request at least
    assert (f0, f1) == pytest.approx((max(raw, 1.0), max(raw * budget / 8192.0, 1.0)), rel=1e-9)
    assert (n1 >= n0) == (budget >= 8192) or n1 == pytest.approx(n0)


def test_pairs_expressed_in_the_table_and_by_family():
    # gpt-oss-20b on one H100, a burst of 1,000 requests of 2,000 in / 100 out: vLLM with and without
    # --async-scheduling (GPUStack performance lab's pair GPS049); the lever hides the host time per step
    pts = [_row(metric="tpot", lever="async:without", pair="A", model="openai/gpt-oss-20b", fmt="fp8"),
           _row(metric="tpot", lever="async:with", pair="A", model="openai/gpt-oss-20b", fmt="fp8",
                notes="flags: --async-scheduling", value=0.9),
           _row(metric="tpot", framework="MindIE 2.1", lever="fw:with", pair="B", model="openai/gpt-oss-20b",
                fmt="fp8", notes="flags: default flags", value=0.5),
           _row(metric="tpot", lever="fw:without", pair="B", model="openai/gpt-oss-20b", fmt="fp8")]
    table = rows(pts, evaluate_points(pts, serving=False), "t.csv", "0" * 64, serving=False)
    assert [r["priced_by"] for r in table] == ["steady state: vllm", "steady state: vllm", "", "steady state: vllm"]
    assert [r["lever_family"] for r in table] == ["", "async scheduling", "framework", ""]
    assert table[1]["pair_status"] == EXPRESSED and table[2]["pair_status"].startswith("not expressed")
    p = pairs(table)
    a, b = p
    assert a["predicted_change_pct"] < 0 and a["sign_agrees"] is True           # measured -10 %
    assert a["size_error_pct"] == pytest.approx(a["predicted_change_pct"] + 10.0)
    assert b["predicted_change_pct"] is None and b["sign_agrees"] is None
    assert sign_agreement(p) == (1, 1)
    fams = {f["lever_family"]: f for f in pair_families(p)}
    assert fams["async scheduling"]["expressed"] == 1 and fams["framework"]["expressed"] == 0
    assert "no loaded-row profile for MindIE" in fams["framework"]["not_expressed"]


def test_a_burst_runs_a_ramp_a_steady_phase_and_a_tail():
    # 1,000 requests of 2,000 in / 100 out, gpt-oss-20b on one H100 under vLLM's 8,192-token budget (its KV
    # cache holds more): n = 8192 / 21 = 390.1;
    # the ramp prefills n prompts at 8,192 - n / 2 tokens a step (97.6 steps), the tail is O = 100 steps, and
    # the steady phase holds the rest of the 100,000 decode tokens (157.6 steps)
    from sweepkit.costmodel.passes import Work, decode_work
    from sweepkit.validation.steady import _step, burst, row_value

    pts = [_row(metric=k, model="openai/gpt-oss-20b", fmt="fp8") for k in ("total_throughput", "tpot")]
    with jax.enable_x64(True):
        r, eff = _inputs(pts)
        one = jax.tree_util.tree_map(lambda x: x[1], r)
        e1 = jax.tree_util.tree_map(lambda x: x[1], eff)
        n = float(running(one))
        assert n == pytest.approx(8192 / 21, rel=1e-9)
        p = 8192 - n / 2
        s_r, s_t = n * 2000 / p, 1000 * 100 / n - n * 2000 / p / 2 - 50
        assert (s_r, s_t) == pytest.approx((97.56, 157.57), abs=0.01)
        half = decode_work(n / 2 * 2050, n / 2)
        t_r = float(_step(one, e1, half, Work(p, p * 2001.0, p)))
        t_tail = float(_step(one, e1, half, Work(0.0, 0.0, 0.0)))
        t_s = float(row_step_time(one, e1))
        out, tpot = (float(x) for x in burst(one, e1))
        total, tpot_row = np.asarray(jax.vmap(row_value)(r, eff))
    assert out == pytest.approx(1000 * 100 / (s_r * t_r + s_t * t_s + 100 * t_tail), rel=1e-9)
    assert tpot == pytest.approx((s_r * n / 2 * t_r + s_t * n * t_s + 100 * n / 2 * t_tail) / 1e5, rel=1e-9)
    assert (total, tpot_row) == pytest.approx((out * 2100 / 100, tpot), rel=1e-9)
    assert out < n / t_s                    # the ramp and the tail: below the steady state's throughput


@settings(max_examples=10, deadline=None)
@given(isl=st.sampled_from([128, 2000, 32000]), osl=st.sampled_from([4, 100, 200]))
def test_a_burst_tends_to_the_steady_state(isl, osl):
    from sweepkit.validation.steady import burst

    pts = [dataclasses.replace(_row(isl=isl, osl=osl), requests=10 ** 9, concurrency=None)]
    with jax.enable_x64(True):
        r, eff = _inputs(pts)
        one, e1 = (jax.tree_util.tree_map(lambda x: x[0], a) for a in (r, eff))
        out, tpot = (float(x) for x in burst(one, e1))
        t = float(row_step_time(one, e1))
        n = float(running(one))
    assert tpot == pytest.approx(t, rel=1e-4) and out == pytest.approx(n / t, rel=1e-4)


def test_levers_named_only_in_the_lever_text():
    base = _row(framework="SGLang", lever="TBO on vs off:without", pair="T")
    tbo = _row(framework="SGLang", lever="two-batch overlap (TBO) on vs off:with", pair="T")
    assert lever_family(tbo, base) == "two-batch overlap"
    assert "the sides run it alike" in pair_status(tbo, base, "steady state: x", "steady state: x")
    # a framework naming TBO runs it on the :with side only: the pair is then expressed
    named = dict(framework="SGLang (DeepEP + TBO)", pair="T")
    tbo_on = _row(lever="two-batch overlap (TBO) on vs off:with", **named)
    tbo_off = _row(lever="two-batch overlap (TBO) on vs off:without", **named)
    assert (two_batch_overlap(tbo_on), two_batch_overlap(tbo_off)) == (True, False)
    assert pair_status(tbo_on, tbo_off, "steady state: x", "steady state: x") == EXPRESSED
    assert two_batch_overlap(_row(lever="kv fp8 vs bf16:without", **named))   # another lever's side keeps it
    ovl = _row(framework="SGLang", lever="overlap scheduling on vs off:with", pair="O")
    assert host_overlap(ovl) and lever_family(ovl, base) == "async scheduling"
    router = _row(lever="cache-aware load balancer vs round-robin data parallel:with", pair="R")
    assert lever_family(router, _row(lever="x:without", pair="R")) == "routing"


def test_tensorrt_llm_per_rank_settings_times_the_attention_dp_ranks():
    # NVIDIA/TensorRT-LLM Best_perf_practice_on_DeepSeek-R1_in_TensorRT-LLM.md, B200 max-throughput with FP8 KV:
    # --tp 8 --ep 8 --max_batch_size 896 --max_num_tokens 2048, enable_attention_dp, --concurrency 7168
    # ("--max_batch_size: Max batch size in each rank"): 8 x 896 = 7,168 requests and 8 x 2,048 tokens per step.
    from sweepkit.validation.levers import per_rank_settings

    notes = "flags: --tp 8 --ep 8 --max_batch_size 896 --max_num_tokens 2048 --concurrency 7168"
    m = dataclasses.replace(_row(metric="max_output_throughput", notes=notes, framework="TensorRT-LLM (PyTorch)",
                                 device="B200", tp=8, gpus=8, model="deepseek-v3", fmt="fp4", isl=1024, osl=2048),
                            kv_format="fp8", ep=8, dp=8, concurrency=7168, request_rate=None, requests=114688)
    assert per_rank_settings(m, 8.0) == (16384.0, 7168.0)
    assert per_rank_settings(m, 1.0) == (2048.0, 896.0)
    assert per_rank_settings(dataclasses.replace(m, notes="flags: --tp 8"), 8.0) == (0.0, 0.0)
    assert per_rank_settings(dataclasses.replace(m, framework="vLLM v0.11.0"), 8.0) == (0.0, 0.0)
    assert scheduler_scales(m) == (1.0, 1.0)          # absolute settings, not ratios to a default
    with jax.enable_x64(True):
        r = jax.tree_util.tree_map(lambda a: a[0], row_inputs([m], 1024.0, 8192.0))
        # n = min(b_max 7,168, C / (I + O), N_tok / (1 + I / O) = 10,923, c = 7,168): the stated cap, where the
        # engine's 1,024 per replica ran a seventh of the deployment's batch
        assert float(r.framework_cap) == 7168.0 and float(r.framework_budget) == 16384.0
        assert float(running(r)) == pytest.approx(7168.0)
        unstated = jax.tree_util.tree_map(lambda a: a[0], row_inputs([dataclasses.replace(m, notes="")], 1024.0, 8192.0))
        assert float(running(unstated)) == pytest.approx(1024.0)
