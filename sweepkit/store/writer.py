"""Streaming Parquet writer: background threads drain a bounded queue of record batches into files.

The producer (the sweep engine, on the calling thread) computes chunk k+1 while writer threads encode chunk
k: pyarrow releases the GIL while it encodes and compresses. The queue holds at most ``queue_chunks``
batches and each writer buffers at most one row group, so memory stays bounded whatever the grid size.

Each writer thread owns its files (``part-<thread>-<n>.parquet``); rows are not in grid order across files.
Dictionary encoding is on for string columns only (device, model, ... and the bound labels), row groups
hold >= ``row_group_rows`` rows (except a file's last), files roll over after ``file_rows`` rows.
"""

from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from sweepkit.store.integrity import content_sha256, footer_sha256

ROW_GROUP_ROWS = 1 << 20
"""Rows per Parquet row group (the last group of a file may be smaller)."""

FILE_ROWS = 1 << 24
"""A writer starts a new file after this many rows."""

COMPRESSION = "snappy"
"""Parquet codec (docs/warehouse.md has the measurements: snappy vs zstd vs none)."""

WRITER_THREADS = 2
QUEUE_CHUNKS = 2
_STOP = object()


@dataclass(frozen=True)
class WrittenFile:
    """One finished Parquet file: its path (in the writer's file system), rows, size in bytes and footer
    digest (``integrity``)."""

    path: Path | PurePosixPath
    rows: int
    size_bytes: int
    footer_sha256: str | None = None
    content_sha256: str | None = None


def is_string(t: pa.DataType) -> bool:
    """A string column, plain or dictionary-encoded."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def fsync_path(path: Path) -> None:
    """Flush a file or a directory's entries to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _FileWriter:
    """One thread's rolling sequence of Parquet files in ``out_dir`` (of ``filesystem``; None: local)."""

    def __init__(self, out_dir: Path | str, tag: int, schema: pa.Schema, *, compression: str, row_group_rows: int,
                 file_rows: int, filesystem=None):
        self.out_dir, self.tag, self.schema, self.fs = out_dir, tag, schema, filesystem
        self.compression, self.row_group_rows, self.file_rows = compression, row_group_rows, file_rows
        self.dictionary_columns = [f.name for f in schema if is_string(f.type)]
        self.files: list[WrittenFile] = []
        self._writer: pq.ParquetWriter | None = None
        self._path: Path | PurePosixPath | None = None
        self._file_rows = 0
        self._buffer: list[pa.RecordBatch] = []
        self._buffered = 0

    def add(self, batch: pa.RecordBatch) -> None:
        if not batch.schema.equals(self.schema):
            batch = batch.cast(self.schema)
        self._buffer.append(batch)
        self._buffered += batch.num_rows
        if self._buffered >= self.row_group_rows:
            self._flush()

    def _flush(self) -> None:
        if not self._buffered:
            return
        if self._writer is None:
            name = f"part-{self.tag}-{len(self.files):04d}.parquet"
            self._path = Path(self.out_dir) / name if self.fs is None else PurePosixPath(self.out_dir, name)
            self._writer = pq.ParquetWriter(str(self._path), self.schema, compression=self.compression,
                                            use_dictionary=self.dictionary_columns, filesystem=self.fs)
        table = pa.Table.from_batches(self._buffer, self.schema)
        self._writer.write_table(table, row_group_size=min(self._buffered, 1 << 26))
        self._file_rows += self._buffered
        self._buffer, self._buffered = [], 0
        if self._file_rows >= self.file_rows:
            self._close_file()

    def _close_file(self) -> None:
        if self._writer is None:
            return
        self._writer.close()                   # an object store's upload completes here
        if self.fs is None:
            fsync_path(self._path)
            size = self._path.stat().st_size
        else:
            size = self.fs.get_file_info(str(self._path)).size
        self.files.append(WrittenFile(self._path, self._file_rows, size, footer_sha256(self._path, self.fs),
                                      content_sha256(self._path, self.fs)))
        self._writer, self._path, self._file_rows = None, None, 0

    def finish(self) -> None:
        self._flush()
        self._close_file()

    def abandon(self) -> None:
        """Close without flushing (the run is being thrown away)."""
        self._buffer, self._buffered = [], 0
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - the file is deleted with its staging folder anyway
                pass
            self._writer = None


def write_stream(batches: Iterable[pa.RecordBatch], out_dir: Path | str, *,
                 on_rows: Callable[[int], None] | None = None, threads: int | None = None,
                 queue_chunks: int | None = None, row_group_rows: int | None = None,
                 file_rows: int | None = None, compression: str | None = None,
                 filesystem=None) -> list[WrittenFile]:
    """Write a stream of record batches (one table) into Parquet files under ``out_dir``.

    Args:
      batches: record batches sharing one set of columns (a batch whose types differ is cast to the first's).
      out_dir: folder for the files (created); with ``filesystem``, its path there.
      on_rows: called with n after each batch of n rows is handed to a writer (serialised by a lock).
      threads: writer threads, each writing its own files.  queue_chunks: batches waiting at most.
      row_group_rows: rows per row group.  file_rows: rows per file before rolling over.
      compression: Parquet codec (``snappy``, ``zstd``, ``none``, ...).
      filesystem: a ``pyarrow.fs.FileSystem`` (an object store, ``sweepkit.store.objstore``); None: local
        files, each fsynced.
      Options left None take the module's constants (WRITER_THREADS, QUEUE_CHUNKS, ROW_GROUP_ROWS,
      FILE_ROWS, COMPRESSION) at call time.

    Returns:
      The files written (none for an empty stream), each fsynced.

    Raises:
      Whatever the producer or a writer raised (KeyboardInterrupt included); the writers are stopped first
      and the partial files are left for the caller to delete.
    """
    threads = WRITER_THREADS if threads is None else threads
    queue_chunks = QUEUE_CHUNKS if queue_chunks is None else queue_chunks
    row_group_rows = ROW_GROUP_ROWS if row_group_rows is None else row_group_rows
    file_rows = FILE_ROWS if file_rows is None else file_rows
    compression = COMPRESSION if compression is None else compression
    if filesystem is None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    work: queue.Queue = queue.Queue(maxsize=max(1, queue_chunks))
    abort = threading.Event()
    errors: list[BaseException] = []
    lock = threading.Lock()
    writers: list[_FileWriter] = []
    schema: list[pa.Schema] = []

    def run(tag: int) -> None:
        writer: _FileWriter | None = None
        try:
            while True:
                item = work.get()
                if item is _STOP or abort.is_set():
                    break
                if writer is None:
                    writer = _FileWriter(out_dir, tag, schema[0], compression=compression, filesystem=filesystem,
                                         row_group_rows=row_group_rows, file_rows=file_rows)
                    with lock:
                        writers.append(writer)
                writer.add(item)
                if on_rows is not None:
                    with lock:
                        on_rows(item.num_rows)
            if writer is not None:
                if abort.is_set():
                    writer.abandon()
                else:
                    writer.finish()
        except BaseException as exc:  # noqa: BLE001 - handed to the producer thread
            errors.append(exc)
            abort.set()
            if writer is not None:
                writer.abandon()

    def put(item: object) -> None:
        while True:
            if abort.is_set() and errors:
                raise errors[0]
            try:
                work.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    pool = [threading.Thread(target=run, args=(k,), name=f"sweepkit-parquet-{k}", daemon=True)
            for k in range(max(1, threads))]
    for t in pool:
        t.start()
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if not schema:
                schema.append(batch.schema)
            put(batch)
        for _ in pool:
            put(_STOP)
        for t in pool:
            t.join()
    except BaseException:
        abort.set()
        _drain(work)
        for _ in pool:
            try:
                work.put_nowait(_STOP)
            except queue.Full:
                _drain(work)
        for t in pool:
            t.join(timeout=30)
        raise
    if errors:
        raise errors[0]
    if filesystem is None:
        fsync_path(Path(out_dir))
    return sorted((f for w in writers for f in w.files), key=lambda f: f.path.name)


def _drain(work: queue.Queue) -> None:
    while True:
        try:
            work.get_nowait()
        except queue.Empty:
            return
