"""The metric catalogue is the one list: the warehouse macro, the explorer's check and docs/serving.md agree."""

from __future__ import annotations

from pathlib import Path

import duckdb

from sweepkit.catalogue.metrics import MATRIX, METRICS, markdown_table
from sweepkit.store.db import macros_sql, schema_sql

ROOT = Path(__file__).resolve().parents[2]


def test_docs_print_the_catalogue():
    assert markdown_table() in (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")


def test_macro_reads_each_metric_from_its_column_with_its_direction():
    """capacity_long over one capacity row whose columns hold distinct values returns each metric's own
    column, unit and direction; the matrix's six come first in display order."""
    con = duckdb.connect()
    con.execute(schema_sql())
    con.execute("create view capacity as select * from contract_capacity")
    for view in ("decode", "trace_steps", "serving_draws"):
        con.execute(f"create view {view} as select * from contract_{view}")
    con.execute(macros_sql())
    con.execute("insert into runs (run_id, kind, grid_name, grid_sha256, grid_toml, sweepkit_version, started_at, "
                "ended_at, status, row_count, wall_s) values ('r1', 'serving', 'g', 'h', '', '0', now(), now(), "
                "'committed', 1, 0)")
    values = {m.column: float(i + 1) for i, m in enumerate(METRICS)}
    cols = ", ".join(values)
    con.execute(f"insert into contract_capacity (run_id, device, lever, workload, draft, saturated, {cols}) "
                f"values ('r1', 'H100', 'baseline', 'chat', 'none', false, {', '.join(map(str, values.values()))})")
    got = {r[0]: r[1:] for r in con.execute(
        "select metric, unit, value, higher_is_better, ord from capacity_long('latest')").fetchall()}
    for m in METRICS:
        assert got[m.name][:3] == (m.unit, values[m.column], m.higher_is_better), m.name
    assert [name for name, _ in sorted(((n, v[3]) for n, v in got.items()), key=lambda x: x[1])][:6] == \
        [m.name for m in MATRIX]
