"""``sweepkit verify``: every committed Parquet file's whole content against the SHA-256 recorded at its commit."""

from __future__ import annotations

import sys

import click
import pyarrow as pa

from sweepkit.cli.common import emit, format_option, note, open_warehouse, warehouse_option


@click.command(context_settings={"max_content_width": 100})
@warehouse_option
@format_option
def verify(warehouse: str | None, fmt: str) -> None:
    """Check every committed file byte for byte: one row per file (run, table, path, status); exit 1 if damaged.

    Reads every file once (the reads of `sweepkit query` and `sql` hash only the first 16 MiB of files).
    A damaged run is named with `sweepkit drop RUN_ID`, the way out; a file committed before checksums were
    recorded says "no checksum recorded" (its size and footer are still checked).

    \b
    Example: sweepkit verify --warehouse /tmp/wh
    """
    from sweepkit.store.integrity import NO_CHECKSUM

    wh = open_warehouse(warehouse, reading=True)
    rows = wh.verify()
    names = ("run_id", "table_name", "path", "status")
    emit(pa.table([pa.array([r[i] for r in rows], pa.string()) for i in range(len(names))], names=names),
         fmt, title="verify")
    damaged: dict[str, str] = {}
    for run_id, _table, _path, status in rows:
        if status.startswith("damaged: "):
            damaged.setdefault(run_id, status.removeprefix("damaged: "))
    for run_id, problem in damaged.items():
        note(f"run {run_id} is damaged ({problem}); `sweepkit drop {run_id}` removes it")
    bad = sum(1 for r in rows if r[3].startswith("damaged: "))
    unrecorded = sum(1 for r in rows if r[3].endswith(f"({NO_CHECKSUM})"))
    note(f"verify: {len(rows) - bad} of {len(rows)} files as committed"
         + (f", {unrecorded} of them with {NO_CHECKSUM} (size and footer checked)" if unrecorded else "")
         + (f"; {len(damaged)} damaged run{'s' if len(damaged) != 1 else ''}" if damaged else ""))
    if damaged:
        sys.exit(1)
