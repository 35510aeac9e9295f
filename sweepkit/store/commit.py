"""A run's commit: one DuckDB transaction inserts its ``runs`` row and ``run_files`` rows and recreates the
views over them. Only then is the run visible, whether its files are local or in an object store.

The writer holds the commit gate exclusive for the whole commit (``sweepkit.store.db.gate``) and waits for
the database file as long as it takes, saying so once through ``on_wait``.
"""

from __future__ import annotations

import datetime as dt
from typing import Callable, Mapping

import duckdb

import sweepkit
from sweepkit.store import db, objstore


def commit_run(wh, *, run_id: str, kind: str, grid_name: str, grid_toml: str, grid_sha256: str,
               started: dt.datetime, row_count: int, wall_s: float,
               files: Mapping[str, list[tuple[str, int, int, str | None]]], on_wait: Callable[[str], None]) -> None:
    """Commit a written run of a :class:`~sweepkit.store.Warehouse`.

    Args:
      wh: the warehouse.  run_id, kind, grid_name, grid_toml, grid_sha256: the ``runs`` row's fields.
      started: the run's start (UTC).  row_count: rows in all its files.  wall_s: seconds of work.
      files: table -> ``(path, rows, size_bytes, footer_sha256, content_sha256)`` per file (path relative to the root, or
        an object's URI).
      on_wait: told once, in one line, when the commit has to wait for another process.

    Raises:
      InputError: the run's Parquet location is not the committed runs' (a first run of another location
        committed meanwhile); nothing is committed.
    """
    wh.root.mkdir(parents=True, exist_ok=True)
    with db.gate(wh.gate_path, exclusive=True, timeout_s=None, on_wait=on_wait):
        con = db.open_db(wh.db_path, read_only=False, timeout_s=None, on_wait=on_wait)
        try:
            con.execute("begin transaction")
            _insert(wh, con, [run_id, kind, grid_name, grid_toml, grid_sha256, sweepkit.__version__, started,
                              dt.datetime.now(dt.UTC), row_count, wall_s], files)
            con.execute("commit")
        except BaseException:
            try:
                con.execute("rollback")
            except duckdb.Error:
                pass
            raise
        finally:
            con.close()


def _insert(wh, con: duckdb.DuckDBPyConnection, run: list, files: Mapping[str, list[tuple]]) -> None:
    """The transaction's statements: schema if needed, the rows, the location, the views."""
    # Views hold absolute paths and the feed/schema digests assume this version wrote them last: if the
    # folder moved, or another sweepkit version committed, rebuild everything, not just ours.
    everything = not db.last_commit_matches(con, str(wh.root.resolve()), sweepkit.__version__)
    db.ensure_schema(con, force=everything)
    loc = wh.location()
    objstore.check_same(loc, objstore.stored_uri(con), wh.root)          # another first run may have won
    con.execute("insert into runs values (?, ?, ?, ?, ?, ?, ?, ?, 'committed', ?, ?)", run)
    rows = [[run[0], name, *f] for name, fs in files.items() for f in fs]
    if rows:
        con.executemany("insert into run_files (run_id, table_name, path, row_count, size_bytes, footer_sha256, "
                        "content_sha256) values (?, ?, ?, ?, ?, ?, ?)", rows)
    con.execute("insert or replace into warehouse_meta values ('root', ?)", [str(wh.root.resolve())])
    con.execute("insert or replace into warehouse_meta values ('parquet_uri', ?)", [loc.uri if loc else ""])
    db.create_views(con, wh.root, temp=False, tables=None if everything else [n for n, fs in files.items() if fs])
