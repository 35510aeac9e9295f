"""``sweepkit runs``: the committed runs in the warehouse, newest first."""

from __future__ import annotations

import click

from sweepkit.cli.common import emit, format_option, note, open_warehouse, warehouse_option


@click.command(context_settings={"max_content_width": 100})
@warehouse_option
@format_option
def runs(warehouse: str | None, fmt: str) -> None:
    """List committed runs: id, kind, grid, rows, wall time, sweepkit version (`sweepkit drop` removes runs).

    \b
    Example: sweepkit runs --warehouse /tmp/wh --format json
    """
    wh = open_warehouse(warehouse, reading=True)
    for run_id, problem in wh.damaged().items():
        note(f"run {run_id} is damaged ({problem}); `sweepkit drop {run_id}` removes it")
    emit(wh.query(
        "select run_id, kind, grid_name, row_count, round(wall_s, 2) as wall_s, ended_at, sweepkit_version, "
        "left(grid_sha256, 12) as grid_sha256 from runs order by ended_at desc"), fmt, title="runs")
