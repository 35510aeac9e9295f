"""Throughput and latency points simulated by the serving engine (tiny runs: 8 requests of 32 + 8 tokens)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest
from click.testing import CliRunner

from sweepkit.catalogue import get_device, get_model
from sweepkit.cli import main
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.passes import chunk_work, combine, decode_work
from sweepkit.costmodel.steps import pass_cost
from sweepkit.errors import InputError
from sweepkit.validation import MODELLED, parse_measurements, status
from sweepkit.validation.serving_runs import evaluate_serving

HEAD = ("source,device,model,metric,value,unit,weight_format,kv_format,compute_format,input_tokens,"
        "output_tokens,requests,request_rate,concurrency,percentile\n")
B, P, O = 8, 32, 8
ROWS = (f"tiny,H100,llama-3.1-8b,max_output_throughput,2000,tok/s,fp8,fp8,fp8,{P},{O},{B},,,\n"
        f"tiny,H100,llama-3.1-8b,ttft,4,ms,fp8,fp8,fp8,{P},{O},{B},0.5,,50\n"
        f"tiny,H100,llama-3.1-8b,ttft,4,ms,fp8,fp8,fp8,{P},{O},{B},,,\n")


def _pass_s(work) -> float:
    """One target pass of Llama-3.1-8B FP8 on one H100 with the catalogue's efficiencies (sweepkit.costmodel)."""
    with jax.enable_x64(True):
        f = jnp.float64
        return float(pass_cost(work, model_arrays(get_model("llama-3.1-8b"), f), device_arrays(get_device("H100"), f),
                               f(1), f(1), f(1), f(get_device("H100").speedup("fp8"))).t_s)


def test_max_throughput_point_is_the_engine_makespan_within_its_closed_form_bracket():
    # B requests of P prompt and O output tokens queued at once, all in one batch: the makespan is one prefill
    # pass of B x P tokens and O - 1 decode passes of B rows (row context P + j - 1 at step j), plus at most one
    # single-request prefill pass (the offline arrivals are 1 us apart, so the first request may start alone).
    m = parse_measurements(HEAD + ROWS, "tiny.csv")[0]
    lower = _pass_s(combine(*[chunk_work(0.0, float(P))] * B)) + sum(
        _pass_s(decode_work(float(B * (P + j - 1)), float(B))) for j in range(1, O))
    upper = lower + _pass_s(chunk_work(0.0, float(P)))
    tok_s = evaluate_serving(m)
    assert B * O / upper <= tok_s <= B * O / lower


def test_latency_point_at_a_request_rate_and_the_reasons_a_point_is_not_simulated():
    points = parse_measurements(HEAD + ROWS, "tiny.csv")
    assert [status(m) for m in points] == [MODELLED, MODELLED, "not modelled: needs request_rate or concurrency"]
    # At 0.5 requests/s requests never overlap: TTFT is one prefill pass of one prompt (plus 0.5 ms steps).
    ttft = evaluate_serving(points[1])
    assert ttft == pytest.approx(_pass_s(chunk_work(0.0, float(P))), rel=1e-6)


def test_validate_prices_serving_points_and_reports_their_error(tmp_path):
    f = tmp_path / "tiny.csv"
    f.write_text(HEAD + ROWS)
    res = CliRunner().invoke(main, ["validate", "--measurements", str(f), "--warehouse", str(tmp_path / "wh"),
                                    "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    for r in rows[:2]:
        assert r["status"] == "modelled" and r["modelled"] > 0
        assert r["error_pct"] == pytest.approx(100 * (r["modelled"] / r["measured"] - 1), abs=0.006)
    assert rows[1]["unit"] == "ms" and rows[1]["modelled"] == pytest.approx(1e3 * _pass_s(chunk_work(0.0, 32.0)))
    assert rows[2]["modelled"] is None
    assert "tiny: median |error|" in res.stderr and "over 2 points; 1 not modelled" in res.stderr


@pytest.mark.parametrize("cell, message", [
    ("request_rate=-1", "request_rate = '-1' is not allowed; expected a number > 0 or inf (every request at t = 0)"),
    ("percentile=95", "percentile = '95' is not allowed; expected one of mean, 50, 90, 99"),
    ("requests=0", "requests = '0' is not allowed; expected an integer >= 1"),
])
def test_bad_serving_columns_are_one_line(cell, message):
    key, value = cell.split("=")
    cols = HEAD.strip().split(",")
    cells = ROWS.splitlines()[1].split(",")
    cells[cols.index(key)] = value
    with pytest.raises(InputError) as exc:
        parse_measurements(HEAD + ",".join(cells) + "\n", "f.csv")
    assert str(exc.value) == f"f.csv row 1 (line 2): {message}"
