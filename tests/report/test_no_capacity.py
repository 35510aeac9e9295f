"""A lever without capacity (no load meets the SLOs: cost and energy per token are NaN) through the whole chain:
`sweepkit simulate`, the lever tables, `sweepkit report`. Every cell without a change says why."""

from __future__ import annotations

import json
import re
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
    assert re.search(r"building the report: 1 of \d+ sections", res.stderr)     # progress off a terminal
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "n/a (no capacity)" in html
    assert (tmp_path / "matrix.png").read_bytes()[:4] == b"\x89PNG"


def test_a_lever_without_capacity_beside_a_baseline_with_it(tmp_path):
    """The whole sweep's case: disagg-2p1d on H100 long-context RAG meets the SLOs at no load (NaN cost and
    energy per token) while the baseline has capacity. Rows written through the real warehouse."""
    import pyarrow as pa

    from sweepkit.store import Warehouse
    from sweepkit.store.warehouse import declared_columns

    def row(lever, cap, goodput, cost, energy):
        r = {c: 0.0 for c in declared_columns()["capacity"] if c != "run_id"}
        r.update(device="H100", lever=lever, workload="long-context-rag", draft="none", gamma=0, alpha=0.0,
                 saturated=False, load_unit="requests/s", capacity_per_s=cap, goodput_per_gpu_per_s=goodput,
                 cost_per_mtok_usd=cost, energy_per_token_j=energy, ttft_p99_s_at_ref=2.0, tpot_p99_s_at_ref=0.03,
                 itl_p99_s_at_ref=0.05)
        return r

    wh = Warehouse(tmp_path / "wh")
    rows = [row("baseline", 1.19, 0.14, 5.9, 2.4), row("disagg-2p1d", 0.0, 0.0, float("nan"), float("nan"))]
    wh.write_run(kind="serving", grid_name="rag", grid_toml="", grid_sha256="2" * 64,
                 tables={"capacity": iter(pa.Table.from_pylist(rows).to_batches())})
    res = CliRunner().invoke(main, ["matrix", "--warehouse", str(wh.root)])
    assert res.exit_code == 0, res.output
    assert "✗ -100%" in res.stdout and res.stdout.count("n/a: no capacity") == 2, res.stdout
    res = CliRunner().invoke(main, ["report", "--warehouse", str(wh.root), "--out", str(tmp_path / "r"), "--no-png"])
    assert res.exit_code == 0, res.output
    html = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert html.count("n/a (no capacity)") == 2 and "-100%" in html
