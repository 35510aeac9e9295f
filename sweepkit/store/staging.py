"""A writer's staging area: its lock file, the liveness test of other writers' locks, and the contract check.

``staging/<id>.lock`` is created already flock-ed (written under a temporary name, then renamed), so a
cleaner never sees a live writer's lock unlocked; a lock nobody holds belongs to a dead writer.
"""

from __future__ import annotations

import fcntl
import os
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator

import duckdb
import pyarrow as pa

from sweepkit.store import db


@lru_cache(maxsize=1)
def declared_columns() -> dict[str, list[str]]:
    """Contract columns per view, from schema.sql (run in an in-memory database)."""
    con = duckdb.connect()
    try:
        con.execute(db.schema_sql())
        return {k: [c for c, _ in v] for k, v in db.contracts(con).items()}
    finally:
        con.close()


@lru_cache(maxsize=1)
def declared_types() -> dict[str, dict[str, str]]:
    """Contract column types per view (DuckDB type names, e.g. ``INTEGER``), from schema.sql."""
    con = duckdb.connect()
    try:
        con.execute(db.schema_sql())
        rows = con.execute("select table_name, column_name, data_type from duckdb_columns() "
                           "where table_name like 'contract\\_%' escape '\\'").fetchall()
    finally:
        con.close()
    out: dict[str, dict[str, str]] = {}
    for table, column, type_ in rows:
        out.setdefault(table[len(db.CONTRACT_PREFIX):], {})[column] = type_
    return out


_NARROW = {"INTEGER": pa.int32(), "SMALLINT": pa.int16()}
"""Contract integer types a writer's wider integers are narrowed to (checked: an overflow raises)."""


def _narrowed(batch: pa.RecordBatch, types: dict[str, str]) -> pa.RecordBatch:
    """``batch`` with every int64 column whose contract type is narrower cast to it, so one quantity (gamma,
    tp, ...) has one type across tables, whichever writer made it."""
    casts = {i: _NARROW[types[f.name]] for i, f in enumerate(batch.schema)
             if pa.types.is_int64(f.type) and types.get(f.name) in _NARROW}
    if not casts:
        return batch
    cols = [batch.column(i).cast(casts[i], safe=True) if i in casts else batch.column(i)
            for i in range(batch.num_columns)]
    return pa.RecordBatch.from_arrays(cols, names=batch.schema.names)


class RunLock:
    """``staging/<id>.lock``, created already locked (flock), so a cleaner never sees it unlocked while live."""

    def __init__(self, staging: Path, run_id: str):
        self.path = staging / f"{run_id}.lock"
        tmp = staging / f".{run_id}.lock.tmp"
        self.fd = os.open(tmp, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        os.write(self.fd, f"{os.getpid()}\n".encode())
        os.rename(tmp, self.path)

    def release(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self.fd)


def held_by_live_writer(lock_path: Path) -> bool:
    """True while some process holds the lock; False (and the lock file is removed) when it is stale."""
    try:
        fd = os.open(lock_path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return True
    lock_path.unlink(missing_ok=True)
    os.close(fd)
    return False


def checked(table: str, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Pass batches through, refusing the first one whose columns differ from the table's contract, with
    int64 columns narrowed to the contract's integer type."""
    want = declared_columns().get(table)
    types = declared_types().get(table, {})
    first = True
    for batch in batches:
        if first and want is not None:
            names = batch.schema.names
            expected = [c for c in want if c != "run_id"]
            missing = [c for c in expected if c not in names]
            extra = [c for c in names if c not in expected]
            if missing or extra:
                raise ValueError(f"table {table!r} does not match contract_{table} in schema.sql: "
                                 f"missing {missing or 'nothing'}, undeclared {extra or 'nothing'}")
        first = False
        yield _narrowed(batch, types)
