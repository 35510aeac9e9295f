"""``sweepkit export VIEW``: one stable feed view (v_decode, v_serving, v_capacity, v_matrix) to a file."""

from __future__ import annotations

import io
import os
import stat
import sys
import tempfile
from pathlib import Path

import click

from sweepkit.cli.common import emit, note, open_warehouse, warehouse_option
from sweepkit.errors import bad_value

EXPORT_FORMATS = ("parquet", "csv", "json")


@click.command(context_settings={"max_content_width": 100})
@click.argument("view")
@click.option("--as", "fmt", type=click.Choice(EXPORT_FORMATS), default="parquet", show_default=True,
              help="File type written; json is one array of row objects.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="Output file; csv/json default to stdout, parquet to ./VIEW.parquet. A file is replaced "
                   "whole (a new file gets the umask's permissions, a link to a file writes its target); "
                   "a FIFO or character device (/dev/stdout) is written in place; anything else is refused.")
@warehouse_option
def export(view: str, fmt: str, out_path: str | None, warehouse: str | None) -> None:
    """Export a feed VIEW, whose columns are a promise (docs/dashboards.md), as Parquet, CSV or JSON.

    \b
    Example: sweepkit export v_decode --as csv --warehouse /tmp/wh --out /tmp/v_decode.csv
    """
    import pyarrow.csv as pacsv

    from sweepkit.store.feed import FEED

    if view not in FEED:
        raise bad_value("VIEW", view, list(FEED))
    wh = open_warehouse(warehouse, reading=True)
    if fmt == "parquet" and out_path is None:
        out_path = f"{view}.parquet"
    path = None if out_path is None else Path(out_path)
    in_place = False
    if path is not None:
        path, in_place = _target(path, out_path)
        if _inside(path, wh.root):
            raise bad_value("--out", out_path, f"a file outside the warehouse folder {wh.root}")
    table = wh.query(f"select * from {view}")
    if path is None:
        if fmt == "csv":
            pacsv.write_csv(table, sys.stdout.buffer)
        else:
            emit(table, "json")
        return
    if in_place:
        try:
            with open(path, "wb") as fh:
                _write(table, fmt, fh)
        except OSError as exc:                         # /dev/full: no space left; a FIFO whose reader left
            raise OSError(exc.errno, exc.strerror, str(path)) from None
    else:
        _write_atomically(table, fmt, path)
    note(f"{view}: {table.num_rows} rows -> {path}")


def _target(path: Path, given: str) -> tuple[Path, bool]:
    """Where ``--out`` writes and whether in place: a new path or a regular file is replaced atomically (a
    link to a regular file: its target, the link stays); a FIFO or character device (``/dev/stdout``, a
    named pipe) is written in place; anything else is refused.

    Raises:
      InputError: a dangling link, a folder, a block device, a socket, or a path whose folder does not exist.
    """
    try:
        st = os.stat(path)                                           # links followed
    except FileNotFoundError:
        if path.is_symlink():
            raise bad_value("--out", given, "a regular file or a new path (it is a link to nothing)") from None
        if not path.parent.is_dir():
            raise bad_value("--out", given, "a file in an existing folder") from None
        return path, False
    if stat.S_ISREG(st.st_mode):
        return (path.resolve() if path.is_symlink() else path), False
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
        return path, True
    kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a block device" if stat.S_ISBLK(st.st_mode) \
        else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file"
    raise bad_value("--out", given, f"a regular file, a new path, a FIFO or a character device (it is {kind})")


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path`` (links followed) is ``root`` or lies under it."""
    target, base = path.resolve(), root.resolve()
    return target == base or base in target.parents


def _write(table, fmt: str, fh) -> None:
    """Write ``table`` as ``fmt`` to the binary file ``fh``."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if fmt == "parquet":
        pq.write_table(table, fh)
    elif fmt == "csv":
        pacsv.write_csv(table, fh)
    else:
        text = io.TextIOWrapper(fh, encoding="utf-8")
        old, sys.stdout = sys.stdout, text
        try:
            emit(table, "json")
        finally:
            sys.stdout = old
        text.flush()
        text.detach()
    fh.flush()


def _file_mode(path: Path) -> int:
    """Permission bits for the written file: the replaced file's, else 0o666 less the umask (as ``open``)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask


def _write_atomically(table, fmt: str, path: Path) -> None:
    """Write ``table`` to a temporary file beside ``path``, then rename it over ``path`` (never half a file)."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, _file_mode(path))
        with os.fdopen(fd, "wb") as fh:
            _write(table, fmt, fh)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
