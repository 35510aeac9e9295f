"""The DuckDB side of the warehouse: opening with lock retries, the schema, and the views over Parquet.

DuckDB lets one process open a database file read-write and then no other process may open it at all;
any number of processes may open it read-only together. So writers hold it read-write only for the
brief commit, and every open retries with backoff while another process holds a conflicting lock.

So that a stream of readers cannot starve a committing writer, opens pass a gate (an flock on
``staging/.commit-gate``): a reader takes it shared only while it opens, a writer takes it exclusive for
its whole commit, so new readers wait for the commit while the ones already open finish.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import random
import re
import time
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Callable, Iterable, Iterator

import duckdb

from sweepkit.store import integrity, objstore
from sweepkit.store.sqltext import macros_sql, sql_str

OPEN_TIMEOUT_S = 120.0
"""How long an open keeps retrying while another process holds the database file."""

CONTRACT_PREFIX = "contract_"
KNOWN_VIEWS = ("decode", "serving", "capacity", "trace_steps")
"""Views other modules write; a view with neither files nor a contract is simply absent."""

_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


def schema_sql() -> str:
    """The text of ``sweepkit/store/schema.sql`` (package data, read through :mod:`importlib.resources`)."""
    return resources.files("sweepkit.store").joinpath("schema.sql").read_text(encoding="utf-8")


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(con.execute(
        "select count(*) from duckdb_tables() where database_name = current_database() and schema_name = 'main' "
        "and table_name = ?", [name]).fetchall()[0][0])


def has_schema(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a commit has created the warehouse's tables in this database (a new file has none)."""
    return _has_table(con, "runs") and _has_table(con, "warehouse_meta")


def last_commit_matches(con: duckdb.DuckDBPyConnection, root: str, version: str) -> bool:
    """Whether the warehouse was last committed from ``root`` by sweepkit ``version`` (False when new)."""
    if not (_has_table(con, "warehouse_meta") and _has_table(con, "runs")):
        return False
    stored = con.execute("select value from warehouse_meta where key = 'root'").fetchall()
    last = con.execute("select sweepkit_version from runs order by ended_at desc limit 1").fetchall()
    return stored == [(root,)] and last in ([(version,)], [])


def ensure_schema(con: duckdb.DuckDBPyConnection, *, force: bool = False) -> None:
    """Run schema.sql on a read-write connection unless the database already holds this very text
    (``warehouse_meta.schema_sha256``: a commit then runs no DDL) and ``force`` is False."""
    text = schema_sql()
    digest = hashlib.sha256(text.encode()).hexdigest()
    has_meta = _has_table(con, "warehouse_meta")
    if not force and has_meta and con.execute(
            "select value from warehouse_meta where key = 'schema_sha256'").fetchall() == [(digest,)]:
        return
    con.execute(text)
    con.execute("insert or replace into warehouse_meta values ('schema_sha256', ?)", [digest])


def check_ident(name: str, what: str) -> str:
    """A lower-case SQL identifier (table names become folder and view names)."""
    if not _IDENT.match(name):
        raise ValueError(f"{what} = {name!r} is not allowed; expected a lower-case identifier [a-z_][a-z0-9_]*")
    return name


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


WAIT_NOTE_S = 1.0
"""A writer still waiting for the database file after this long says so (once)."""


class _Waiter:
    """Deadline and the one "waiting" note of a blocked open (timeout None: wait as long as it takes)."""

    def __init__(self, timeout_s: float | None, on_wait: Callable[[str], None] | None, what: str):
        self.start = time.monotonic()
        self.deadline = None if timeout_s is None else self.start + timeout_s
        self.on_wait, self.what, self.noted = on_wait, what, False

    def expired(self) -> bool:
        now = time.monotonic()
        if self.on_wait is not None and not self.noted and now - self.start >= WAIT_NOTE_S:
            self.noted = True
            self.on_wait(f"waiting: {self.what} (the run's files are kept; it commits as soon as it can)")
        return self.deadline is not None and now >= self.deadline


@contextmanager
def gate(path: Path | None, *, exclusive: bool, timeout_s: float | None = OPEN_TIMEOUT_S,
         on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the commit gate: exclusive for a writer's commit, shared for a reader's open (see module doc).

    ``timeout_s`` None waits as long as it takes; ``on_wait`` hears once that it is waiting.
    """
    if path is None or (not exclusive and not path.exists()):
        yield
        return
    if exclusive:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, (os.O_RDWR | os.O_CREAT) if exclusive else os.O_RDONLY, 0o644)
    try:
        waiter = _Waiter(timeout_s, on_wait, "another process is committing to this warehouse")
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if waiter.expired():
                    raise TimeoutError(f"{path}: another process kept the warehouse locked for {timeout_s:.0f} s") from None
                time.sleep(0.002 + 0.01 * random.random())
        yield
    finally:
        os.close(fd)                                           # closing releases the flock


def open_db(path: Path, *, read_only: bool, timeout_s: float | None = OPEN_TIMEOUT_S,
            gate_path: Path | None = None, on_wait: Callable[[str], None] | None = None
            ) -> duckdb.DuckDBPyConnection:
    """Open the database file, retrying with capped exponential backoff (plus jitter) while it is locked.

    A read-only open passes ``gate_path`` shared; a writer holds it exclusive around its whole commit.
    ``timeout_s`` None retries as long as it takes; ``on_wait`` hears once that it is waiting.

    Raises:
      duckdb.IOException: still locked after ``timeout_s``, or any other open error.
    """
    waiter = _Waiter(timeout_s, on_wait, f"another process holds {path} open")
    delay = 0.005
    while True:
        try:
            if read_only:
                with gate(gate_path, exclusive=False, timeout_s=timeout_s):
                    return duckdb.connect(str(path), read_only=True)
            return duckdb.connect(str(path), read_only=False)
        except duckdb.Error as exc:
            if not _is_lock_error(exc) or waiter.expired():
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2.0, 0.2)


def contracts(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    """Declared views: name -> [(column, comment)] from the ``contract_<name>`` tables."""
    rows = con.execute(
        "select table_name, column_name, coalesce(comment, '') from duckdb_columns() "
        "where database_name = current_database() and schema_name = 'main' and table_name like 'contract\\_%' escape '\\' "
        "order by table_name, column_index").fetchall()
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, comment in rows:
        out.setdefault(table[len(CONTRACT_PREFIX):], []).append((column, comment))
    return out


def committed_files(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str, int, str | None, str | None]]:
    """Committed files in commit order: (run_id, table, relative path, size_bytes, footer_sha256,
    content_sha256); the digests are None where not recorded (a warehouse committed by an older sweepkit)."""
    have = {r[0] for r in con.execute(
        "select column_name from duckdb_columns() where database_name = current_database() "
        "and schema_name = 'main' and table_name = 'run_files'").fetchall()}
    digests = ", ".join(f"f.{c}" if c in have else f"null::varchar as {c}" for c in ("footer_sha256", "content_sha256"))
    return con.execute(
        f"select f.run_id, f.table_name, f.path, f.size_bytes, {digests} from run_files f join runs r "
        "using (run_id) where r.status = 'committed' order by r.started_at, f.path").fetchall()


def files_by_table(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Committed files: table -> relative paths, in commit order."""
    out: dict[str, list[str]] = {}
    for _run, table, path, *_ in committed_files(con):
        out.setdefault(table, []).append(path)
    return out


def view_sql(name: str, root: Path, paths: Iterable[str], *, temp: bool,
             columns: list[str] | None = None) -> str | None:
    """``create or replace view`` for one table over its committed files (None when there are none).

    With a contract, the view's columns are the contract's, in its order; otherwise run_id then the files'.
    """
    files = [str((root / p).resolve()) for p in paths]
    if not files:
        return None
    listing = ", ".join(sql_str(f) for f in files)
    kind = "temp view" if temp else "view"
    select = ", ".join(f'"{c}"' for c in columns) if columns else "run_id, * exclude (run_id)"
    return (f"create or replace {kind} {name} as select {select} from read_parquet([{listing}], "
            f"hive_partitioning = true, hive_types = {{'run_id': 'VARCHAR'}}, union_by_name = true)")


def create_views(con: duckdb.DuckDBPyConnection, root: Path, *, temp: bool,
                 tables: Iterable[str] | None = None, feed: bool = True) -> list[str]:
    """(Re)create the views: over committed files, else over their empty contract tables; returns the names.

    Args:
      con: an open connection holding the schema (persistent views need it read-write).
      root: warehouse root the relative file paths hang from.
      temp: temporary views (a read-only connection, or a warehouse moved since its last commit).
      tables: a commit's tables: only their views (and any view not there yet) are recreated, and the feed
        views only when missing or defined differently (:func:`sweepkit.store.feed.feed_digest`). A view reads
        its own files only and the feed views name the others, so nothing else changes. None: all of them.
      feed: also (re)create the feed views (v_*); False leaves them to the caller.
    """
    declared = contracts(con)
    committed = committed_files(con)
    files: dict[str, list[str]] = {}
    for _run, table, path, *_ in committed:
        files.setdefault(table, []).append(path)
    names = sorted(set(declared) | set(files))
    existing = {r[0] for r in con.execute(
        "select view_name from duckdb_views() where database_name = current_database() "
        "and schema_name = 'main' and not internal").fetchall()}
    todo = names if tables is None else [n for n in names if n in set(tables) or n not in existing]
    damaged = integrity.damaged_runs(root, (f for f in committed if f[1] in set(todo)))
    for name in todo:
        check_ident(name, "table")
        bad = next(((run, damaged[run]) for run, table, *_ in committed if table == name and run in damaged), None)
        con.execute(_view_statement(con, name, root, files.get(name, []), declared.get(name), temp, bad))
        if not temp:
            _comment_view(con, name, declared.get(name, []))
    con.execute(macros_sql(temp=temp))
    # the feed views (sweepkit/store/feed.py): v_decode, v_serving, v_capacity, v_matrix
    from sweepkit.store.feed import FEED, create_feed_views, feed_digest

    if not feed:
        return names
    if temp:
        return names + create_feed_views(con, temp=True)
    digest = feed_digest(schema_sql() + macros_sql())
    stored = con.execute("select value from warehouse_meta where key = 'feed_sha256'").fetchall()
    if tables is None or stored != [(digest,)] or not set(FEED) <= existing:
        create_feed_views(con, temp=False)
        con.execute("insert or replace into warehouse_meta values ('feed_sha256', ?)", [digest])
    names += list(FEED)
    return names


def _view_statement(con: duckdb.DuckDBPyConnection, name: str, root: Path, paths: list[str],
                    declared: list[tuple[str, str]] | None, temp: bool, bad: tuple[str, str] | None) -> str:
    """The view of one table: over its files, its empty contract, or failing with the damaged run ``bad``.

    Object-store files are read through an Arrow dataset registered in ``con`` (``sweepkit.store.objstore``),
    so only a temporary view reads them; a persisted one fails with one line saying how to read them."""
    kind = "temp view" if temp else "view"
    columns = [c for c, _ in declared] if declared else None
    remote = bool(paths) and objstore.is_uri(paths[0])
    if remote and not temp:
        return _damaged_view_sql(name, kind, objstore.unreadable(name, paths), columns)
    if bad is not None:
        return _damaged_view_sql(name, kind, integrity.damage_message(name, *bad), columns)
    if remote:
        select = ", ".join(f'"{c}"' for c in columns) if columns else "run_id, * exclude (run_id)"
        return f"create or replace {kind} {name} as select {select} from {objstore.register(con, name, paths)}"
    sql = view_sql(name, root, paths, temp=temp, columns=columns)
    return sql or f"create or replace {kind} {name} as select * from {CONTRACT_PREFIX}{name}"


def _damaged_view_sql(name: str, kind: str, message: str, columns: list[str] | None) -> str:
    """A view that fails every query with ``message`` (a committed file of one of its runs is damaged)."""
    source = f"select * from {CONTRACT_PREFIX}{name}" if columns else "select null::varchar as run_id"
    return (f"create or replace {kind} {name} as select * from ({source}) "
            f"where (select error({sql_str(message)})::boolean)")


def _comment_view(con: duckdb.DuckDBPyConnection, name: str, declared: list[tuple[str, str]]) -> None:
    """Copy a contract's column comments onto its view."""
    present = {r[0] for r in con.execute(
        "select column_name from duckdb_columns() where table_name = ? and schema_name = 'main' "
        "and database_name = current_database()", [name]).fetchall()}
    comments = [f"comment on column {name}.{column} is {sql_str(comment)}"
                for column, comment in declared if comment and column in present]
    if comments:
        con.execute(";\n".join(comments))
