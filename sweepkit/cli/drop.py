"""``sweepkit drop RUN_ID...``: remove committed runs from the warehouse (asks first unless --yes)."""

from __future__ import annotations

import sys

import click

from sweepkit.cli.common import note, open_warehouse, warehouse_option


@click.command(context_settings={"max_content_width": 100})
@click.argument("run_ids", nargs=-1, required=True, metavar="RUN_ID...")
@click.option("--yes", is_flag=True, help="Drop without asking (needed when stdin is not a terminal).")
@warehouse_option
def drop(run_ids: tuple[str, ...], yes: bool, warehouse: str | None) -> None:
    """Drop committed runs: their rows leave every view in one transaction, then their Parquet files go.

    RUN_ID as `sweepkit runs` lists it. Without --yes it asks first, and refuses when it cannot ask.

    \b
    Example: sweepkit drop RUN_ID --yes --warehouse /tmp/wh
    """
    from sweepkit.errors import InputError
    from sweepkit.store.drop import drop_runs

    wh = open_warehouse(warehouse, reading=True)
    if not yes:
        if not sys.stdin.isatty():
            raise InputError(f"drop: --yes not given and stdin is not a terminal; expected --yes to drop "
                             f"{', '.join(run_ids)}")
        click.confirm(f"Drop {len(run_ids)} run{'s' if len(run_ids) != 1 else ''} ({', '.join(run_ids)})?",
                      abort=True, err=True)
    for run_id, n_files in drop_runs(wh, run_ids).items():
        note(f"dropped run {run_id} ({n_files} Parquet file{'s' if n_files != 1 else ''})")
