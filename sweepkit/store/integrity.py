"""Committed files as they were committed: size, a digest of the Parquet footer and one of the whole content.

A commit records, per Parquet file, its size in bytes, the SHA-256 of its footer (the file's last
``8 + footer length`` bytes: the schema, every row group's offsets, row counts and statistics) and the
SHA-256 of the whole file. A reader compares size and footer with the file on disk (one ``stat`` and one
small read per file) and the whole content of the first :data:`READ_CHECK_BYTES` of committed files;
``sweepkit verify`` compares every file's content. A file that is missing, truncated, replaced, rewritten
with another schema or with a flipped byte in its data pages fails the check, and every view over its table
then fails with one line naming the run and ``sweepkit drop RUN_ID``, the way out.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable

import pyarrow.fs as pafs

from sweepkit.store import objstore

MAGIC = b"PAR1"
MAX_FOOTER_BYTES = 64 << 20
"""A footer longer than this is not a footer sweepkit wrote (the file is damaged)."""
READ_CHECK_BYTES = 16 << 20
"""bytes: a reader hashes the content of committed files (in commit order) up to this total, and checks
only size and footer of the rest (``sweepkit verify`` hashes them all)."""
_CHUNK_BYTES = 1 << 20
NO_CHECKSUM = "no checksum recorded"
"""What :func:`verify_files` says of a file committed before content digests were recorded."""


def footer_sha256(path: Path | str, filesystem=None) -> str | None:
    """Hex SHA-256 of a Parquet file's footer (length word and magic included); None if it has none.

    Args:
      path: the file; with ``filesystem`` (a ``pyarrow.fs.FileSystem``), its path in that file system.

    Raises:
      OSError: the file cannot be opened or read.
    """
    with (open(path, "rb") if filesystem is None else filesystem.open_input_file(str(path))) as fh:
        size = os.fstat(fh.fileno()).st_size if filesystem is None else fh.size()
        if size < 12:
            return None
        fh.seek(size - 8)
        tail = fh.read(8)
        footer_bytes = int.from_bytes(tail[:4], "little")
        if tail[4:] != MAGIC or footer_bytes + 12 > size or footer_bytes > MAX_FOOTER_BYTES:
            return None
        fh.seek(size - 8 - footer_bytes)
        return hashlib.sha256(fh.read(footer_bytes + 8)).hexdigest()


def content_sha256(path: Path | str, filesystem=None) -> str:
    """Hex SHA-256 of a whole file, read in 1 MiB chunks.

    Args:
      path: the file; with ``filesystem`` (a ``pyarrow.fs.FileSystem``), its path in that file system.

    Raises:
      OSError: the file cannot be opened or read.
    """
    digest = hashlib.sha256()
    with (open(path, "rb") if filesystem is None else filesystem.open_input_stream(str(path))) as fh:
        while chunk := fh.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def file_problem(root: Path, path: str, size_bytes: int, footer: str | None,
                 content: str | None = None) -> str | None:
    """What is wrong with one committed file, or None when it is as committed.

    Args:
      root: the warehouse root.  path: the file, relative to root, or an object's URI (``s3://...``).  size_bytes: its committed size.
      footer: its committed footer digest (None for files committed before digests were recorded).
      content: its committed content digest, compared when given (None: the content is not hashed).

    Returns:
      A short description (``missing``, ``N bytes, committed M``, ...) or None.
    """
    full, fs = root / path, None
    try:
        if objstore.is_uri(path):
            fs, full = objstore.split(path)
            info = fs.get_file_info(full)
            if info.type == pafs.FileType.NotFound:
                raise FileNotFoundError(path)
            actual = info.size
        else:
            actual = full.stat().st_size
    except FileNotFoundError:
        return f"{path} is missing"
    except OSError as exc:
        return f"{path} cannot be read ({getattr(exc, 'strerror', None) or exc})"
    if actual != size_bytes:
        return f"{path} has {actual:,} bytes, committed {size_bytes:,}"
    checks = ((footer, footer_sha256, "its Parquet footer: schema, row groups"),
              (content, content_sha256, "its content SHA-256: a changed byte in its data"))
    for committed, digest, what in checks:      # the footer first (cheap), then the whole content
        if committed is None:
            return None
        try:
            now = digest(full, fs)
        except OSError as exc:
            return f"{path} cannot be read ({exc.strerror or exc})"
        if now != committed:
            return f"{path} differs from the committed file ({what})"
    return None


def damaged_runs(root: Path, files: Iterable[tuple], *, hash_bytes: int = READ_CHECK_BYTES) -> dict[str, str]:
    """Committed runs with a damaged file: run id -> the first problem found.

    Args:
      root: the warehouse root.
      files: ``(run_id, table, path, size_bytes, footer_sha256[, content_sha256])`` per committed file.
      hash_bytes: bytes: the content of local files is hashed, in the given order, while their sizes add up
        to at most this; the others, and objects in an object store (a download each), get the size and
        footer check only (``sweepkit verify`` hashes them all).
    """
    out: dict[str, str] = {}
    for run_id, _table, path, size_bytes, footer, *rest in files:
        if run_id in out:
            continue
        content = rest[0] if rest else None
        if content is not None and size_bytes <= hash_bytes and not objstore.is_uri(path):   # objects: verify
            hash_bytes -= size_bytes
        else:
            content = None
        problem = file_problem(root, path, size_bytes, footer, content)
        if problem is not None:
            out[run_id] = problem
    return out


def verify_files(root: Path, files: Iterable[tuple]) -> list[tuple[str, str, str, str]]:
    """Every committed file's whole content against its commit: ``(run_id, table, path, status)`` each.

    Args:
      root: the warehouse root.
      files: ``(run_id, table, path, size_bytes, footer_sha256, content_sha256)`` per committed file.

    Returns:
      One row per file; status ``ok``, :data:`NO_CHECKSUM` (committed before content digests were recorded:
      size and footer checked) or what is wrong (``damaged: ...``).
    """
    out = []
    for run_id, table, path, size_bytes, footer, content in files:
        problem = file_problem(root, path, size_bytes, footer, content)
        status = f"damaged: {problem}" if problem else ("ok" if content else f"ok ({NO_CHECKSUM})")
        out.append((run_id, table, path, status))
    return out


def damage_message(table: str, run_id: str, problem: str) -> str:
    """The one line a query of a damaged table fails with."""
    return (f"warehouse: table {table}: a file of committed run {run_id} is damaged ({problem}); "
            f"`sweepkit drop {run_id}` removes that run")
