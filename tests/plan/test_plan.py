"""``sweepkit plan`` end to end: a real capacity search under the screen's bound, the frontier, the lever
TOML ``sweepkit simulate`` reads, one-line answers when nothing can be planned, status 2 for bad input."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from sweepkit.cli import main
from sweepkit.plan.frontier import contributions, pareto
from sweepkit.serving.levers import parse_lever
from sweepkit.store import Warehouse, run_query

SMALL = ["--model", "llama-3.2-1b", "--workload", "realtime-voice", "--device", "H100", "--gpus", "1",
         "--fix", "tp=1", "--fix", "kv=paged", "--fix", "weight_format=bf16", "--fix", "kv_format=bf16",
         "--fix", "spec=none", "--fix", "batching=chunked", "--fix", "batch_cap=64", "--fix", "token_budget=2048"]


def cli(*args: str):
    return CliRunner().invoke(main, ["plan", *args], catch_exceptions=False)


def test_the_simulated_frontier_stays_under_its_bound(tmp_path):
    """The help example's configuration (one program, shared with the help-example test through the compile
    cache) searched with the serving engine: its simulated goodput is below the screen's bound, it is on the
    frontier, and its lever TOML is one ``sweepkit simulate`` accepts."""
    out = tmp_path / "levers.toml"
    wh = tmp_path / "wh"
    res = cli(*SMALL, "--max-simulated", "1", "--stop", "bound", "--format", "json", "--levers", str(out),
              "--warehouse", str(wh))
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert len(rows) == 1 and rows[0]["frontier"]
    for r in rows:
        assert 0 < r["objective"] <= r["bound"]
        assert r["objective"] == pytest.approx(r["output_tok_s_per_gpu"])
        assert r["ttft_p99_s"] <= 0.3 * 1.5 and np.isfinite(r["usd_per_mtok"])
    levers = tomllib.loads(out.read_text())["levers"]
    for name, raw in levers.items():
        lever = parse_lever({k: v for k, v in raw.items()}, "levers.toml", name)
        assert lever.tp == 1 and lever.kv == "paged"
    assert "screened" in res.stderr
    feed = Warehouse(wh).query("select * from v_plan").to_pylist()
    assert len(feed) == 1 and feed[0]["frontier"] and feed[0]["tokens_per_gpu_per_s"] == pytest.approx(
        rows[0]["objective"])
    front = run_query(Warehouse(wh), "plan_frontier", {"run_id": "latest"}).to_pylist()
    assert [(r["rank"], r["layout"], r["kv"]) for r in front] == [(1, "1 x tp1", "paged")]
    assert 0 < front[0]["bound_share"] <= 1


DEP = ["--model", "qwen3-30b-a3b", "--workload", "realtime-voice", "--device", "H100", "--gpus", "2",
       "--fix", "tp=1", "--fix", "dp=2", "--fix", "ep=2", "--fix", "mode=colocated", "--fix", "kv=paged",
       "--fix", "weight_format=bf16", "--fix", "kv_format=bf16", "--fix", "spec=none", "--fix", "batching=chunked",
       "--fix", "batch_cap=64", "--fix", "token_budget=2048"]


def test_an_expert_parallel_deployment_is_simulated_under_its_bound(tmp_path):
    """Qwen3-30B-A3B on 2 x H100 as one DEP2 instance (attention over 2 DP ranks, experts over 2): the serving
    engine simulates the layout the screen bounded, below the bound; the warehouse and the frontier report
    name dp and ep, and the point links to the what-if page."""
    wh = tmp_path / "wh"
    res = cli(*DEP, "--max-simulated", "1", "--format", "json", "--warehouse", str(wh), "--serve-dir",
              str(tmp_path / "serve"))
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert (row["tp"], row["dp"], row["ep"], row["instances"]) == (1, 2, 2, 1)
    assert 0 < row["objective"] <= row["bound"]
    assert row["whatif"] == "/what-if?workload=realtime-voice&device=H100&lever=plan-realtime-voice-0"
    feed = Warehouse(wh).query("select dp, ep from v_plan").to_pylist()
    assert feed == [{"dp": 2, "ep": 2}]
    front = run_query(Warehouse(wh), "plan_frontier", {"run_id": "latest"}).to_pylist()
    assert front[0]["layout"] == "1 x tp1 dp2 ep2"
    report = run_query(Warehouse(wh), "report_plan", {"run_id": "latest"}).to_pylist()
    assert report[0]["configuration"].startswith("H100 2 GPUs: 1xtp1dp2ep2, chunked")


@pytest.mark.parametrize("args, words", [
    (["--usd-per-hour", "1"], "buys no GPU"),
    (["--model", "llama-3.1-405b", "--gpus", "1"], "does not fit"),
    (["--tpot", "0.0001"], "no configuration meets"),
])
def test_nothing_to_plan_is_a_one_line_answer(args, words):
    base = ["--model", "llama-3.1-8b", "--device", "H100", "--fix", "spec=none", "--fix", "tp=1",
            "--max-simulated", "0"]
    res = cli(*base, *(args if "--gpus" in args or "--usd-per-hour" in args else ["--gpus", "1", *args]))
    assert res.exit_code == 1, res.output
    assert words in res.stdout and res.stdout.count("\n") == 1


@pytest.mark.parametrize("args", [["--fix", "tp"], ["--fix", "warp=9"], ["--gpus", "0"], ["--model", "gpt-17"],
                                  ["--workload", "karaoke"], ["--objective", "vibes"]])
def test_malformed_input_is_status_2(args):
    base = {"--model": "llama-3.1-8b", "--gpus": "1"}
    for i in range(0, len(args) - 1, 2):
        base.pop(args[i], None)
    argv = [x for kv in base.items() for x in kv] + args
    res = cli(*argv, "--max-simulated", "0")
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("Error:") and res.stderr.count("\n") == 1


def test_screen_only():
    res = cli("--model", "llama-3.1-8b", "--gpus", "2", "--max-simulated", "0", "--format", "json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert len(rows) == 10 and all(r["bound"] > 0 and r["objective"] is None for r in rows)
    assert [r["bound"] for r in rows] == sorted((r["bound"] for r in rows), reverse=True)
    assert "screened" in res.stderr and "simulated 0" in res.stderr


@given(st.lists(st.tuples(st.floats(0.1, 10), st.floats(0.01, 1), st.floats(0.001, 0.1)), min_size=1, max_size=12))
def test_the_frontier_is_exactly_the_undominated(points):
    obj, a, b = (np.array(x) for x in zip(*points))
    on = pareto(obj, a, b)
    def dom(j, i):
        return obj[j] >= obj[i] and a[j] <= a[i] and b[j] <= b[i] and (
            obj[j] > obj[i] or a[j] < a[i] or b[j] < b[i])
    for i in range(len(obj)):
        assert on[i] == (not any(dom(j, i) for j in range(len(obj))))
    assert on[int(np.argmax(obj))] or any(on)


def test_a_levers_contribution_is_its_bound_ratio():
    table = {k: np.array(v, dtype=object) for k, v in dict(
        device=["H100"] * 2, gpus=[1, 1], mode=["colocated"] * 2, instances=[1, 1], tp=[1, 1], pp=[1, 1], dp=[1, 1], ep=[1, 1],
        prefill_instances=[0, 0], prefill_tp=[1, 1], batching=["prefill-priority"] * 2, token_budget=[8192] * 2,
        batch_cap=[256] * 2, kv=["reserved", "paged"], weight_format=["bf16"] * 2, kv_format=["bf16"] * 2,
        spec=["none"] * 2).items()}
    assert contributions(table, np.array([100.0, 150.0]), 1) == {"kv": 1.5}
    assert contributions(table, np.array([100.0, 150.0]), 0) == {}


def test_a_model_that_fits_nowhere_is_named_with_its_checkpoint_bytes(tmp_path):
    """gpt-oss-120b in bf16 on one L40S: its bf16 checkpoint (MXFP4 experts) is 65.17 GB against 0.9 x 48 GB;
    the verdict names those bytes (not 233.6 GB, every expert at 2 B) and the exit status is 1."""
    res = cli("--model", "gpt-oss-120b", "--workload", "chat", "--device", "L40S", "--gpus", "1",
              "--fix", "weight_format=bf16", "--format", "json", "--warehouse", str(tmp_path / "wh"))
    assert res.exit_code == 1, res.output
    assert ("no plan: gpt-oss-120b does not fit: its weights take 65 GB at 2 byte(s) per value; the roomiest "
            "deployment, 1 x L40S, may use 43 GB") in res.output
