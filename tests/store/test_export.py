"""The stable feed: v_decode, v_serving, v_capacity, v_matrix keep their promised columns; export writes them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from sweepkit.cli import main
from sweepkit.store.feed import FEED
from sweepkit.store import Warehouse

DOCS = Path(__file__).resolve().parents[2] / "docs" / "dashboards.md"

PROMISE = {
    "v_decode": "run_id VARCHAR, grid_name VARCHAR, run_ended_at TIMESTAMP WITH TIME ZONE, device VARCHAR, "
                "model VARCHAR, draft VARCHAR, tp INTEGER, weight_format VARCHAR, kv_format VARCHAR, "
                "compute_format VARCHAR, batch BIGINT, context BIGINT, gamma INTEGER, alpha DOUBLE, "
                "tokens_per_pass DOUBLE, s_per_token_plain DOUBLE, s_per_token_spec DOUBLE, speedup DOUBLE, "
                "plain_bound VARCHAR, verify_bound VARCHAR, energy_per_token_plain_j DOUBLE, "
                "energy_per_token_spec_j DOUBLE, kv_capacity_tokens DOUBLE, fits_in_memory BOOLEAN",
    "v_serving": "run_id VARCHAR, device VARCHAR, lever VARCHAR, workload VARCHAR, load_per_s DOUBLE, "
                 "requests BIGINT, slo_attainment DOUBLE, ttft_p50_s DOUBLE, ttft_p99_s DOUBLE, "
                 "tpot_p50_s DOUBLE, tpot_p99_s DOUBLE, itl_p50_s DOUBLE, itl_p99_s DOUBLE, "
                 "energy_per_token_j DOUBLE",
    "v_capacity": "run_id VARCHAR, device VARCHAR, lever VARCHAR, workload VARCHAR, capacity_per_s DOUBLE, "
                  "goodput_per_gpu_per_s DOUBLE, tokens_per_gpu_per_s DOUBLE, cost_per_mtok_usd DOUBLE, "
                  "energy_per_token_j DOUBLE",
    "v_matrix": "device VARCHAR, lever VARCHAR, workload VARCHAR, metric VARCHAR, baseline_value DOUBLE, "
                "lever_value DOUBLE, change_pct DOUBLE, verdict VARCHAR, caveats VARCHAR, draws BIGINT, "
                "share_better DOUBLE, share_worse DOUBLE, share_same DOUBLE, change_p10 DOUBLE, change_p50 DOUBLE, "
                "change_p90 DOUBLE, verdict_text VARCHAR",
    "v_validation_pairs": "pair_id VARCHAR, lever VARCHAR, lever_family VARCHAR, pair_status VARCHAR, "
                          "source VARCHAR, metric VARCHAR, statistic VARCHAR, "
                          "unit VARCHAR, measured_without DOUBLE, measured_with DOUBLE, modelled_without DOUBLE, "
                          "modelled_with DOUBLE, measured_change_pct DOUBLE, predicted_change_pct DOUBLE, "
                          "size_error_pct DOUBLE, sign_agrees BOOLEAN",
    "v_plan": "run_id VARCHAR, model VARCHAR, workload VARCHAR, frontier BOOLEAN, device VARCHAR, gpus INTEGER, "
              "mode VARCHAR, instances INTEGER, tp INTEGER, pp INTEGER, prefill_instances INTEGER, prefill_tp INTEGER, "
              "batching VARCHAR, token_budget INTEGER, batch_cap INTEGER, kv VARCHAR, weight_format VARCHAR, "
              "kv_format VARCHAR, spec VARCHAR, tokens_per_gpu_per_s DOUBLE, ttft_p99_s DOUBLE, tpot_p99_s DOUBLE, "
              "cost_per_mtok_usd DOUBLE, energy_per_token_j DOUBLE, bound DOUBLE, contributions VARCHAR, "
              "lever_toml VARCHAR, dp INTEGER, ep INTEGER",
}
"""The promise, written out: changing a name, a type or the order is a breaking change for dashboards."""


def _columns(con, view: str) -> str:
    rows = con.execute(f"describe select * from {view}").fetchall()
    return ", ".join(f"{name} {type_}" for name, type_, *_ in rows)


@pytest.fixture(scope="module")
def wh(tmp_path_factory):
    root = tmp_path_factory.mktemp("feed") / "wh"
    res = CliRunner().invoke(main, ["run", "grids/leviathan.toml", "--warehouse", str(root), "--format", "json"])
    assert res.exit_code == 0, res.output
    return Warehouse(root)


def test_views_keep_their_promised_columns(wh, tmp_path):
    empty = Warehouse(tmp_path / "none").connect()         # no run at all: the views exist, empty
    con = wh.connect()
    try:
        for view, promise in PROMISE.items():
            assert _columns(con, view) == promise, view
            assert _columns(empty, view) == promise, view
        assert con.execute("select count(*) from v_decode").fetchone()[0] == 16
    finally:
        con.close()
        empty.close()
    assert list(PROMISE) == list(FEED)


def test_a_bi_tool_reads_the_duckdb_file_directly(wh):
    """A plain DuckDB client (no sweepkit) opening the file read-only sees the persisted views."""
    con = duckdb.connect(str(wh.db_path), read_only=True)
    try:
        n, best = con.execute("select count(*), max(speedup) from v_decode where device = 'H100'").fetchone()
        assert n == 16 and best > 1
        comment = con.execute("select comment from duckdb_columns() where table_name = 'v_decode' "
                              "and column_name = 'speedup'").fetchone()[0]
        assert comment.startswith("x,")
    finally:
        con.close()


def test_docs_list_every_promised_column():
    text = DOCS.read_text(encoding="utf-8")
    for view, (_, cols) in FEED.items():
        section = text.split(f"### {view}", 1)[1].split("###", 1)[0]
        listed = re.findall(r"^\|\s*`(\w+)`\s*\|\s*([A-Z][A-Z ]*[A-Z])\s*\|", section, flags=re.M)
        assert listed == [(c.name, c.type) for c in cols], view


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_export_formats(wh, tmp_path, fmt):
    out = tmp_path / f"v_decode.{fmt}"
    res = CliRunner().invoke(main, ["export", "v_decode", "--as", fmt, "--out", str(out),
                                    "--warehouse", str(wh.root)])
    assert res.exit_code == 0, res.output
    names = [c.split(" ")[0] for c in PROMISE["v_decode"].split(", ")]
    if fmt == "parquet":
        table = pq.read_table(out)
        assert table.column_names == names and table.num_rows == 16
    elif fmt == "csv":
        lines = out.read_text().splitlines()
        assert lines[0].replace('"', "").split(",") == names and len(lines) == 17
    else:
        rows = json.loads(out.read_text())
        assert len(rows) == 16 and list(rows[0]) == names


def test_export_to_stdout_and_bad_view(wh):
    runner = CliRunner()
    res = runner.invoke(main, ["export", "v_matrix", "--as", "json", "--warehouse", str(wh.root)])
    assert res.exit_code == 0 and json.loads(res.stdout) == []
    res = runner.invoke(main, ["export", "decode", "--warehouse", str(wh.root)])
    assert res.exit_code == 2
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "v_decode" in lines[0]


def test_v_matrix_is_matrix_sql_with_its_defaults_inlined(wh, tmp_path, monkeypatch):
    """v_matrix runs queries/matrix.sql (header defaults inlined); a matrix.sql that does not bind leaves
    the view empty with its promised columns instead of failing the commit."""
    import sweepkit.store.queries as queries_mod
    from sweepkit.store.feed import create_feed_views

    folder = tmp_path / "queries"
    folder.mkdir()
    (folder / "matrix.sql").write_text(
        "-- matrix: a stand-in\n--\n-- Grain: one row per cell.\n--\n-- Parameters:\n"
        "--   $run_id = latest    serving run\n--   $threshold_pct = 2   same within this\n\n"
        "with final as (\n  select 'H100' as device, 'mtp' as lever, 'chat' as workload, 'goodput' as metric,\n"
        "    1.0 as baseline_value, 1.27 as lever_value, 27.0 as change_pct,\n"
        "    case when 27.0 > $threshold_pct then 'better' else 'same' end as verdict, 'α' as caveats,\n"
        "    null::bigint as draws, null as share_better, null as share_worse, null as share_same,\n"
        "    null as change_p10, null as change_p50, null as change_p90, 'better' as verdict_text,\n"
        "    $run_id as run\n)\nselect * from final\n", encoding="utf-8")
    monkeypatch.setattr(queries_mod, "queries_dir", lambda: folder)
    con = wh.connect()
    try:
        create_feed_views(con, temp=True)
        assert con.execute("select device, verdict, change_pct from v_matrix").fetchall() == [("H100", "better", 27.0)]
        assert _columns(con, "v_matrix") == PROMISE["v_matrix"]
        (folder / "matrix.sql").write_text("-- matrix: broken\nselect nope from nowhere\n", encoding="utf-8")
        create_feed_views(con, temp=True)
        assert con.execute("select count(*) from v_matrix").fetchone()[0] == 0
        assert _columns(con, "v_matrix") == PROMISE["v_matrix"]
    finally:
        con.close()
