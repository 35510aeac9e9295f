"""The steady state's prompts in chunks of the step's token budget (sweepkit.validation.prompt_chunks)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue.efficiency import profile_for
from sweepkit.costmodel.efficiency import efficiency_arrays
from sweepkit.costmodel.passes import Work, as_prefill, decode_work
from sweepkit.validation import Measurement
from sweepkit.validation.prompt_chunks import chunked_step_s, prompt_chunks
from sweepkit.validation.steady import _step, burst, row_step_time, running, step_work
from sweepkit.validation.steady_rows import row_inputs


def _row(isl=2000, osl=100, metric="tpot", model="qwen3-32b", device="H100", concurrency=None) -> Measurement:
    unit = "s" if metric == "tpot" else "tok/s"
    return Measurement(source="s", device=device, model=model, metric=metric, value=1.0, unit=unit, value_si=1.0,
                       row=1, framework="vLLM v0.11.0", tp=1, gpus=1, weight_format="bf16", kv_format="bf16",
                       compute_format="bf16", input_tokens=isl, output_tokens=osl, requests=500,
                       request_rate=None if concurrency else float("inf"), concurrency=concurrency,
                       percentile="mean", notes="flags: defaults")


def _one(m: Measurement):
    prof = profile_for("vLLM")
    r = row_inputs([m], 1024, prof.token_budget)
    eff = efficiency_arrays([prof.fields(m.device, m.compute_format)])
    return tuple(jax.tree_util.tree_map(lambda x: x[0], a) for a in (r, eff))


def test_closed_form():
    # n = 10 requests of 2,000 in / 80 out: 250 prompt tokens per step on average, computed as a whole prompt
    # (2,000 < 8,192 - 10) in 1 step of 8; 390 requests of 2,000 / 100 need 7,800 per step: every step.
    with jax.enable_x64(True):
        assert [float(x) for x in prompt_chunks(10.0, 2000.0, 80.0, 8192.0)] == [2000.0, 0.125]
        assert [float(x) for x in prompt_chunks(390.0, 2000.0, 100.0, 8192.0)] == [7800.0, 1.0]
        # a 32,000-token prompt beside 8 decode rows: chunks of the 8,184 tokens left, 2,560 per step on average
        p, f = prompt_chunks(8.0, 32000.0, 100.0, 8192.0)
    assert (float(p), float(f)) == pytest.approx((8184.0, 2560.0 / 8184.0), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(n=st.floats(1.0, 2000.0), isl=st.floats(1.0, 40000.0), osl=st.floats(1.0, 4000.0),
       budget=st.sampled_from([512.0, 2048.0, 8192.0, 16384.0]))
def test_the_prompt_tokens_per_step_are_kept_and_a_chunk_fits_the_budget(n, isl, osl, budget):
    with jax.enable_x64(True):
        p, f = (float(x) for x in prompt_chunks(n, isl, osl, budget))
    assert f * p == pytest.approx(n * isl / osl, rel=1e-12)       # n I / O prompt tokens per step
    assert 0.0 < f <= 1.0 + 1e-12
    assert p <= max(isl, n * isl / osl) * (1 + 1e-12)              # a chunk is at most one prompt
    if n * (1.0 + isl / osl) <= budget:                             # the steady state's n (token budget bound)
        assert p + n <= budget * (1 + 1e-12)                       # decode rows and the chunk fit one step


@settings(max_examples=30, deadline=None)
@given(n=st.floats(1.0, 500.0), isl=st.sampled_from([128.0, 2000.0, 32000.0]), osl=st.sampled_from([4.0, 100.0, 2000.0]))
def test_a_linear_step_costs_the_same_spread_or_in_chunks_and_a_convex_one_no_less(n, isl, osl):
    # step(T) = a + b T (linear in the step's tokens) against max(a, b T) (a weight read hiding compute)
    dec = decode_work(n * isl, n)
    spread = n * isl / osl
    with jax.enable_x64(True):
        linear = lambda d, p: 0.01 + 1e-5 * (d.tokens + p.tokens)  # noqa: E731
        convex = lambda d, p: jax.numpy.maximum(0.01, 1e-5 * (d.tokens + p.tokens))  # noqa: E731
        got_l = float(chunked_step_s(linear, dec, n, isl, osl, 8192.0))
        got_c = float(chunked_step_s(convex, dec, n, isl, osl, 8192.0))
    assert got_l == pytest.approx(0.01 + 1e-5 * (n + spread), rel=1e-9)
    assert got_c >= max(0.01, 1e-5 * (n + spread)) * (1 - 1e-12)


def test_the_mean_step_mixes_chunk_steps_and_decode_steps():
    # Qwen3-32B bf16 on one H100 (vLLM defaults: 8,192 tokens): the KV cache holds n = 11.77 requests of 2,100
    # positions, 235 prompt tokens per step on average, computed as whole 2,000-token prompts in 11.8 % of the
    # steps; the chunk steps are compute-bound, so the mean step is longer than the spread step.
    with jax.enable_x64(True):
        r, e = _one(_row())
        n = float(running(r))
        p, f = (float(x) for x in prompt_chunks(n, 2000.0, 100.0, 8192.0))
        dec = decode_work(n * 2050.0, n)
        t_chunk = float(_step(r, e, dec, as_prefill(Work(p, p * 2001.0, p, rows=p / 2000.0))))
        t_dec = float(_step(r, e, dec, Work(0.0, 0.0, 0.0)))
        spread = float(_step(r, e, *step_work(r)))
        t = float(row_step_time(r, e))
        out, tpot = (float(x) for x in burst(dataclasses.replace(r, burst_requests=1e12 * r.burst_requests), e))
    assert n == pytest.approx(11.77, abs=0.01) and (p, f) == pytest.approx((2000.0, n * 20 / 2000), rel=1e-12)
    assert t == pytest.approx(f * t_chunk + (1 - f) * t_dec, rel=1e-12)
    assert t > spread
    assert tpot == pytest.approx(t, rel=1e-4) and out == pytest.approx(n / t, rel=1e-4)   # R -> inf: steady


def test_a_step_that_needs_more_than_a_chunk_is_the_spread_step():
    # 128 in / 4 out: n I / O prompt tokens per step exceed one 128-token prompt, so every step carries them
    with jax.enable_x64(True):
        r, e = _one(_row(isl=128, osl=4))
        assert float(prompt_chunks(running(r), 128.0, 4.0, 8192.0)[1]) == 1.0
        assert float(row_step_time(r, e)) == float(_step(r, e, *step_work(r)))


def test_a_fixed_concurrency_row_is_priced_with_chunks_too():
    # 8 users of 20,000 in / 2,000 out: 80 prompt tokens per step on average, computed in chunks of 8,184
    with jax.enable_x64(True):
        r, e = _one(_row(isl=20000, osl=2000, metric="total_throughput", model="llama-3.1-8b", concurrency=8))
        assert float(running(r)) == 8.0
        p, f = (float(x) for x in prompt_chunks(8.0, 20000.0, 2000.0, 8192.0))
        dec = decode_work(8.0 * 21000.0, 8.0)
        want = (f * float(_step(r, e, dec, as_prefill(Work(p, p * 20001.0, p, rows=p / 20000.0))))
                + (1 - f) * float(_step(r, e, dec, Work(0.0, 0.0, 0.0))))
        got = float(row_step_time(r, e))
    assert (p, f) == pytest.approx((8184.0, 80.0 / 8184.0), rel=1e-12)
    assert np.isclose(got, want, rtol=1e-12)


def test_attention_dp_ranks_prefill_on_their_own_schedules():
    # TensorRT-LLM's DeepSeek-R1 DEP8 run (8 x 384 requests of 1,024 / 2,048, --max_num_tokens 1,536 a rank):
    # a rank prefills one 1,024-token prompt in f_r = 192 / 1,024 = 0.1875 of its steps; a step carries a prompt
    # on some rank with probability 1 - 0.8125^8 (NVIDIA TensorRT-LLM blog10, ADP Balance Strategy).
    with jax.enable_x64(True):
        p, f = (float(x) for x in prompt_chunks(3072.0, 1024.0, 2048.0, 8 * 1536.0, 8.0))
    assert f == pytest.approx(1.0 - 0.8125 ** 8, rel=1e-12)
    assert p * f == pytest.approx(3072.0 * 1024.0 / 2048.0, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(n=st.floats(1.0, 2000.0), isl=st.floats(1.0, 40000.0), osl=st.floats(1.0, 4000.0),
       budget=st.sampled_from([512.0, 2048.0, 8192.0, 16384.0]), ranks=st.sampled_from([2.0, 4.0, 8.0, 16.0]))
def test_ranks_prefill_at_least_as_often_as_one_scheduler_and_keep_the_tokens(n, isl, osl, budget, ranks):
    # D ranks each with n / D requests and N_tok / D tokens: the share of steps with a prompt somewhere is never
    # below one rank's share, and D = 1 is the single scheduler's rule.
    with jax.enable_x64(True):
        p, f = (float(x) for x in prompt_chunks(n, isl, osl, budget, ranks))
        p1, f1 = (float(x) for x in prompt_chunks(n / ranks, isl, osl, budget / ranks))
        q, g = (float(x) for x in prompt_chunks(n, isl, osl, budget, 1.0))
    # one scheduler's closed form (module docstring): c_p = min(I, max(N_tok - n, 1)), p = max(c_p, n I / O)
    q0 = max(min(isl, max(budget - n, 1.0)), n * isl / osl)
    g0 = n * isl / osl / q0
    assert f * p == pytest.approx(n * isl / osl, rel=1e-12)
    assert f1 * (1 - 1e-12) <= f <= 1.0 + 1e-12
    assert f == pytest.approx(1.0 - (1.0 - f1) ** ranks, rel=1e-9, abs=1e-12)
    assert (q, g) == pytest.approx((q0, g0), rel=1e-12)


@pytest.mark.parametrize("ranks", [1.0, 8.0])
def test_no_prompt_tokens_give_no_prompt_steps_and_finite_gradients(ranks):
    # n I / O = 0 (no request, or no prompt): f = 0 and a finite chunk, so f x step stays 0 and the fit's
    # Jacobian finite
    with jax.enable_x64(True):
        p, f = (float(x) for x in prompt_chunks(0.0, 1024.0, 2048.0, 8192.0, ranks))
        grad = jax.grad(lambda n: prompt_chunks(n, 1024.0, 2048.0, 8192.0, ranks)[0])(0.0)
    assert (p, f) == (1024.0, 0.0)
    assert bool(jax.numpy.isfinite(grad))
