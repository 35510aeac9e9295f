"""The results warehouse: Parquet files per run, a DuckDB file of run records and views over them.

Layout under the root (``Warehouse(root)``; default ``$SWEEPKIT_WAREHOUSE`` or ``./warehouse``)::

    sweepkit.duckdb                                   runs, run_files, warehouse_meta, contract_*, views
    parquet/<table>/run_id=<id>/part-<w>-<n>.parquet  Hive-partitioned, one folder per run and table
    staging/<id>/<table>/...                          a run being written (never read)
    staging/<id>.lock                                 held (flock) by the live writer of run <id>

Commit protocol (a run is visible all at once or not at all): write into ``staging/<id>/``, fsync, rename
each table folder to ``parquet/<table>/run_id=<id>``, then in ONE DuckDB transaction insert the ``runs`` row
and its ``run_files`` rows and recreate the views. The views list exactly the committed files, so a run
killed at any moment leaves nothing visible; the next writer deletes what a dead writer left (staging
folders and renamed-but-uncommitted partitions whose lock no live process holds).
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping

import duckdb
import pyarrow as pa

import sweepkit
from sweepkit.errors import bad_value
from sweepkit.store import db, integrity, snapshot
from sweepkit.store.staging import RunLock, checked, declared_columns, held_by_live_writer
from sweepkit.store.writer import WrittenFile, fsync_path, write_stream

__all__ = ["DB_NAME", "KINDS", "Warehouse", "declared_columns", "default_root", "new_run_id"]

KINDS = ("decode", "serving", "trace", "validation")
DB_NAME = "sweepkit.duckdb"


def default_root() -> Path:
    """``$SWEEPKIT_WAREHOUSE`` if set, else ``./warehouse``."""
    return Path(os.environ.get("SWEEPKIT_WAREHOUSE") or "warehouse")


def new_run_id() -> str:
    """UTC start time to the millisecond plus 6 random hex digits: sorts by start, unique across processes."""
    now = dt.datetime.now(dt.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond // 1000:03d}Z-" + secrets.token_hex(3)


class Warehouse:
    """A warehouse folder: write runs atomically, read them through DuckDB views.

    Attributes:
      root: the folder.  db_path: ``root / "sweepkit.duckdb"``.

    Example:
      >>> wh = Warehouse(tmp)                                                      # doctest: +SKIP
      >>> run_id = wh.write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text,
      ...                       grid_sha256=spec.sha256, tables={"decode": batches})  # doctest: +SKIP
      >>> wh.query("select count(*) n from decode where run_id = $r", {"r": run_id})  # doctest: +SKIP
    """

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_root()
        self.db_path = self.root / DB_NAME
        self.gate_path = self.root / "staging" / ".commit-gate"

    # ----------------------------------------------------------------------------------------- reading
    def connect(self) -> duckdb.DuckDBPyConnection:
        """A read-only connection with every view (decode, serving, ... as they exist).

        The connection is an in-memory snapshot (``sweepkit.store.snapshot``): the DuckDB file is open only
        while the run records are copied, so a long query never holds up a commit. A warehouse with no run
        yet gives the schema and empty views. File access is limited to the committed Parquet files, no
        extension loads and the configuration is locked; :meth:`query` also admits only one SELECT
        statement, so use it (or ``sweepkit sql``) for SQL you did not write.
        """
        return snapshot.open_snapshot(self.root, snapshot.read_records(self.db_path, self.gate_path))

    def query(self, sql: str, params: Mapping[str, object] | None = None, *, limit: int | None = None) -> pa.Table:
        """Run one SELECT statement (named parameters ``$name`` bound from ``params``); return an Arrow table.

        ``limit`` keeps the first rows only (applied on top of the statement, after its ORDER BY).

        Raises:
          InputError: not exactly one SELECT (or EXPLAIN) statement: the warehouse is read-only.
        """
        con = self.connect()
        try:
            snapshot.check_read_only(con, sql)
            rel = con.sql(sql, params=dict(params) if params else None)
            if rel is None:
                return pa.table({})
            return (rel.limit(limit) if limit is not None else rel).to_arrow_table()
        finally:
            con.close()

    def damaged(self) -> dict[str, str]:
        """Committed runs with a file that is not as committed: run id -> what is wrong (empty when none)."""
        records = snapshot.read_records(self.db_path, self.gate_path)
        if records is None:
            return {}
        rows = records["run_files"].to_pylist()
        return integrity.damaged_runs(self.root, ((r["run_id"], r["table_name"], r["path"], r["size_bytes"],
                                                   r.get("footer_sha256")) for r in rows))

    def _open_committed(self) -> duckdb.DuckDBPyConnection | None:
        """A read-only connection to the database file, or None while it holds no committed schema: no file
        yet, or a file whose first commit never finished (a writer killed inside that transaction leaves
        the file DuckDB created with no tables; the next commit creates them)."""
        if not self.db_path.exists():
            return None
        con = db.open_db(self.db_path, read_only=True, gate_path=self.gate_path)
        try:
            if db.has_schema(con):
                return con
        except BaseException:
            con.close()
            raise
        con.close()
        return None

    def committed_run(self, kind: str, grid_sha256: str) -> str | None:
        """The newest committed run of ``kind`` from the same grid text and the same sweepkit version, or None."""
        con = self._open_committed()
        if con is None:
            return None
        try:
            rows = con.execute(
                "select run_id from runs where kind = ? and grid_sha256 = ? and sweepkit_version = ? "
                "and status = 'committed' order by ended_at desc limit 1",
                [kind, grid_sha256, sweepkit.__version__]).fetchall()
        finally:
            con.close()
        return rows[0][0] if rows else None

    # ----------------------------------------------------------------------------------------- writing
    def write_run(self, *, kind: str, grid_name: str, grid_toml: str, grid_sha256: str,
                  tables: Mapping[str, Iterable[pa.RecordBatch]],
                  on_rows: Callable[[int], None] | None = None,
                  on_wait: Callable[[str], None] | None = None, since_s: float | None = None) -> str:
        """Stream a run's tables into Parquet and commit it atomically.

        Args:
          kind: ``decode``, ``serving``, ``trace`` or ``validation``.
          grid_name, grid_toml, grid_sha256: the grid the run comes from (stored in ``runs``).
          tables: view name -> record batches (columns of that view minus ``run_id``); consumed in order,
            one table after the other.
          on_rows: called with n as each batch of n rows is handed to a writer (progress).
          on_wait: told once, in one line, when the commit has to wait for another process (a reader or
            writer holding the DuckDB file); default: that line on stderr. The commit waits as long as it
            takes, keeping the run's files, and Ctrl-C still throws the run away.
          since_s: ``time.perf_counter()`` when the run's work began, for a caller that computes its tables
            before writing them (a serving run): ``started_at`` and ``wall_s`` then count from there.

        Returns:
          The new run id.

        Raises:
          InputError: bad kind or table name.  ValueError: columns differ from the table's contract.
          Anything the batch iterators raise, KeyboardInterrupt included: nothing is committed.
        """
        if kind not in KINDS:
            raise bad_value("kind", kind, KINDS)
        for name in tables:
            try:
                db.check_ident(name, "table")
            except ValueError as exc:
                raise bad_value("table", name, "a lower-case identifier [a-z_][a-z0-9_]*") from exc
            if name in ("runs", "run_files", "warehouse_meta") or name.startswith(db.CONTRACT_PREFIX):
                raise bad_value("table", name, "a name other than runs, run_files, warehouse_meta, contract_*")
        t0 = time.perf_counter() if since_s is None else since_s
        started = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=time.perf_counter() - t0)
        run_id = new_run_id()
        staging = self.root / "staging"
        staging.mkdir(parents=True, exist_ok=True)
        lock = RunLock(staging, run_id)
        run_dir = staging / run_id
        published: list[Path] = []
        committed = False
        try:
            self.clean_stale()
            written: dict[str, list[WrittenFile]] = {}
            for name, batches in tables.items():
                written[name] = write_stream(checked(name, batches), run_dir / name, on_rows=on_rows)
            for name in written:
                if not written[name]:
                    continue
                dest_parent = self.root / "parquet" / name
                dest_parent.mkdir(parents=True, exist_ok=True)
                dest = dest_parent / f"run_id={run_id}"
                os.rename(run_dir / name, dest)
                published.append(dest)
                fsync_path(dest_parent)
            files = {name: [(str((self.root / "parquet" / name / f"run_id={run_id}" / f.path.name)
                                 .relative_to(self.root)), f.rows, f.size_bytes, f.footer_sha256) for f in fs]
                     for name, fs in written.items()}
            row_count = sum(f[1] for fs in files.values() for f in fs)
            self._commit(run_id=run_id, kind=kind, grid_name=grid_name, grid_toml=grid_toml,
                         grid_sha256=grid_sha256, started=started, row_count=row_count,
                         wall_s=time.perf_counter() - t0, files=files, on_wait=on_wait or _to_stderr)
            committed = True
        finally:
            if not committed:
                for path in published:
                    shutil.rmtree(path, ignore_errors=True)
            shutil.rmtree(run_dir, ignore_errors=True)
            lock.release()
        return run_id

    def _commit(self, *, run_id: str, kind: str, grid_name: str, grid_toml: str, grid_sha256: str,
                started: dt.datetime, row_count: int, wall_s: float,
                files: Mapping[str, list[tuple[str, int, int, str | None]]],
                on_wait: Callable[[str], None]) -> None:
        """One transaction: the runs row, its run_files rows, and the views recreated over them."""
        self.root.mkdir(parents=True, exist_ok=True)
        with db.gate(self.gate_path, exclusive=True, timeout_s=None, on_wait=on_wait):
            self._commit_locked(run_id=run_id, kind=kind, grid_name=grid_name, grid_toml=grid_toml, on_wait=on_wait,
                                grid_sha256=grid_sha256, started=started, row_count=row_count, wall_s=wall_s,
                                files=files)

    def _commit_locked(self, *, run_id: str, kind: str, grid_name: str, grid_toml: str, grid_sha256: str,
                       started: dt.datetime, row_count: int, wall_s: float,
                       files: Mapping[str, list[tuple[str, int, int, str | None]]],
                       on_wait: Callable[[str], None]) -> None:
        con = db.open_db(self.db_path, read_only=False, timeout_s=None, on_wait=on_wait)
        try:
            con.execute("begin transaction")
            # Views hold absolute paths and the feed/schema digests assume this version wrote them last: if
            # the folder moved, or another sweepkit version committed, rebuild everything, not just ours.
            everything = not db.last_commit_matches(con, str(self.root.resolve()), sweepkit.__version__)
            db.ensure_schema(con, force=everything)
            con.execute("insert into runs values (?, ?, ?, ?, ?, ?, ?, ?, 'committed', ?, ?)",
                        [run_id, kind, grid_name, grid_toml, grid_sha256, sweepkit.__version__, started,
                         dt.datetime.now(dt.timezone.utc), row_count, wall_s])
            rows = [[run_id, name, *f] for name, fs in files.items() for f in fs]
            if rows:
                con.executemany("insert into run_files values (?, ?, ?, ?, ?, ?)", rows)
            con.execute("insert or replace into warehouse_meta values ('root', ?)", [str(self.root.resolve())])
            db.create_views(con, self.root, temp=False,
                            tables=None if everything else [n for n, fs in files.items() if fs])
            con.execute("commit")
        except BaseException:
            try:
                con.execute("rollback")
            except duckdb.Error:
                pass
            raise
        finally:
            con.close()

    def clean_stale(self) -> list[Path]:
        """Delete what dead writers left: their staging folders and uncommitted partitions; returns them.

        A writer's lock file exists (locked) before its staging folder does and until after its commit, so a
        folder whose lock nobody holds belongs to a dead writer or to a run already committed (re-checked).
        """
        staging = self.root / "staging"
        removed: list[Path] = []
        if staging.is_dir():
            for entry in staging.iterdir():
                if entry.is_dir() and not held_by_live_writer(staging / f"{entry.name}.lock"):
                    shutil.rmtree(entry, ignore_errors=True)
                    removed.append(entry)
                elif entry.name.endswith(".lock.tmp") and not held_by_live_writer(entry):
                    removed.append(entry)
        parquet = self.root / "parquet"
        if not parquet.is_dir():
            return removed
        committed = self._committed_ids()
        parts = itertools.chain.from_iterable(t.glob("run_id=*") for t in parquet.iterdir() if t.is_dir())
        dead = [p for p in parts if p.name[len("run_id="):] not in committed
                and not held_by_live_writer(staging / f"{p.name[len('run_id='):]}.lock")]
        if dead:
            committed = self._committed_ids()          # a writer may have committed since the first read
            for part in dead:
                if part.name[len("run_id="):] not in committed:
                    shutil.rmtree(part, ignore_errors=True)
                    removed.append(part)
        return removed

    def _committed_ids(self) -> set[str]:
        con = self._open_committed()
        if con is None:
            return set()
        try:
            return {r[0] for r in con.execute("select run_id from runs").fetchall()}
        finally:
            con.close()


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
