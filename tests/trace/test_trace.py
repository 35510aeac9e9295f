"""The mechanism trace: acceptance statistics, per-pass times equal to the cost model's, the stored table."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from sweepkit import evaluate
from sweepkit.cli import main
from sweepkit.trace.scheduler import Scenario, accepted_drafts, run_mode, summary
from sweepkit.store.trace_steps import SCHEMA, write_trace
from sweepkit.speculative import expected_tokens
from sweepkit.store import Warehouse, run_query


def _moments(alpha: float, gamma: int) -> tuple[float, float]:
    """Mean and variance of tokens per pass, k + 1 with k = min(Geometric, gamma)."""
    p = np.array([alpha ** i * (1 - alpha) for i in range(gamma)] + [alpha ** gamma])
    x = np.arange(gamma + 1) + 1.0
    mean = float((p * x).sum())
    return mean, float((p * (x - mean) ** 2).sum())


@pytest.mark.parametrize("alpha, gamma", [(0.7, 3), (0.5, 5), (0.9, 2)])
def test_tokens_per_pass_average_expected_tokens(alpha, gamma):
    """Over ~7,000 row-passes the mean of (accepted + 1) is E(alpha, gamma) within 4 standard errors
    (two-sided, about 6e-5 false-alarm rate); the acceptance draws are the trace's own."""
    sc = Scenario(gamma=gamma, alpha=alpha, prompt_tokens=(128,) * 300, output_tokens=(64,) * 300, seed=7)
    cols = run_mode(sc.checked(), speculative=True)
    dec = cols["pass_kind"] == "decode"
    tokens = cols["accepted_tokens"][dec] + 1.0
    mean, var = _moments(alpha, gamma)
    assert mean == pytest.approx(float(expected_tokens(alpha, gamma)), rel=1e-6)
    se = math.sqrt(var / tokens.size)
    assert tokens.size > 5000
    assert abs(tokens.mean() - mean) < 4 * se, (tokens.mean(), mean, se)


def test_acceptance_draws_deterministic_and_extreme_alphas():
    a = accepted_drafts(3, 4, 10, 3, 0.7)
    assert np.array_equal(a, accepted_drafts(3, 4, 10, 3, 0.7))
    assert not np.array_equal(a, accepted_drafts(4, 4, 10, 3, 0.7))
    assert (accepted_drafts(0, 4, 10, 3, 0.0) == 0).all()
    assert (accepted_drafts(0, 4, 10, 3, 1.0) == 3).all()


def test_every_request_gets_its_output_and_steps_are_contiguous():
    sc = Scenario(prompt_tokens=(512, 384, 100), output_tokens=(40, 17, 1), arrival_s=(0.0, 0.0, 0.05))
    for spec in (False, True):
        c = run_mode(sc.checked(), spec)
        for r, out in enumerate(sc.output_tokens):
            mine = c["request"] == r
            assert c["emitted_tokens"][mine].sum() == out
            assert c["tokens_done"][mine].max() == out
        steps = sorted({(int(i), float(s), float(e)) for i, s, e in zip(c["pass_index"], c["start_s"], c["end_s"])})
        assert [s[0] for s in steps] == list(range(len(steps)))
        for (_, _, end), (_, start, _) in zip(steps, steps[1:]):
            assert start >= end - 1e-15          # no overlap; a gap only while waiting for an arrival
        assert (c["accepted_tokens"] <= c["drafted_tokens"]).all()
        assert (c["emitted_tokens"] <= c["accepted_tokens"] + 1).all()


def test_per_pass_times_equal_the_cost_model():
    """Every decode step of B rows holding C = B x S tokens takes exactly the decode point's times."""
    sc = Scenario(prompt_tokens=(512, 512), output_tokens=(60, 60)).checked()
    for spec in (False, True):
        c = run_mode(sc, spec)
        seen = 0
        for i in np.unique(c["pass_index"]):
            row = np.flatnonzero(c["pass_index"] == i)[0]
            b, ctx = int(c["batch"][row]), int(c["context_tokens"][row])
            if c["pass_kind"][row] != "decode" or ctx % b:
                continue
            ref = evaluate(device="H100", model="llama-3-8b", draft="mtp", batch=b, context=ctx // b,
                           gamma=3, alpha=0.7)
            draft_s = c["verify_start_s"][row] - c["start_s"][row]
            target_s = c["end_s"][row] - c["verify_start_s"][row]
            if spec:
                assert draft_s == pytest.approx(ref["t_draft_s"], rel=1e-9)
                assert target_s == pytest.approx(ref["t_verify_pass_s"], rel=1e-9)
                assert c["bound"][row] == ref["verify_bound"]
            else:
                assert draft_s == 0.0
                assert target_s == pytest.approx(ref["t_plain_pass_s"], rel=1e-9)
                assert c["bound"][row] == ref["plain_bound"]
            seen += 1
        assert seen >= 8


def test_seed_scenario_step_times():
    """the reference simulator (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim): plain decode step at b = 2 is 6.144 ms, the speculative step 7.813 ms."""
    plain = run_mode(Scenario().checked(), False)
    spec = run_mode(Scenario().checked(), True)
    first = lambda c: np.flatnonzero(c["pass_kind"] == "decode")[0]  # noqa: E731
    p, s = first(plain), first(spec)
    assert (plain["end_s"][p] - plain["start_s"][p]) * 1e3 == pytest.approx(6.144, rel=1e-3)
    assert (spec["end_s"][s] - spec["start_s"][s]) * 1e3 == pytest.approx(7.813, rel=1e-3)
    assert summary(spec)["tpot_p99_s"] < summary(plain)["tpot_p99_s"]


def test_trace_steps_table_and_summary_query(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    sc = Scenario(seed=3)
    run_id = write_trace(wh, sc)
    cols = wh.query("select * from trace_steps where run_id = $r", {"r": run_id})
    assert cols.column_names == ["run_id"] + SCHEMA.names
    got = {r["mode"]: r for r in run_query(wh, "trace_summary", {"run_id": run_id}).to_pylist()}
    for spec, mode in ((False, "plain"), (True, "speculative")):
        ref = summary(run_mode(sc.checked(), spec))
        assert got[mode]["tokens_per_pass"] == pytest.approx(ref["tokens_per_pass"], abs=5e-4)
        assert got[mode]["tpot_p99_ms"] == pytest.approx(ref["tpot_p99_s"] * 1e3, abs=5e-3)
        assert got[mode]["ttft_p99_ms"] == pytest.approx(ref["ttft_p99_s"] * 1e3, abs=5e-3)
    assert got["speculative"]["tokens_per_pass_expected"] == pytest.approx(2.533, abs=1e-3)


def test_cli_trace_json_and_bad_input(tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["trace", "--warehouse", str(tmp_path), "--format", "json", "--outputs", "12"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["mode"] for r in rows] == ["plain", "speculative"]
    for args, field in ((["--alpha", "1.5"], "alpha"), (["--prompts", "5,x"], "--prompts"),
                        (["--outputs", "1,2,3"], "outputs"), (["--draft", "none"], "draft"),
                        (["--device", "H1000"], "device")):
        res = runner.invoke(main, ["trace", "--warehouse", str(tmp_path), *args])
        assert res.exit_code == 2, res.output
        lines = [line for line in res.output.splitlines() if line.strip()]
        assert len(lines) == 1 and field in lines[0], res.output
