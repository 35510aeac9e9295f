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
    """Pass batches through, refusing the first one whose columns differ from the table's contract."""
    want = declared_columns().get(table)
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
        yield batch
