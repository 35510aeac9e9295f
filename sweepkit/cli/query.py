"""``sweepkit query NAME``: run a report from queries/ (no NAME: list them)."""

from __future__ import annotations

import click

from sweepkit.cli.common import emit, format_option, open_warehouse, parse_params, warehouse_option


@click.command(context_settings={"max_content_width": 100})
@click.argument("name", required=False)
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="Set a query parameter (repeatable); see the query's header for its parameters.")
@warehouse_option
@format_option
def query(name: str | None, params: tuple[str, ...], warehouse: str | None, fmt: str) -> None:
    """Run the report NAME (one of queries/, or a path to a .sql file); without NAME, list the reports.

    Values: numbers, true/false, null, or text (run ids, device names). 'latest' for run_id means the newest
    committed decode run.

    \b
    Example: sweepkit query speedup_table --param device=H100 --param context=512 --format markdown
    """
    import pyarrow as pa

    from sweepkit.store import list_queries, run_query

    if name is None:
        qs = list_queries()
        emit(pa.table({
            "query": [q.name for q in qs],
            "purpose": [q.purpose for q in qs],
            "parameters": [", ".join(f"{p.name}={_show(p.default)}" for p in q.params) for q in qs],
        }), fmt, title="queries")
        return
    emit(run_query(open_warehouse(warehouse, reading=True), name, parse_params(params)), fmt, title=name)


def _show(value) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
