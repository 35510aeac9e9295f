"""Many serving points at once: closed loops, means, total throughput, lever pairs, the accuracy summary.

Tiny runs (8 requests of 32 + 8 tokens, Llama-3.1-8B FP8 on one H100) so each test takes seconds.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest
from click.testing import CliRunner

from sweepkit.catalogue import get_device, get_model
from sweepkit.cli import main
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.passes import chunk_work
from sweepkit.costmodel.steps import pass_cost
from sweepkit.validation import parse_measurements
from sweepkit.validation.serving_runs import evaluate_serving_points
from sweepkit.validation.summary import markdown, pairs, sign_agreement, targets

HEAD = ("source,device,model,metric,value,unit,weight_format,kv_format,compute_format,input_tokens,"
        "output_tokens,requests,request_rate,concurrency,percentile,lever,pair_id,framework,split\n")
P, O = 32, 8


def _row(metric, value, unit, kv="fp8", rate="", conc="", pct="", lever="", pair="", requests=8):
    return (f"tiny,H100,meta-llama/Llama-3.1-8B,{metric},{value},{unit},fp8,{kv},fp8,{P},{O},{requests},{rate},"
            f"{conc},{pct},{lever},{pair},TensorRT-LLM v0.17,test\n")


def _prefill_s() -> float:
    """One prefill pass of one 32-token prompt (sweepkit.costmodel, the catalogue's H100)."""
    with jax.enable_x64(True):
        f = jnp.float64
        return float(pass_cost(chunk_work(0.0, float(P)), model_arrays(get_model("llama-3.1-8b"), f),
                               device_arrays(get_device("H100"), f), f(1), f(1), f(1),
                               f(get_device("H100").speedup("fp8"))).t_s)


def test_closed_loop_of_one_user_waits_for_nobody_and_a_static_batch_is_the_offline_run():
    pts = parse_measurements(HEAD + _row("ttft", 1, "ms", conc=1, pct="mean")
                             + _row("ttft", 1, "ms", conc=1, pct="99")
                             + _row("output_throughput", 1, "tok/s", conc=8)
                             + _row("max_output_throughput", 1, "tok/s")
                             + _row("total_throughput", 1, "tok/s", conc=8)
                             + _row("e2e_latency", 1, "s", conc=1, pct="mean"), "t.csv")
    ttft_mean, ttft_p99, closed8, offline8, total8, e2e = evaluate_serving_points(pts, profile="reference")
    # one user: every request starts when the last one ends, so its TTFT is one lone prefill pass (to 0.4 us:
    # the offline arrivals are spread over microseconds)
    assert ttft_mean == pytest.approx(_prefill_s(), rel=1e-4) and ttft_p99 == pytest.approx(ttft_mean, rel=1e-4)
    # 8 users and 8 requests: one wave, the same schedule as all 8 queued at t = 0
    assert closed8 == pytest.approx(offline8, rel=1e-9)
    assert total8 == pytest.approx(closed8 * (P + O) / O, rel=1e-12)
    assert e2e > ttft_mean


def test_rows_sharing_a_run_are_simulated_once():
    calls = []
    pts = parse_measurements(HEAD + _row("ttft", 1, "ms", rate=2, pct="mean") + _row("itl", 1, "ms", rate=2,
                             pct="mean") + _row("ttft", 1, "ms", rate=4, pct="50"), "t.csv")
    values = evaluate_serving_points(pts, progress=calls.append)
    assert calls == [3] and all(v > 0 for v in values)      # both rates in one engine call


def _pair_file(tmp_path):
    f = tmp_path / "pair.csv"
    f.write_text(HEAD + _row("tpot", 10, "ms", kv="bf16", rate=4, pct="mean", lever="fp8 kv:without", pair="K1")
                 + _row("tpot", 8, "ms", kv="fp8", rate=4, pct="mean", lever="fp8 kv:with", pair="K1")
                 + _row("ttft", 5, "ms", kv="bf16", rate=4, pct="mean", lever="fp8 kv:without", pair="K1")
                 + _row("ttft", 5.1, "ms", kv="fp8", rate=4, pct="mean", lever="fp8 kv:with", pair="K1"))
    return f


def test_lever_pairs_in_the_summary_and_the_warehouse_view(tmp_path):
    f = _pair_file(tmp_path)
    wh = tmp_path / "wh"
    res = CliRunner().invoke(main, ["validate", "--measurements", str(f), "--warehouse", str(wh),
                                    "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    table = json.loads(res.stdout)
    assert [r["status"] for r in table] == ["modelled"] * 4
    from sweepkit.store import Warehouse

    view = Warehouse(wh).query("select * from v_validation_pairs order by metric").to_pylist()
    assert [(v["pair_id"], v["metric"], v["statistic"]) for v in view] == [("K1", "tpot", "mean"),
                                                                           ("K1", "ttft", "mean")]
    tpot, ttft = view
    assert tpot["measured_change_pct"] == pytest.approx(-20.0)
    # FP8 KV halves the bytes a decode step reads: the predicted TPOT falls too
    assert tpot["predicted_change_pct"] < 0 and tpot["sign_agrees"] is True
    assert ttft["sign_agrees"] is None                         # +2 % measured: within the +-5 % band
    res = CliRunner().invoke(main, ["validate", "--measurements", str(f), "--warehouse", str(wh),
                                    "--summary", "markdown"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "| TPOT / ITL under load | 2 |" in res.stdout
    assert "Lever pairs: signs agree in 1 of 1 pairs" in res.stdout


def test_pairs_and_targets_from_a_table():
    rows = [dict(source="s", lever="x:without", pair_id="A;B", metric="output_throughput", percentile=None,
                 measured=100.0, modelled=100.0, error_pct=0.0, framework="vLLM", split="test", device="H100",
                 model="llama-3.1-8b", weight_format="bf16", setup="", unit="tok/s"),
            dict(source="s", lever="x:with", pair_id="A", metric="output_throughput", percentile=None,
                 measured=150.0, modelled=90.0, error_pct=-40.0, framework="vLLM", split="test", device="H100",
                 model="llama-3.1-8b", weight_format="bf16", setup="", unit="tok/s", lever_family="kv format",
                 pair_status="expressed"),
            dict(source="s", lever="x:with", pair_id="B", metric="output_throughput", percentile=None,
                 measured=120.0, modelled=130.0, error_pct=8.33, framework="vLLM", split="test", device="H100",
                 model="llama-3.1-8b", weight_format="bf16", setup="", unit="tok/s", lever_family="kv format",
                 pair_status="expressed")]
    p = pairs(rows)
    assert [(x["pair_id"], round(x["measured_change_pct"], 6), x["sign_agrees"]) for x in p] == [
        ("A", 50.0, False), ("B", 20.0, True)]
    assert sign_agreement(p) == (1, 2)
    t = targets(rows)
    assert t["overall"]["n"] == 3 and t["overall"]["median_abs_error_pct"] == pytest.approx(8.33)
    assert t["tensorrt_llm_test"]["n"] == 0
    assert "| A | x | kv format | output_throughput  | +50.0% | -10.0% | differ |" in markdown(rows)
    # size errors -60 and +10 points: median |size error| 35; median changes +35 % measured, +10 % predicted
    assert "| kv format | 2 | 2 | 1 of 2 | 35.0 | +35.0% | +10.0% | - |" in markdown(rows)


def test_progress_off_a_terminal_is_a_plain_line_every_tenth(capsys):
    from sweepkit.cli.validate import RowProgress

    p = RowProgress(20, label="rows")
    for _ in range(10):
        p(2)
    p.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("rows: 20/20 rows")
    assert "ETA" in lines[0] and "ETA" not in lines[-1]
