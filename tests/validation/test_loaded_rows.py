"""Loaded rows (fixed concurrency or a burst) in the steady state, their profiles and the token-budget fit."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue.efficiency import SHIPPED, load_profile, packaged_profile, parse_profile, profile_for, profile_toml
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time
from sweepkit.costmodel.passes import Work, decode_work
from sweepkit.errors import InputError
from sweepkit.validation import Measurement
from sweepkit.validation.framework_fit import calibrate_framework, framework_rows
from sweepkit.validation.profiles import row_profile
from sweepkit.validation.steady import row_value, running
from sweepkit.validation.steady_rows import concurrency, row_inputs


def _row(metric, isl, osl, conc=None, rate=None, requests=None, framework="vLLM", gpus=1, value=1.0,
         percentile="mean", split="train", device="H100", model="llama-3.1-8b") -> Measurement:
    unit = "s" if metric in ("tpot", "itl") else "tok/s"
    return Measurement(source="s", device=device, model=model, metric=metric, value=value, unit=unit,
                       value_si=value, row=1, framework=framework, tp=1, gpus=gpus, weight_format="fp8",
                       kv_format="fp8", compute_format="fp8", input_tokens=isl, output_tokens=osl,
                       concurrency=conc, request_rate=rate, requests=requests, percentile=percentile, split=split)


def _values(rows, profile, budget=8192.0):
    with jax.enable_x64(True):
        r = row_inputs(rows, 1024, budget)
        eff = efficiency_arrays([profile.fields(m.device, m.compute_format) for m in rows])
        return tuple(np.asarray(x) for x in _row_values(r, eff))


@jax.jit
def _row_values(r, eff):
    """Every row's value and running requests, compiled once per number of rows (as validation prices rows)."""
    return jax.vmap(row_value)(r, eff), jax.vmap(running)(r)


def test_concurrency_of_a_row():
    assert concurrency(_row("tpot", 100, 100, conc=32)) == 32.0
    assert concurrency(_row("tpot", 100, 100, rate=float("inf"), requests=500)) == 500.0
    assert concurrency(_row("tpot", 100, 100, rate=float("inf"))) == float("inf")
    assert concurrency(_row("max_output_throughput", 100, 100)) == float("inf")


def test_loaded_row_closed_form_and_littles_law():
    # 8 requests of 1000 in / 1000 out on one H100: n = 8; a step is 8 decode rows at 1500 mean context, and
    # 8 / 1000 of the steps compute a whole 1000-token prompt beside them (sweepkit.validation.prompt_chunks).
    # TPOT = t_step, output = 8 / t_step, total = output x 2000 / 1000.
    seed = packaged_profile()
    rows = [_row(k, 1000, 1000, conc=8) for k in ("output_throughput", "total_throughput", "tpot", "itl")]
    vals, n = _values(rows, seed)
    assert n == pytest.approx([8.0] * 4)
    with jax.enable_x64(True):
        r = jax.tree_util.tree_map(lambda x: x[0], row_inputs(rows[:1], 1024, 8192))
        eff = jax.tree_util.tree_map(lambda x: x[0], efficiency_arrays([seed.fields("H100", "fp8")]))
        t_chunk, t_dec = (float(step_time(decode_work(8.0 * 1500.0, 8.0), w, r.model, r.device, eff, r.tp,
                                          r.weight_bytes, r.kv_bytes, r.compute_speedup))
                          for w in (Work(1000.0, 1000.0 * 1001.0, 1000.0), Work(0.0, 0.0, 0.0)))
        t = 0.008 * t_chunk + 0.992 * t_dec
    assert vals == pytest.approx([8 / t, 16 / t, t, t], rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4096), st.integers(16, 8000), st.integers(16, 2000), st.sampled_from([1, 2, 4]))
def test_littles_law_and_the_concurrency_cap(conc, isl, osl, replicas):
    seed = packaged_profile()
    rows = [_row(k, isl, osl, conc=conc, gpus=replicas) for k in ("output_throughput", "tpot")]
    (out, tpot), (n, _) = _values(rows, seed)
    assert out * tpot == pytest.approx(replicas * n, rel=1e-9)          # L = lambda W per output token
    assert n <= max(conc / replicas, 1.0) + 1e-9
    (more, _), _ = _values([_row("output_throughput", isl, osl, conc=conc + 64, gpus=replicas)] * 2, seed)
    assert more >= out * (1 - 1e-9)                                     # more clients never lower throughput


def test_loaded_rows_are_priced_only_by_profiles_fitted_on_them():
    tpot = _row("tpot", 1000, 1000, conc=8)
    assert row_profile(tpot, None) is profile_for("vLLM") and profile_for("vLLM").token_budget > 0
    assert row_profile(_row("tpot", 1000, 1000, conc=8, framework="TensorRT-LLM"), None) is None
    assert row_profile(_row("max_output_throughput", 1000, 1000, framework="TensorRT-LLM"), None) \
        is profile_for("TensorRT-LLM")
    assert row_profile(_row("tpot", 1000, 1000, conc=8), packaged_profile()) is None     # seed: no budget
    assert not framework_rows([_row("tpot", 1000, 1000, percentile="99", conc=8)], "vLLM")
    assert not framework_rows([_row("tpot", 1000, 1000)], "vLLM")                     # no load stated
    assert set(SHIPPED) == {"tensorrt-llm", "tensorrt-llm-triton", "tensorrt-llm-gptsession", "vllm", "sglang"}


def test_scheduler_table_round_trips_and_bad_budget_is_one_line(tmp_path):
    p = dataclasses.replace(packaged_profile(), token_budget=3000.0)
    assert parse_profile(profile_toml(p), "t.toml").token_budget == 3000.0
    assert parse_profile(profile_toml(packaged_profile()), "t.toml").token_budget == 0.0
    bad = tmp_path / "bad.toml"
    bad.write_text(profile_toml(p).replace("token_budget = 3000.0", "token_budget = -1"))
    with pytest.raises(InputError, match=r"bad.toml \[scheduler\].*token_budget"):
        load_profile(bad)


def test_fit_recovers_a_token_budget_from_loaded_rows():
    # Bursts priced at a 3000-token budget (seed efficiencies): throughput and TPOT pin n, hence the budget.
    # (A framework whose defaults sweepkit.validation.levers does not know: vLLM's and SGLang's budgets are
    # their defaults.)
    truth = dataclasses.replace(packaged_profile(), token_budget=3000.0)
    shapes = [(i, o) for i, o in ((2000, 100), (4000, 200), (1000, 1000), (8000, 400))]
    rows = [_row(k, i, o, rate=float("inf"), framework="LMDeploy v0.9") for i, o in shapes
            for k in ("total_throughput", "tpot")]
    vals, _ = _values(rows, truth, budget=3000.0)
    rows = [dataclasses.replace(m, value=float(v), value_si=float(v)) for m, v in zip(rows, vals)]
    fit = calibrate_framework(rows, "LMDeploy", file="synthetic.csv", sha256="-")
    assert fit.profile.token_budget == pytest.approx(3000.0, rel=0.05)
    assert np.max(np.abs(fit.after_pct)) < 2.0
