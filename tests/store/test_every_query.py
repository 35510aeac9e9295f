"""Every report in queries/ on one small real warehouse: its declared key is unique, its columns are
the documented ones, and every categorical column takes only the values its header lists.

The warehouse holds what the reports read: a decode run (two gammas, two batches, i.i.d. and decaying
acceptance), a mechanism trace, a validation run and a small serving simulation (the session's shared
warehouse, tests/conftest.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweepkit.cli import main
from sweepkit.store import Warehouse, list_queries, run_query

ROOT = Path(__file__).resolve().parents[2]
DECODE = """name = "every-query"
[axes]
device = ["H100"]
model = ["llama-3-8b"]
draft = ["mtp", "none"]
context = [512]
batch = [1, 256]
gamma = [2, 3]
alpha = [0.6, 0.8]
decay = [1.0, 0.9]
"""
ACCEPTED = re.compile(r"^([\w.-]+(?:\s*\|\s*[\w.-]+)+)(?=$|[:(\s])")
"""A column description starting ``a | b | c`` lists the column's accepted values."""
PARAMS = {"leviathan_table1": {"grid": "every-query"}}
"""Parameters a report needs to read the test's decode run (leviathan_table1 reads a grid by name)."""
OPEN = {"draft"}
"""Columns whose listed values are examples, not a closed set (a draft may be any catalogue model)."""


@pytest.fixture(scope="module")
def wh(full_warehouse, tmp_path_factory):
    """A copy of the shared warehouse (tests/conftest.py) plus the decode run above (the latest)."""
    base = tmp_path_factory.mktemp("every-query")
    root = base / "wh"
    shutil.copytree(full_warehouse, root)
    (base / "decode.toml").write_text(DECODE, encoding="utf-8")
    res = CliRunner().invoke(main, ["run", str(base / "decode.toml"), "--warehouse", str(root), "--format", "json"])
    assert res.exit_code == 0, res.output
    return Warehouse(root)


def accepted_values(description: str) -> set[str] | None:
    """``'memory | compute | power: what limits ...'`` -> {memory, compute, power}; None when not listed.

    >>> sorted(accepted_values("memory | compute | power: what limits the verify pass"))
    ['compute', 'memory', 'power']
    >>> accepted_values("accelerator, catalogue name") is None
    True
    """
    m = ACCEPTED.match(description.strip())
    return {v.strip() for v in m.group(1).split("|")} if m else None


QUERIES = [q.name for q in list_queries()]


def test_every_query_declares_a_key_and_ends_in_final():
    for q in list_queries():
        assert q.key, f"{q.path}: no '-- Key:' header line"
        assert set(q.key) <= {c for c, _ in q.columns}, f"{q.path}: key {q.key} names undocumented columns"
        body = [line for line in q.sql.strip().splitlines() if line.strip()]
        tail = body[-1] if body[-1].startswith("select") else body[-2]
        assert tail.strip() == "select * from final", f"{q.path}: ends in {tail!r}"


@pytest.mark.parametrize("name", QUERIES)
def test_query_key_is_unique_and_values_are_accepted(wh, name):
    q = next(x for x in list_queries() if x.name == name)
    table = run_query(wh, name, PARAMS.get(name))
    assert table.column_names == [c for c, _ in q.columns], name
    assert table.num_rows > 0, f"{name}: no rows on the test warehouse"
    rows = table.to_pylist()
    keys = [tuple(r[k] for k in q.key) for r in rows]
    assert len(set(keys)) == len(keys), f"{name}: key {q.key} repeats: " \
        f"{sorted({k for k in keys if keys.count(k) > 1})[:3]}"
    for column, description in q.columns:
        allowed = accepted_values(description)
        if allowed is None or column in OPEN:
            continue
        seen = {r[column] for r in rows} - {None}
        assert seen <= allowed, f"{name}.{column}: {sorted(seen - allowed)} not in {sorted(allowed)}"


def test_one_quantity_has_one_type_in_every_table(wh):
    """gamma is INTEGER wherever it appears, whichever writer made the Parquet (the serving tables write
    int64; the store narrows it to the contract's type)."""
    con = wh.connect()
    try:
        types = con.execute("select table_name, data_type from duckdb_columns() where column_name = 'gamma' "
                            "and table_name in ('decode', 'serving', 'capacity', 'trace_steps', 'validation')"
                            ).fetchall()
    finally:
        con.close()
    assert {t for _, t in types} == {"INTEGER"} and len(types) == 5, types
