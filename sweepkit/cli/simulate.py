"""``sweepkit simulate GRID.toml`` (serving grid -> warehouse -> matrix) and ``sweepkit matrix``."""

from __future__ import annotations

import os
import signal
import sys
import time

import click

from sweepkit.cli.common import (Interrupts, emit, format_option, note, open_warehouse, parquet_uri_option,
                                 warehouse_option)
from sweepkit.cli.scale import run_in_parts, scale_options, wants_parts


def _progress(total: int):
    """A rich progress bar on stderr (simulations); None when stderr is not a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        return None
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed} sims"),
                    TimeElapsedColumn(), console=console)


class _Ticker:
    """Progress without a terminal (a log, CI): one stderr line when the first simulations are done (so a
    log shows the run has started), then at most one every ``every_s`` seconds."""

    def __init__(self, name: str, every_s: float = 10.0):
        self.name, self.every_s, self.done = name, every_s, 0
        self.t0 = self.last = time.perf_counter()

    def __call__(self, n: int) -> None:
        first = self.done == 0
        self.done += n
        now = time.perf_counter()
        if first or now - self.last >= self.every_s:
            self.last = now
            note(f"simulating {self.name}: {self.done} sims, {now - self.t0:.0f} s")


def _batches(table):
    return iter(table.to_batches())


def _print_matrix(wh, run_id: str, fmt: str, device: str | None) -> None:
    from sweepkit.store import run_query

    devices = _check_matrix_args(wh, run_id, device)
    import pyarrow.compute as pc

    table = run_query(wh, "matrix", {"run_id": run_id, "device": device}, parse_text=False)
    table = _with_bands(table, fmt)
    if device:
        if device not in devices:
            note(f"device {device} is not in this serving run (its devices: {', '.join(devices) or 'none'})")
    emit(table, fmt, title="Lever matrix: change from the baseline (capacity metrics at capacity, "
                           "latencies at the reference load)")
    if fmt in ("table", "markdown"):   # json and csv print the matrix alone
        best = run_query(wh, "best_lever", {"run_id": run_id})
        if device:
            best = best.filter(pc.equal(best["device"], device))
        emit(best, fmt, title="Best lever per workload and device (goodput per GPU at capacity; queries/best_lever.sql)")


BAND_COLUMNS = ("draws", "share_better", "share_worse", "share_same", "change_p10", "change_p50", "change_p90",
                "verdict_text")
"""The matrix's columns from a run's [serving.bands] (null without bands)."""


def _with_bands(table, fmt: str):
    """The matrix as printed: without bands the band columns are left out (the matrix as before bands
    existed); with bands a table or Markdown shows the verdict with its share of draws, e.g. better (94%)."""
    if table.num_rows == 0 or table["draws"].null_count == table.num_rows:
        return table.drop_columns(list(BAND_COLUMNS))
    if fmt in ("table", "markdown"):
        i = table.schema.get_field_index("verdict")
        table = table.set_column(i, "verdict", table["verdict_text"]).drop_columns(["verdict_text"])
    return table


def _check_matrix_args(wh, run_id: str, device: str | None) -> list[str]:
    """A named run must be a committed serving run and a device a catalogue device; returns the run's devices.

    Raises:
      InputError: an unknown run id, a run of another kind, or an unknown device.
    """
    from sweepkit.catalogue import get_device
    from sweepkit.errors import bad_value

    if device is not None:
        get_device(device, "--device")
    runs = wh.query("select run_id, kind from runs where $r = 'latest' or run_id = $r order by ended_at desc",
                    {"r": run_id}).to_pylist()
    serving = [r["run_id"] for r in runs if r["kind"] == "serving"]
    if run_id != "latest" and not runs:
        raise bad_value("--run-id", run_id, "a committed serving run (sweepkit runs lists them) or latest")
    if run_id != "latest" and not serving:
        raise bad_value("--run-id", run_id, f"a serving run (this one is a {runs[0]['kind']} run)")
    if not serving:
        note("no serving run in this warehouse yet: sweepkit simulate GRID makes one")
        return []
    return wh.query("select distinct device from serving where run_id = $r order by device",
                    {"r": serving[0]}).column(0).to_pylist()


@click.command(context_settings={"max_content_width": 100})
@click.argument("grid", type=click.Path(dir_okay=False))
@warehouse_option
@parquet_uri_option
@click.option("--force", is_flag=True, help="Run again even if this grid (same text, same sweepkit) is committed.")
@click.option("--device", default=None, help="Print only this device's rows of the matrix.")
@format_option
@scale_options
def simulate(grid: str, warehouse: str | None, parquet_uri: str | None, force: bool, device: str | None, fmt: str,
             executor: str | None, address: str | None, workers: int | None, resume: str | None,
             retries: int) -> None:
    """Simulate a serving GRID (TOML): capacity searches + reference loads, into the warehouse; print the matrix.

    A grid already committed with the same text and sweepkit version is reused unless --force.
    Progress goes to stderr; the matrix to stdout. --executor local|ray runs each (workload, device)
    capacity search as a resumable part (docs/scale-out.md). A grid with [serving.bands] also simulates its
    draws (table serving_draws) and prints each verdict with its share of draws, e.g. better (94%).

    \b
    Example: sweepkit simulate grids/serving-small.toml --warehouse /tmp/wh --device H100 --format markdown
    """
    from sweepkit.serving.run import load_serving_grid, run_grid

    spec = load_serving_grid(grid)
    wh = open_warehouse(warehouse, parquet_uri=parquet_uri)
    run_id = None if force or resume else wh.committed_run("serving", spec.sha256)
    if run_id is not None:
        note(f"reusing run {run_id} (grid {spec.name!r} already committed; --force to run it again)")
    elif wants_parts(executor, resume, address):
        run_id = run_in_parts("serving", spec, wh, executor=executor, address=address, workers=workers,
                              resume=resume, retries=retries)
    else:                                   # float64 is scoped by the serving entry points (run_configs)
        t0 = time.perf_counter()
        bar = _progress(spec.n_points)
        def stop_now(signum, frame):   # nothing is written before run_grid returns: leave at once
            note("interrupted: nothing was committed")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)

        try:
            with Interrupts() as interrupts:
                signal.signal(signal.SIGINT, stop_now)
                if bar is not None:
                    with bar:
                        task = bar.add_task(f"simulating {spec.name}", total=None)
                        tables = run_grid(spec, progress=lambda n: (interrupts.check(), bar.advance(task, n)))
                else:
                    ticker = _Ticker(spec.name)
                    tables = run_grid(spec, progress=lambda n: (interrupts.check(), ticker(n)))
                interrupts.check()
        except KeyboardInterrupt:
            note("interrupted: nothing was committed")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)     # as `sweepkit run`: skip interpreter teardown with XLA work possibly in flight
        run_id = wh.write_run(kind="serving", grid_name=spec.name, grid_toml=spec.text, grid_sha256=spec.sha256,
                              tables={k: _batches(v) for k, v in tables.items()}, on_wait=note, since_s=t0)
        note(f"run {run_id}: {tables['serving'].num_rows} simulated loads, {tables['capacity'].num_rows} points "
             f"in {time.perf_counter() - t0:.1f} s")
    _print_matrix(wh, run_id, fmt, device)


@click.command(context_settings={"max_content_width": 100})
@warehouse_option
@click.option("--run-id", default="latest", show_default=True, help="Serving run to read.")
@click.option("--device", default=None, help="Only this device's rows.")
@format_option
def matrix(warehouse: str | None, run_id: str, device: str | None, fmt: str) -> None:
    """Print the lever matrix of a serving run from the warehouse (sweepkit/queries/matrix.sql).

    \b
    Example: sweepkit matrix --device H100 --format markdown
    """
    _print_matrix(open_warehouse(warehouse, reading=True), run_id, fmt, device)
