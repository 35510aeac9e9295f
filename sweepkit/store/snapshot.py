"""Reading the warehouse: a read-only, in-memory snapshot of the run records with views over committed Parquet.

A reader opens the DuckDB file read-only only long enough to copy the run records (``runs``, ``run_files``,
``warehouse_meta``: a few kB per run), closes it, and answers every query from an in-memory database whose
views read the committed Parquet files. So a reader holds the file for milliseconds, however long its query
runs, and a writer's commit never waits for it.

The snapshot is locked down before the caller's SQL runs: DuckDB's file-system access is limited to the
committed Parquet files (``allowed_paths``), extensions are neither installed nor loaded, the configuration
is locked, and :func:`check_read_only` admits exactly one SELECT (or EXPLAIN) statement. Nothing a query
says can write a file, read one outside the warehouse, or reach the network.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pyarrow as pa

from sweepkit.errors import InputError
from sweepkit.store import db, objstore

RECORD_TABLES = ("runs", "run_files", "warehouse_meta")
"""Tables copied from the DuckDB file into a snapshot."""

READ_STATEMENTS = ("SELECT", "EXPLAIN")
"""Statement types a read may run (SELECT covers WITH, DESCRIBE, SHOW, SUMMARIZE, FROM-first queries)."""

_EXPLAIN = re.compile(r"^\s*explain(?:\s+analy[sz]e)?\s+(.*)$", re.IGNORECASE | re.DOTALL)
_SETTINGS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def read_records(db_path: Path, gate_path: Path) -> dict[str, pa.Table] | None:
    """Copy the run records out of the DuckDB file; None while it holds no committed schema.

    The file is open read-only for the copy only (milliseconds), so no commit waits on a long query.
    """
    from sweepkit.store.feed import FEED

    if not db_path.exists():
        return None
    con = db.open_db(db_path, read_only=True, gate_path=gate_path)
    try:
        if not db.has_schema(con):
            return None
        records = {name: con.sql(f"select * from {name}").to_arrow_table() for name in RECORD_TABLES}
        records["feed_views"] = con.sql(
            "select view_name, sql from duckdb_views() where database_name = current_database() "
            "and schema_name = 'main' and list_contains($names, view_name)",
            params={"names": list(FEED)}).to_arrow_table()
        return records
    finally:
        con.close()


def open_snapshot(root: Path, records: dict[str, pa.Table] | None) -> duckdb.DuckDBPyConnection:
    """An in-memory connection holding the schema, ``records`` and every view, locked down for reading.

    Args:
      root: the warehouse root (relative file paths hang from it).
      records: :func:`read_records`'s tables, or None for a warehouse with no run yet (empty views).

    Returns:
      A connection whose views read the committed Parquet files; close it when done.
    """
    con = duckdb.connect(config=_SETTINGS)
    try:
        con.execute(db.schema_sql())
        for name in RECORD_TABLES if records else ():
            con.register("_records", records[name])
            con.execute(f"insert into {name} by name select * from _records")
            con.unregister("_records")
        db.create_views(con, root, temp=True, feed=False)        # temp: no column comments to copy
        _feed_views(con, records)
        paths = sorted({str((root / row[0]).resolve()) for row in con.execute("select path from run_files").fetchall()
                        if not objstore.is_uri(row[0])})          # objects are read by Arrow, not by DuckDB
        con.execute("set allowed_paths = $paths", {"paths": paths})
        con.execute("set enable_external_access = false")
        con.execute("set lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def _feed_views(con: duckdb.DuckDBPyConnection, records: dict[str, pa.Table] | None) -> None:
    """The feed views (v_*): the definitions the last commit persisted when they are current (no bind checks
    to repeat on every read), else built afresh."""
    from sweepkit.store.feed import FEED, create_feed_views, feed_digest

    stored = dict(zip(*(records["feed_views"].column(c).to_pylist() for c in ("view_name", "sql")))) \
        if records else {}
    meta = con.execute("select value from warehouse_meta where key = 'feed_sha256'").fetchall()
    if set(stored) != set(FEED) or meta != [(feed_digest(db.schema_sql() + db.macros_sql()),)]:
        create_feed_views(con, temp=True)
        return
    con.execute(";\n".join(stored[name].rstrip().rstrip(";").replace("CREATE VIEW", "CREATE TEMP VIEW", 1)
                            for name in FEED))


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Admit exactly one SELECT statement, or an EXPLAIN [ANALYZE] of one.

    Raises:
      InputError: no statement, several, or one of another type (COPY, EXPORT, INSTALL, ATTACH, SET, ...).
      duckdb.ParserException: the text does not parse.
    """
    statements = con.extract_statements(sql)
    if len(statements) != 1:
        raise InputError(f"sql: {len(statements)} statements given; expected exactly one SELECT statement "
                         f"(the warehouse is read-only)")
    kind = statements[0].type.name
    if kind == "EXPLAIN":                  # EXPLAIN ANALYZE runs what it explains: that must be a SELECT too
        inner = _EXPLAIN.match(sql)
        kinds = [x.type.name for x in con.extract_statements(inner.group(1))] if inner else []
        kind = "EXPLAIN" if kinds == ["SELECT"] else f"EXPLAIN of a {'/'.join(kinds) or 'non-SELECT'}"
    if kind not in READ_STATEMENTS:
        raise InputError(f"sql: {kind} is not allowed; expected one SELECT statement (the warehouse is read-only)")
