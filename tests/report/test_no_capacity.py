"""A lever without capacity (no load meets the SLOs: cost and energy per token are NaN) through the whole chain:
`sweepkit simulate`, the lever tables, `sweepkit report`. Every cell without a change says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweepkit.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def no_capacity(tmp_path_factory):
    """tests/grids/serving-tiny.toml: SLOs no request meets, so baseline and decode-priority have no capacity."""
    wh = tmp_path_factory.mktemp("no-capacity") / "wh"
    res = CliRunner().invoke(main, ["simulate", str(ROOT / "tests/grids/serving-tiny.toml"), "--warehouse", str(wh)])
    assert res.exit_code == 0, res.output
    return wh, res


def test_simulate_reports_progress_with_an_eta_off_a_terminal(no_capacity):
    _, res = no_capacity
    line = next(line for line in res.stderr.splitlines() if line.startswith("simulating serving-tiny:"))
    assert " sims, " in line and "sims/s" in line and "ETA" in line and "of ~" in line, line


def test_lever_tables_say_no_capacity(no_capacity):
    wh, res = no_capacity
    assert "decode-priority" in res.stdout and "n/a: no capacity" in res.stdout and "nan" not in res.stdout
    assert "✓ better, ✗ worse" in res.stdout
    rows = json.loads(CliRunner().invoke(main, ["matrix", "--warehouse", str(wh), "--format", "json"]).stdout)
    cost = next(r for r in rows if r["metric"] == "cost_per_mtok")
    assert cost["change_pct"] is None and cost["verdict"] is None and cost["missing"] == "no capacity"
    goodput = next(r for r in rows if r["metric"] == "goodput")
    assert goodput["caveats"] == "" and goodput["missing"] == "no capacity"    # 0 -> 0 does not "double"


def test_report_builds_and_says_no_capacity(no_capacity, tmp_path):
    wh, _ = no_capacity
    res = CliRunner().invoke(main, ["report", "--warehouse", str(wh), "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "building the report: 1 of 8 sections" in res.stderr           # progress off a terminal
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "n/a (no capacity)" in html
    assert (tmp_path / "matrix.png").read_bytes()[:4] == b"\x89PNG"
