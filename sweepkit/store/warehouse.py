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

import contextlib
import datetime as dt
import os
import secrets
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

import duckdb
import pyarrow as pa

import sweepkit
from sweepkit.errors import bad_value
from sweepkit.store import cleanup, commit, db, integrity, objstore, snapshot
from sweepkit.store.staging import RunLock, checked, declared_columns
from sweepkit.store.writer import WrittenFile, fsync_path, write_stream

__all__ = ["DB_NAME", "KINDS", "Warehouse", "declared_columns", "default_root", "new_run_id"]

KINDS = ("decode", "serving", "trace", "validation", "plan")
DB_NAME = "sweepkit.duckdb"


def default_root() -> Path:
    """``$SWEEPKIT_WAREHOUSE`` if set, else ``./warehouse``."""
    return Path(os.environ.get("SWEEPKIT_WAREHOUSE") or "warehouse")


def new_run_id() -> str:
    """UTC start time to the millisecond plus 6 random hex digits: sorts by start, unique across processes."""
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond // 1000:03d}Z-" + secrets.token_hex(3)


class Warehouse:
    """A warehouse folder: write runs atomically, read them through DuckDB views.

    Args:
      root: the folder (the DuckDB file, locks, pending manifests; and the Parquet unless ``parquet_uri``).
      parquet_uri: ``s3://bucket/prefix`` or ``gs://bucket/prefix``: runs write their Parquet there
        (``sweepkit.store.objstore``); None: where the committed runs are, else ``root/parquet``.

    Attributes:
      root: the folder.  db_path: ``root / "sweepkit.duckdb"``.

    Example:
      >>> wh = Warehouse(tmp)                                                      # doctest: +SKIP
      >>> run_id = wh.write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text,
      ...                       grid_sha256=spec.sha256, tables={"decode": batches})  # doctest: +SKIP
      >>> wh.query("select count(*) n from decode where run_id = $r", {"r": run_id})  # doctest: +SKIP
    """

    def __init__(self, root: str | Path | None = None, parquet_uri: str | None = None):
        self.root = Path(root) if root is not None else default_root()
        self.db_path = self.root / DB_NAME
        self.gate_path = self.root / "staging" / ".commit-gate"
        self._given = objstore.parse_uri(parquet_uri) if parquet_uri is not None else None
        self._resolved, self._location = False, None
        self._pinned = threading.local()

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

    @contextlib.contextmanager
    def pinned(self) -> Iterator[Warehouse]:
        """Answer every :meth:`query` this thread makes inside the block from one snapshot.

        Each query otherwise opens a snapshot of its own (the run records copied, the views built: about
        0.2 s); a command that runs several queries, such as a report's sections, pays that once here, and
        every query in the block reads the same commits, whatever a writer commits meanwhile. Blocks nest
        (the outermost one's snapshot serves them all).

        Example:
          >>> with wh.pinned():                                                    # doctest: +SKIP
          ...     runs = wh.query("select run_id from runs")
          ...     rows = wh.query("select count(*) from serving")
        """
        if getattr(self._pinned, "con", None) is not None:
            yield self
            return
        self._pinned.con = self.connect()
        try:
            yield self
        finally:
            con, self._pinned.con = self._pinned.con, None
            con.close()

    def query(self, sql: str, params: Mapping[str, object] | None = None, *, limit: int | None = None) -> pa.Table:
        """Run one SELECT statement (named parameters ``$name`` bound from ``params``); return an Arrow table.

        ``limit`` keeps the first rows only (applied on top of the statement, after its ORDER BY).

        Raises:
          InputError: not exactly one SELECT (or EXPLAIN) statement: the warehouse is read-only.
        """
        shared = getattr(self._pinned, "con", None)
        con = shared if shared is not None else self.connect()
        try:
            snapshot.check_read_only(con, sql)
            rel = con.sql(sql, params=dict(params) if params else None)
            if rel is None:
                return pa.table({})
            return (rel.limit(limit) if limit is not None else rel).to_arrow_table()
        finally:
            if shared is None:
                con.close()

    def damaged(self) -> dict[str, str]:
        """Committed runs with a file that is not as committed: run id -> what is wrong (empty when none)."""
        records = snapshot.read_records(self.db_path, self.gate_path)
        if records is None:
            return {}
        rows = records["run_files"].to_pylist()
        return integrity.damaged_runs(self.root, ((r["run_id"], r["table_name"], r["path"], r["size_bytes"],
                                                   r.get("footer_sha256"), r.get("content_sha256"))
                                                  for r in rows))

    def verify(self) -> list[tuple[str, str, str, str]]:
        """Every committed file's whole content against its commit (:func:`integrity.verify_files`):
        ``(run_id, table, path, status)`` per file, status ``ok``, ``ok (no checksum recorded)`` or
        ``damaged: ...``; empty for a warehouse with no run."""
        records = snapshot.read_records(self.db_path, self.gate_path)
        if records is None:
            return []
        rows = sorted(records["run_files"].to_pylist(), key=lambda r: (r["run_id"], r["table_name"], r["path"]))
        return integrity.verify_files(self.root, ((r["run_id"], r["table_name"], r["path"], r["size_bytes"],
                                                   r.get("footer_sha256"), r.get("content_sha256")) for r in rows))

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
        loc = self.location()
        if loc is not None:
            objstore.check_reachable(loc)                        # before any work is done
        t0 = time.perf_counter() if since_s is None else since_s
        started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=time.perf_counter() - t0)
        run_id = new_run_id()
        staging = self.root / "staging"
        staging.mkdir(parents=True, exist_ok=True)
        lock = RunLock(staging, run_id)
        run_dir = staging / run_id
        published: list[Path | str] = []
        committed = False
        try:
            self.clean_stale()
            written = self._write_tables(loc, run_id, tables, published, on_rows)
            files = {name: [(self._file_ref(loc, name, run_id, f.path), f.rows, f.size_bytes, f.footer_sha256,
                             f.content_sha256)
                            for f in fs] for name, fs in written.items()}
            row_count = sum(f[1] for fs in files.values() for f in fs)
            self._commit(run_id=run_id, kind=kind, grid_name=grid_name, grid_toml=grid_toml,
                         grid_sha256=grid_sha256, started=started, row_count=row_count,
                         wall_s=time.perf_counter() - t0, files=files, on_wait=on_wait or _to_stderr)
            committed = True
        finally:
            if not committed:
                for path in published:
                    if isinstance(path, Path):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        objstore.delete_prefix(*objstore.split(path))
            shutil.rmtree(run_dir, ignore_errors=True)
            lock.release()
        return run_id

    def _write_tables(self, loc: objstore.Location | None, run_id: str,
                      tables: Mapping[str, Iterable[pa.RecordBatch]], published: list[Path | str],
                      on_rows: Callable[[int], None] | None) -> dict[str, list[WrittenFile]]:
        """Write each table's files: locally into ``staging/<id>/<table>``, then renamed to
        ``parquet/<table>/run_id=<id>``; in an object store straight under that prefix (no rename there:
        the commit's transaction alone makes them visible). ``published`` gets each folder or prefix."""
        written: dict[str, list[WrittenFile]] = {}
        for name, batches in tables.items():
            if loc is None:
                written[name] = write_stream(checked(name, batches), self.root / "staging" / run_id / name,
                                             on_rows=on_rows)
                continue
            dest = loc.path("parquet", name, f"run_id={run_id}")
            published.append(loc.uri_of(dest))
            written[name] = write_stream(checked(name, batches), dest, on_rows=on_rows,
                                         filesystem=loc.filesystem())
        for name in written if loc is None else ():
            if not written[name]:
                continue
            dest_parent = self.root / "parquet" / name
            dest_parent.mkdir(parents=True, exist_ok=True)
            dest = dest_parent / f"run_id={run_id}"
            os.rename(self.root / "staging" / run_id / name, dest)
            published.append(dest)
            fsync_path(dest_parent)
        return written

    def _file_ref(self, loc: objstore.Location | None, table: str, run_id: str, path) -> str:
        """What ``run_files.path`` holds: the path relative to the root, or the object's URI."""
        if loc is not None:
            return loc.uri_of(str(path))
        return str((self.root / "parquet" / table / f"run_id={run_id}" / path.name).relative_to(self.root))

    def _commit(self, **run) -> None:
        """One transaction: the runs row, its run_files rows, and the views recreated over them
        (:func:`sweepkit.store.commit.commit_run`, which lists the arguments)."""
        commit.commit_run(self, **run)

    def clean_stale(self) -> list[Path | str]:
        """Delete what dead writers left (``sweepkit.store.cleanup``): staging folders, uncommitted run
        folders and prefixes, orphaned pending parts in an object store; returns them."""
        return cleanup.clean_stale(self)

    def _committed_ids(self) -> set[str]:
        con = self._open_committed()
        if con is None:
            return set()
        try:
            return {r[0] for r in con.execute("select run_id from runs").fetchall()}
        finally:
            con.close()

    def location(self) -> objstore.Location | None:
        """Where this warehouse's Parquet lives: an object store, or None for its folder ``root/parquet``.

        A warehouse keeps its Parquet in one place: where its committed runs are (``warehouse_meta``'s
        ``parquet_uri``), which a ``parquet_uri`` given to the constructor must match; with no run yet, the
        one given.

        Raises:
          InputError: a ``parquet_uri`` other than the one the committed runs use.
        """
        if not self._resolved:
            self._location = objstore.resolve(self._given, self._stored_uri(), self.root)
            self._resolved = True
        return self._location

    def adopt_location(self, uri: str) -> None:
        """Use ``uri`` ("" for the folder) as the location if none was given and no run is committed yet: a
        resumed run's parts are where its manifest says."""
        if self._given is None and self._stored_uri() is None:
            self._given, self._resolved = (objstore.parse_uri(uri) if uri else None), False

    def _stored_uri(self) -> str | None:
        con = self._open_committed()
        if con is None:
            return None
        try:
            return objstore.stored_uri(con)
        finally:
            con.close()


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
