"""``sweepkit run GRID.toml``: evaluate a decode grid into the warehouse, then print its headline table."""

from __future__ import annotations

import os
import sys
import time

import click

from sweepkit.cli.common import (Interrupts, emit, format_option, note, open_warehouse, parquet_uri_option,
                                 warehouse_option)
from sweepkit.cli.progress import Progress
from sweepkit.cli.scale import run_in_parts, scale_options, wants_parts
from sweepkit.errors import InputError, bad_value

HEADLINE = "speedup_table"


def headline_filters(axes, rows: int) -> dict[str, object]:
    """Parameters of the headline query that leave its first ``rows`` rows unchanged, so that DuckDB can skip
    the row groups of every other model, draft, device, TP degree and format combination (their min/max
    statistics tell) and read only the first rows' row groups.

    speedup_table sorts by model, draft, device, tp, formats ('weight/kv/compute' text), then context,
    batch, gamma and alpha. All rows that share the smallest values of the first j keys come first, so
    fixing those j keys keeps the first ``rows`` rows exactly when that many rows share them: j is the
    largest for which the grid's other axes give at least ``rows`` points. ``rows`` <= 0: no filter.
    """
    if rows <= 0:
        return {}
    formats = [(f"{w}/{k}/{c}", (w, k, c)) for w in axes["weight_format"] for k in axes["kv_format"]
               for c in axes["compute_format"]]
    first_formats = min(formats)[1]
    keys = [({"model": min(str(v) for v in axes["model"])}, len(axes["model"])),
            ({"draft": min(str(v) for v in axes["draft"])}, len(axes["draft"])),
            ({"device": min(str(v) for v in axes["device"])}, len(axes["device"])),
            ({"tp": min(int(v) for v in axes["tp"])}, len(axes["tp"])),
            (dict(zip(("weight_format", "kv_format", "compute_format"), map(str, first_formats))), len(formats))]
    from sweepkit.sweep.grid import n_acceptance_models

    shared = len(axes["context"]) * len(axes["batch"]) * len(axes["gamma"]) * n_acceptance_models(axes)
    for _, count in keys:
        shared *= count                             # every row of the run (a full Cartesian product)
    filters: dict[str, object] = {}
    for values, count in keys:
        if shared // count < rows:                  # rows sharing one more key's smallest value
            break
        shared //= count
        filters.update(values)
    return filters


@click.command(context_settings={"max_content_width": 100})
@click.argument("grid", type=click.Path(dir_okay=False))
@warehouse_option
@parquet_uri_option
@click.option("--force", is_flag=True, help="Run again even if this grid (same text, same sweepkit) is committed.")
@click.option("--chunk-points", type=int, default=None,
              help="At least this many grid points per compiled engine call, at most twice as many "
                   "(default: 1,048,576; each call's rows stay in memory until written).")
@click.option("--limit", type=int, default=100, show_default=True,
              help="Print at most this many rows of the table (0: all); `sweepkit query` shows the rest.")
@format_option
@scale_options
def run(grid: str, warehouse: str | None, parquet_uri: str | None, force: bool, chunk_points: int | None, limit: int, fmt: str,
        executor: str | None, address: str | None, workers: int | None, resume: str | None, retries: int) -> None:
    """Sweep a decode GRID (TOML) into the warehouse and print its speed-up table.

    A grid already committed with the same text and sweepkit version is reused (no recompute) unless
    --force. Progress goes to stderr; the table to stdout. --executor local|ray cuts the grid into
    resumable parts (docs/scale-out.md).

    \b
    Example: sweepkit run grids/seed.toml --warehouse /tmp/wh --format markdown
    Example: sweepkit run grids/seed.toml --executor local --warehouse /tmp/wh --force
    """
    from sweepkit.store import run_query
    from sweepkit.sweep.grid import load_grid

    t0 = time.perf_counter()                 # the run's figure counts from here: grid read -> run committed
    spec = load_grid(grid)
    if chunk_points is not None and chunk_points < 1:
        raise bad_value("--chunk-points", chunk_points, "an integer >= 1")
    if not 0 <= limit <= 2**62:
        raise bad_value("--limit", limit, "an integer in [0, 2^62] (0: all rows)")
    wh = open_warehouse(warehouse, parquet_uri=parquet_uri)
    run_id = None if force or resume or spec.devices_file else wh.committed_run("decode", spec.sha256)
    if run_id is not None:
        note(f"reusing run {run_id} (grid {spec.name!r} already committed; --force to run it again)")
    elif wants_parts(executor, resume, address):
        run_id = run_in_parts("decode", spec, wh, executor=executor, address=address, workers=workers,
                              resume=resume, retries=retries, chunk_points=chunk_points)
    else:
        run_id = _sweep(spec, wh, chunk_points, t0)
    params = {"run_id": run_id, **headline_filters(spec.axes, limit + 1 if limit else 0)}
    try:
        table = run_query(wh, HEADLINE, params, limit=limit + 1 if limit else None, parse_text=False)
    except InputError as exc:
        if "is damaged" not in str(exc):
            raise
        raise click.ClickException(f"run {run_id} is committed, but its table cannot be shown: "
                                   f"{str(exc).split('warehouse: ', 1)[-1]}") from None
    if limit and table.num_rows > limit:
        note(f"showing the first {limit} rows; all of them: sweepkit query {HEADLINE} --param run_id={run_id}")
        table = table.slice(0, limit)
    emit(table, fmt, title=f"{spec.name}: {spec.description}".rstrip(": "))


def _sweep(spec, wh, chunk_points: int | None, t0: float) -> str:
    from sweepkit.catalogue import devices_file
    from sweepkit.store import writer
    from sweepkit.sweep import engine

    chunk = chunk_points or engine.DEFAULT_CHUNK_POINTS
    progress = Progress(spec.name, spec.n_points, "points")
    interrupts = Interrupts()
    try:
        progress.__enter__()
        on_rows = progress.advance
        with interrupts, devices_file(spec.devices_file or None):
            batches = engine.started(engine.iter_decode_chunks(spec, chunk,
                                                               chunks_multiple_of=writer.WRITER_THREADS))
            try:
                run_id = wh.write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text,
                                      grid_sha256=spec.sha256, tables={"decode": interrupts.checked(batches)},
                                      on_rows=on_rows, on_wait=note)
            except Exception:
                batches.join()           # never exit while the first chunk is inside XLA (it aborts)
                raise
    except BaseException as exc:
        progress.close()
        if not isinstance(exc, KeyboardInterrupt):
            raise
        note("interrupted: nothing was committed")
        sys.stdout.flush()
        sys.stderr.flush()
        # write_run has already removed the run's files. Skip interpreter teardown: with an XLA computation
        # interrupted mid-flight it has been seen to crash (SIGSEGV) instead of exiting 130.
        os._exit(130)
    progress.close()
    wall = time.perf_counter() - t0
    note(f"run {run_id}: {spec.n_points:,} points in {wall:.2f} s ({spec.n_points / wall:,.0f} points/s) "
         f"-> {wh.root}")
    return run_id
