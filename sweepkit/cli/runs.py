"""``sweepkit runs``: the committed runs in the warehouse, newest first."""

from __future__ import annotations

import click

from sweepkit.cli.common import emit, format_option, note, open_warehouse, warehouse_option


@click.command(context_settings={"max_content_width": 100})
@warehouse_option
@click.option("--drop", "drop", multiple=True, metavar="RUN_ID",
              help="Drop this committed run first (repeatable): its rows leave every view in one transaction, "
                   "then its Parquet files are deleted.")
@format_option
def runs(warehouse: str | None, drop: tuple[str, ...], fmt: str) -> None:
    """List committed runs: id, kind, grid, rows, wall time, sweepkit version; --drop removes runs.

    \b
    To drop a run, give one of the listed ids: sweepkit runs --drop RUN_ID.

    \b
    Example: sweepkit runs --warehouse /tmp/wh --format json
    """
    wh = open_warehouse(warehouse, reading=True)
    if drop:
        from sweepkit.store.drop import drop_runs

        for run_id, n_files in drop_runs(wh, drop).items():
            note(f"dropped run {run_id} ({n_files} Parquet file{'s' if n_files != 1 else ''})")
    for run_id, problem in wh.damaged().items():
        note(f"run {run_id} is damaged ({problem}); `sweepkit runs --drop {run_id}` removes it")
    emit(wh.query(
        "select run_id, kind, grid_name, row_count, round(wall_s, 2) as wall_s, ended_at, sweepkit_version, "
        "left(grid_sha256, 12) as grid_sha256 from runs order by ended_at desc"), fmt, title="runs")
