"""A burst under a prefill-first scheduler (SGLang's default)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue.efficiency import profile_for
from sweepkit.costmodel.efficiency import efficiency_arrays
from sweepkit.costmodel.passes import Work, decode_work
from sweepkit.validation import Measurement
from sweepkit.validation.levers import prefill_first
from sweepkit.validation.prefill_first import prefill_first_burst, prefill_steps, serial
from sweepkit.validation.steady import _step, burst, kv_positions, row_value
from sweepkit.validation.steady_rows import row_inputs


def _row(metric="tpot", isl=128, osl=4, requests=1000, framework="SGLang v0.5.3", notes="") -> Measurement:
    unit = "s" if metric == "tpot" else "tok/s"
    return Measurement(source="s", device="H100", model="llama-3.1-8b", metric=metric, value=1.0, unit=unit,
                       value_si=1.0, row=1, framework=framework, tp=1, gpus=1, weight_format="fp8", kv_format="fp8",
                       compute_format="fp8", input_tokens=isl, output_tokens=osl, request_rate=float("inf"),
                       requests=requests, percentile="mean", notes=notes)


def test_closed_form_of_one_wave():
    # R_r = n_w = 1,000 prompts of 128 tokens, O = 4, 8,192-token prefill steps: P = 15.625 steps of 0.25 s and
    # 3 decode steps of 0.03 s, 3.99625 s in all; a request waits (P - 1) / 2 prefill steps after its first token.
    with jax.enable_x64(True):
        out, tpot = prefill_first_burst(1000.0, 1000.0, 128.0, 4.0, 8192.0, 0.25, 0.03)
        assert float(prefill_steps(1000.0, 128.0, 8192.0)) == 15.625
    assert float(out) == pytest.approx(4000 / 3.99625, rel=1e-12)
    assert float(tpot) == pytest.approx(0.03 + 14.625 * 0.25 / 6, rel=1e-12)


def test_long_prompts_wait_for_the_later_prompts_of_their_wave_only():
    # 10 prompts of 32,000 tokens in steps of 8,000: 4 steps each, P = 40; the j-th prompt's first token comes
    # after 4 j steps and waits 4 (10 - j) more: 18 steps on average = (P - 4) / 2. One such prompt waits none.
    with jax.enable_x64(True):
        _, tpot = prefill_first_burst(10.0, 10.0, 32000.0, 101.0, 8000.0, 0.5, 0.02)
        _, alone = prefill_first_burst(10.0, 1.0, 32000.0, 101.0, 8000.0, 0.5, 0.02)
    assert float(tpot) == pytest.approx(0.02 + 18 * 0.5 / 100, rel=1e-12)
    assert float(alone) == pytest.approx(0.02, rel=1e-12)


def test_a_kv_cache_of_fewer_than_two_requests_runs_them_one_at_a_time():
    # Qwen3-32B bf16 on one H100 (80 GB, 65.5 GB of weights): its KV cache holds less than one 32,100-token
    # request, so a vLLM burst of them is serial: TPOT is one decode row's step, the prompts are not in it.
    assert bool(serial(64199.0, 32000.0, 100.0)) and not bool(serial(64200.0, 32000.0, 100.0))
    rows = [_row(m, isl=32000, osl=100, requests=100, framework="vLLM v0.11.0") for m in ("total_throughput", "tpot")]
    rows = [dataclasses.replace(m, model="qwen3-32b", weight_format="bf16", kv_format="bf16", compute_format="bf16")
            for m in rows]
    prof = profile_for("vLLM")
    with jax.enable_x64(True):
        r = row_inputs(rows, 1024, 8192)
        eff = efficiency_arrays([prof.fields("H100", "bf16")] * len(rows))
        vals = np.asarray(jax.vmap(row_value)(r, eff))
        one, e1 = (jax.tree_util.tree_map(lambda x: x[0], a) for a in (r, eff))
        assert bool(serial(kv_positions(one), 32000.0, 100.0))
        p = 32000 / 8192
        t_p = float(_step(one, e1, Work(0.0, 0.0, 0.0), Work(8192.0, 8192.0 * 32001.0, 8192.0)))
        t_d = float(_step(one, e1, decode_work(32050.0, 1.0), Work(0.0, 0.0, 0.0)))
    assert vals == pytest.approx([100 * 32100 / (100 * (p * t_p + 99 * t_d)), t_d], rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(waves=st.integers(1, 8), n_w=st.floats(1.0, 2000.0), isl=st.sampled_from([16.0, 128.0, 4000.0]),
       osl=st.sampled_from([1.0, 2.0, 100.0]), t_p=st.floats(1e-3, 1.0), t_d=st.floats(1e-3, 0.1))
def test_waves_add_up_and_tpot_never_beats_a_decode_step(waves, n_w, isl, osl, t_p, t_d):
    budget = 8192.0
    with jax.enable_x64(True):
        out, tpot = prefill_first_burst(waves * n_w, n_w, isl, osl, budget, t_p, t_d)
    p = max(n_w * isl / budget, 1.0)
    assert float(out) == pytest.approx(n_w * osl / (p * t_p + (osl - 1) * t_d), rel=1e-9)  # one wave's rate
    assert float(tpot) >= t_d * (1 - 1e-12)
    if osl == 1.0 or p == 1.0:                    # nothing waits after its first token but decode steps
        assert float(tpot) == pytest.approx(t_d, rel=1e-12)


def test_sglang_runs_prefills_first_unless_mixed_chunks_are_on():
    assert prefill_first(_row())
    assert not prefill_first(_row(notes="flags: --enable-mixed-chunk"))
    assert not prefill_first(_row(framework="vLLM v0.11.0"))


def test_an_sglang_burst_is_priced_in_waves():
    # Llama-3.1-8B fp8 on one H100 (its KV cache holds all 1,000 requests of 132 positions: one wave of 1,000),
    # SGLang's fitted token budget: the burst's TPOT and throughput are the closed form over the profiled
    # prefill and decode steps; with --enable-mixed-chunk the row is priced by the mixed steps instead.
    prof = profile_for("SGLang")
    rows = [_row(m, notes=n) for n in ("", "flags: --enable-mixed-chunk") for m in ("total_throughput", "tpot")]
    with jax.enable_x64(True):
        r = row_inputs(rows, 1024, prof.token_budget)
        eff = efficiency_arrays([prof.fields("H100", "fp8")] * len(rows))
        vals = np.asarray(jax.vmap(row_value)(r, eff))
        one, e1 = (jax.tree_util.tree_map(lambda x: x[0], a) for a in (r, eff))
        assert float(kv_positions(one)) / 132 > 1000
        n_w, budget = 1000.0, prof.token_budget
        p = n_w * 128 / budget
        chunk = n_w * 128 / p
        t_p = float(_step(one, e1, Work(0.0, 0.0, 0.0), Work(chunk, chunk * 129.0, chunk)))
        t_d = float(_step(one, e1, decode_work(n_w * 130.0, n_w), Work(0.0, 0.0, 0.0)))
        mixed = [float(x) for x in burst(dataclasses.replace(one, prefill_first=0.0 * one.prefill_first), e1)]
    total_s = p * t_p + 3 * t_d
    assert vals[:2] == pytest.approx([1000 * 132 / total_s, t_d + (p - 1) * t_p / 6], rel=1e-9)
    assert vals[2:] == pytest.approx([mixed[0] * 132 / 4, mixed[1]], rel=1e-9)
    assert vals[1] > t_d + 7 * t_p / 3           # each request waits through the wave's later prefills (P > 15)

