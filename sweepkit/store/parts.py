"""A resumable run's parts: deterministic Parquet files that workers write and the coordinator commits.

Layout under the warehouse root::

    pending/<id>/manifest.json                      kind, grid, work digest, number of parts
    pending/<id>/.lock                              held (flock) by the run's live coordinator
    pending/<id>/<table>/part-<digest>-<i>.parquet  part i of a table (tables named _x are the coordinator's)

A part's name derives from the work digest (grid text, sweepkit version, how the work is cut) and the
part's index, so a retried or resumed task rewrites the same name with the same rows, and a part is
either there whole or not at all (written under a temporary name, fsynced, renamed). Nothing under
``pending/`` is ever read by queries: the run becomes visible only when :meth:`Warehouse.commit_pending`
publishes its parts and commits them in one transaction, exactly as a streamed run.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from sweepkit.errors import InputError
from sweepkit.store.writer import COMPRESSION, fsync_path, is_string

PENDING = "pending"
_RUN_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_.-]*$")


def part_name(digest: str, index: int) -> str:
    """The file name of part ``index`` of work ``digest``.

    Example:
      >>> part_name("0123456789ab", 7)
      'part-0123456789ab-000007.parquet'
    """
    return f"part-{digest}-{index:06d}.parquet"


def write_part(path: Path, table: pa.Table) -> None:
    """Write ``table`` to ``path`` atomically: a temporary name in the same folder, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    strings = [f.name for f in table.schema if is_string(f.type)]
    pq.write_table(table, tmp, compression=COMPRESSION, use_dictionary=strings or False)
    fsync_path(tmp)
    os.replace(tmp, path)
    fsync_path(path.parent)


@dataclass(frozen=True)
class Manifest:
    """What a pending run computes: enough to refuse resuming it with another grid or another cut."""

    kind: str
    grid_name: str
    grid_sha256: str
    digest: str
    n_parts: int
    started_at: str


class PendingRun:
    """One run's pending folder.

    Args:
      root: the warehouse root.  run_id: the run.

    Example:
      >>> run = PendingRun(tmp, "r1")                                               # doctest: +SKIP
      >>> run.create(Manifest("decode", "seed", sha, digest, 7, now)); run.write("decode", 0, table)  # doctest: +SKIP
    """

    def __init__(self, root: str | Path, run_id: str):
        if not _RUN_ID.match(run_id or ""):
            raise InputError(f"--resume: run id {run_id!r} is not allowed; expected the id a pending run printed "
                             "(letters, digits, '.', '_', '-')")
        self.root, self.run_id = Path(root), run_id
        self.dir = self.root / PENDING / run_id
        self._lock_fd: int | None = None

    @property
    def exists(self) -> bool:
        return (self.dir / "manifest.json").is_file()

    def create(self, manifest: Manifest) -> None:
        """Start the run's folder with its manifest (written atomically)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / ".manifest.json.tmp"
        tmp.write_text(json.dumps(manifest.__dict__, indent=1), encoding="utf-8")
        os.replace(tmp, self.dir / "manifest.json")

    def manifest(self) -> Manifest:
        """The run's manifest.

        Raises:
          InputError: no such pending run (never started, or already committed and cleaned up).
        """
        path = self.dir / "manifest.json"
        if not path.is_file():
            raise InputError(f"--resume: {self.run_id!r} is not allowed; no pending run with that id in "
                             f"{self.root / PENDING} (a committed run needs no resume; `sweepkit runs` lists them)")
        return Manifest(**json.loads(path.read_text(encoding="utf-8")))

    def lock(self) -> None:
        """Hold the run's lock for this process (a second coordinator of the same run is refused)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise InputError(f"--resume: {self.run_id!r} is not allowed; another live process is running it") from None
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def path(self, table: str, digest: str, index: int) -> Path:
        return self.dir / table / part_name(digest, index)

    def write(self, table: str, digest: str, index: int, data: pa.Table) -> Path:
        """Write part ``index`` of ``table`` (atomically; an existing part is replaced by the same rows)."""
        path = self.path(table, digest, index)
        write_part(path, data)
        return path

    def done(self, tables: Mapping[int, tuple[str, ...]], digest: str) -> set[int]:
        """The part indices whose every table's file is there (``tables``: index -> the tables it writes)."""
        return {i for i, names in tables.items() if all(self.path(t, digest, i).is_file() for t in names)}

    def read(self, table: str, digest: str, index: int) -> pa.Table:
        return pq.read_table(self.path(table, digest, index))


def commit_pending(wh, run: PendingRun, *, kind: str, grid_name: str, grid_toml: str, grid_sha256: str,
                   files: Mapping[str, list[Path]], started, wall_s: float, on_wait=None) -> str:
    """Publish a pending run's parts and commit them in one transaction (readers see all or nothing).

    Args:
      wh: the :class:`sweepkit.store.warehouse.Warehouse`.  run: the pending run (its lock held).
      files: table -> its part files (all under ``run.dir``), every table of the contract's columns.
      started: the run's start (``datetime``, UTC).  wall_s: seconds of work, all attempts together.

    Returns:
      The run id. The pending folder is removed once committed; if the commit fails the parts are moved
      back, so ``--resume`` can try again without recomputing.
    """
    from sweepkit.store.integrity import footer_sha256
    from sweepkit.store.staging import RunLock
    from sweepkit.store.warehouse import _to_stderr

    staging = wh.root / "staging"
    staging.mkdir(parents=True, exist_ok=True)
    lock = RunLock(staging, run.run_id)            # a cleaner leaves the renamed partitions alone meanwhile
    moved: list[tuple[Path, Path]] = []
    committed = False
    try:
        wh.clean_stale()
        records: dict[str, list[tuple[str, int, int, str | None]]] = {}
        for table, paths in files.items():
            dest = wh.root / "parquet" / table / f"run_id={run.run_id}"
            dest.mkdir(parents=True, exist_ok=True)
            records[table] = []
            for src in sorted(paths):
                target = dest / src.name
                os.rename(src, target)
                moved.append((target, src))
                records[table].append((str(target.relative_to(wh.root)), pq.ParquetFile(target).metadata.num_rows,
                                       target.stat().st_size, footer_sha256(target)))
            fsync_path(dest)
            fsync_path(dest.parent)
        rows = sum(r[1] for rs in records.values() for r in rs)
        wh._commit(run_id=run.run_id, kind=kind, grid_name=grid_name, grid_toml=grid_toml, grid_sha256=grid_sha256,
                   started=started, row_count=rows, wall_s=wall_s, files=records, on_wait=on_wait or _to_stderr)
        committed = True
    finally:
        if not committed:
            for target, src in reversed(moved):
                if target.exists():
                    os.rename(target, src)
        lock.release()
    import shutil

    run.unlock()
    shutil.rmtree(run.dir, ignore_errors=True)
    return run.run_id
