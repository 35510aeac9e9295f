"""``sweepkit sql "SELECT ..."``: any SQL against the warehouse's views (read-only)."""

from __future__ import annotations

import click

from sweepkit.cli.common import BadInput, emit, format_option, one_line, open_warehouse, warehouse_option, with_hint


@click.command(context_settings={"max_content_width": 100})
@click.argument("statement")
@warehouse_option
@format_option
def sql(statement: str, warehouse: str | None, fmt: str) -> None:
    """Run one SQL STATEMENT on a read-only connection with the views decode, runs, run_files, ...

    \b
    Example: sweepkit sql "select device, max(speedup) as best from decode group by device" --format csv
    """
    import duckdb

    try:
        table = open_warehouse(warehouse, reading=True).query(statement)
    except duckdb.Error as exc:
        raise BadInput(with_hint(f"sql: {one_line(str(exc))}")) from None
    emit(table, fmt, title=None)
