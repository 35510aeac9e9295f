"""``sweepkit export VIEW``: one stable feed view (v_decode, v_serving, v_capacity, v_matrix) to a file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sweepkit.cli.common import emit, note, open_warehouse, warehouse_option
from sweepkit.errors import bad_value

EXPORT_FORMATS = ("parquet", "csv", "json")


@click.command(context_settings={"max_content_width": 100})
@click.argument("view")
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default="parquet", show_default=True,
              help="File format; json is one array of row objects.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="Output file; csv/json default to stdout, parquet to ./VIEW.parquet.")
@warehouse_option
def export(view: str, fmt: str, out_path: str | None, warehouse: str | None) -> None:
    """Export a feed VIEW, whose columns are a promise (docs/dashboards.md), as Parquet, CSV or JSON.

    \b
    Example: sweepkit export v_decode --format csv --warehouse /tmp/wh --out /tmp/v_decode.csv
    """
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from sweepkit.report.feed import FEED

    if view not in FEED:
        raise bad_value("VIEW", view, list(FEED))
    table = open_warehouse(warehouse).query(f"select * from {view}")
    if fmt == "parquet" and out_path is None:
        out_path = f"{view}.parquet"
    if out_path is None:
        if fmt == "csv":
            pacsv.write_csv(table, sys.stdout.buffer)
        else:
            emit(table, "json")
        return
    path = Path(out_path)
    if not path.parent.is_dir():
        raise bad_value("--out", out_path, "a file in an existing folder")
    if fmt == "parquet":
        pq.write_table(table, path)
    elif fmt == "csv":
        pacsv.write_csv(table, path)
    else:
        with path.open("w", encoding="utf-8") as fh:
            old, sys.stdout = sys.stdout, fh
            try:
                emit(table, "json")
            finally:
                sys.stdout = old
    note(f"{view}: {table.num_rows} rows -> {path}")
