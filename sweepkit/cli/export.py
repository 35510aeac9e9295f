"""``sweepkit export VIEW``: one stable feed view (v_decode, v_serving, v_capacity, v_matrix) to a file."""

from __future__ import annotations

import io
import os
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
              help="Output file; csv/json default to stdout, parquet to ./VIEW.parquet.")
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
    if path is not None and not path.parent.is_dir():
        raise bad_value("--out", out_path, "a file in an existing folder")
    if path is not None and _inside(path, wh.root):
        raise bad_value("--out", out_path, f"a file outside the warehouse folder {wh.root}")
    table = wh.query(f"select * from {view}")
    if path is None:
        if fmt == "csv":
            pacsv.write_csv(table, sys.stdout.buffer)
        else:
            emit(table, "json")
        return
    _write_atomically(table, fmt, path)
    note(f"{view}: {table.num_rows} rows -> {path}")


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path`` (links followed) is ``root`` or lies under it."""
    target, base = path.resolve(), root.resolve()
    return target == base or base in target.parents


def _write_atomically(table, fmt: str, path: Path) -> None:
    """Write ``table`` to a temporary file beside ``path``, then rename it over ``path`` (never half a file)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
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
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
