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
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sweepkit.errors import InputError
from sweepkit.store import objstore
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
    parquet_uri: str = ""
    """Where the parts are: an object store's location (``sweepkit.store.objstore``), "" for this folder."""


class PendingRun:
    """One run's pending folder, and its parts: there, or under ``<parquet_uri>/pending/<id>/`` in an object store.

    Args:
      root: the warehouse root; or, in a worker that only writes and reads parts, the run's
        :attr:`parts_root` (an object store's URI when the parts are there).
      run_id: the run.  parquet_uri: the object-store location of the parts (None: under ``root``).

    Example:
      >>> run = PendingRun(tmp, "r1")                                               # doctest: +SKIP
      >>> run.create(Manifest("decode", "seed", sha, digest, 7, now)); run.write("decode", 0, table)  # doctest: +SKIP
    """

    def __init__(self, root: str | Path, run_id: str, parquet_uri: str | None = None):
        if not _RUN_ID.match(run_id or ""):
            raise InputError(f"--resume: run id {run_id!r} is not allowed; expected the id a pending run printed "
                             "(letters, digits, '.', '_', '-')")
        if objstore.is_uri(str(root)):
            root, parquet_uri = Path("."), str(root)
        self.root, self.run_id = Path(root), run_id
        self.dir = self.root / PENDING / run_id
        self.remote = objstore.parse_uri(parquet_uri, "manifest.parquet_uri") if parquet_uri else None
        self._lock_fd: int | None = None

    @property
    def parts_root(self) -> str:
        """What a worker passes as ``root`` to reach the parts: the folder, or the object store's URI."""
        return self.remote.uri if self.remote else str(self.root.resolve())

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

    def path(self, table: str, digest: str, index: int) -> Path | str:
        """Part ``index`` of ``table``: a local path, or its path in the object store's file system."""
        if self.remote:
            return self.remote.path(PENDING, self.run_id, table, part_name(digest, index))
        return self.dir / table / part_name(digest, index)

    def write(self, table: str, digest: str, index: int, data: pa.Table) -> Path | str:
        """Write part ``index`` of ``table`` (atomically; an existing part is replaced by the same rows). An
        object appears only once its upload completes, so it too is there whole or not at all."""
        path = self.path(table, digest, index)
        if self.remote:
            strings = [f.name for f in data.schema if is_string(f.type)]
            pq.write_table(data, path, compression=COMPRESSION, use_dictionary=strings or False,
                           filesystem=self.remote.filesystem())
        else:
            write_part(path, data)
        return path

    def done(self, tables: Mapping[int, tuple[str, ...]], digest: str) -> set[int]:
        """The part indices whose every table's file is there (``tables``: index -> the tables it writes)."""
        if self.remote:
            listing = self.remote.filesystem().get_file_info(pafs.FileSelector(
                self.remote.path(PENDING, self.run_id), recursive=True, allow_not_found=True))
            there = {f.path for f in listing if f.type == pafs.FileType.File}
            return {i for i, names in tables.items() if all(self.path(t, digest, i) in there for t in names)}
        return {i for i, names in tables.items() if all(self.path(t, digest, i).is_file() for t in names)}

    def read(self, table: str, digest: str, index: int) -> pa.Table:
        return pq.read_table(self.path(table, digest, index),
                             filesystem=self.remote.filesystem() if self.remote else None)


def commit_pending(wh, run: PendingRun, *, kind: str, grid_name: str, grid_toml: str, grid_sha256: str,
                   files: Mapping[str, list[Path | str]], started, wall_s: float, on_wait=None) -> str:
    """Publish a pending run's parts and commit them in one transaction (readers see all or nothing).

    Local parts are renamed into ``parquet/<table>/run_id=<id>/``; parts in an object store, which has no
    rename, are copied there inside the store (server side), and only the commit's transaction makes the
    copies visible.

    Args:
      wh: the :class:`sweepkit.store.warehouse.Warehouse`.  run: the pending run (its lock held).
      files: table -> its part files (:meth:`PendingRun.path`), every table of the contract's columns.
      started: the run's start (``datetime``, UTC).  wall_s: seconds of work, all attempts together.

    Returns:
      The run id. The pending folder (and its parts) is removed once committed; if the commit fails the
      local parts are moved back (the copies in a store deleted), so ``--resume`` can try again without
      recomputing.
    """
    from sweepkit.store.staging import RunLock
    from sweepkit.store.warehouse import _to_stderr

    staging = wh.root / "staging"
    staging.mkdir(parents=True, exist_ok=True)
    lock = RunLock(staging, run.run_id)            # a cleaner leaves the renamed partitions alone meanwhile
    undo: list = []
    committed = False
    try:
        wh.clean_stale()
        publish = _publish_remote if run.remote else _publish_local
        records = {table: publish(wh, run, table, paths, undo) for table, paths in files.items()}
        rows = sum(r[1] for rs in records.values() for r in rs)
        wh._commit(run_id=run.run_id, kind=kind, grid_name=grid_name, grid_toml=grid_toml, grid_sha256=grid_sha256,
                   started=started, row_count=rows, wall_s=wall_s, files=records, on_wait=on_wait or _to_stderr)
        committed = True
    finally:
        if not committed:
            for step in reversed(undo):
                step()
        lock.release()
    import shutil

    run.unlock()
    if run.remote:
        objstore.delete_prefix(run.remote.filesystem(), run.remote.path(PENDING, run.run_id))
    shutil.rmtree(run.dir, ignore_errors=True)
    return run.run_id


def _publish_local(wh, run: PendingRun, table: str, paths: list[Path], undo: list) -> list[tuple]:
    """Rename a table's parts into its run folder; ``undo`` gets how to move each back. Returns run_files rows."""
    from sweepkit.store.integrity import content_sha256, footer_sha256

    dest = wh.root / "parquet" / table / f"run_id={run.run_id}"
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for src in sorted(paths):
        target = dest / src.name
        os.rename(src, target)
        undo.append(lambda t=target, s=src: t.exists() and os.rename(t, s))
        out.append((str(target.relative_to(wh.root)), pq.ParquetFile(target).metadata.num_rows,
                    target.stat().st_size, footer_sha256(target), content_sha256(target)))
    fsync_path(dest)
    fsync_path(dest.parent)
    return out


def _publish_remote(wh, run: PendingRun, table: str, paths: list[str], undo: list) -> list[tuple]:
    """Copy a table's parts, inside the object store, under its run prefix; ``undo`` gets how to delete the
    copies (the parts stay pending). Returns run_files rows (with each object's URI)."""
    from sweepkit.store.integrity import content_sha256, footer_sha256

    loc, fs = run.remote, run.remote.filesystem()
    dest = loc.path("parquet", table, f"run_id={run.run_id}")
    undo.append(lambda: objstore.delete_prefix(fs, dest))
    out = []
    for src in sorted(paths):
        target = f"{dest}/{src.rsplit('/', 1)[-1]}"
        fs.copy_file(src, target)
        out.append((loc.uri_of(target), pq.read_metadata(target, filesystem=fs).num_rows,
                    fs.get_file_info(target).size, footer_sha256(target, fs), content_sha256(target, fs)))
    return out
