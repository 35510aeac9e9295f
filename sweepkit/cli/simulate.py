"""``sweepkit simulate GRID.toml`` (serving grid -> warehouse -> matrix) and ``sweepkit matrix``."""

from __future__ import annotations

import os
import signal
import sys
import time

import click

from sweepkit.cli.common import (Interrupts, emit, format_option, note, open_warehouse, parquet_uri_option,
                                 warehouse_option)
from sweepkit.cli.progress import Progress
from sweepkit.cli.scale import run_in_parts, scale_options, wants_parts


SIMS_PER_POINT = 7
"""Simulations per grid point the progress bar's estimate assumes (grids/tradeoffs.toml: 2,457 for 350 points);
the estimate rises as a run passes it."""


def _batches(table):
    return iter(table.to_batches())


def _print_matrix(wh, run_id: str, fmt: str, device: str | None, lever: str | None = None,
                  long: bool = False) -> None:
    """The matrix on stdout: per lever a workloads x metrics table for one device (``--format table``), or
    the long rows (``--long`` and every machine format)."""
    from sweepkit.store import run_query

    devices = _check_matrix_args(wh, run_id, device)
    import pyarrow.compute as pc

    if device:
        if device not in devices:
            note(f"device {device} is not in this serving run (its devices: {', '.join(devices) or 'none'})")
    people = fmt == "table" and not long
    if people and device is None:
        from sweepkit.cli.lever_tables import reference_device

        device = reference_device(_grid_toml(wh, run_id), devices)
    table = run_query(wh, "matrix", {"run_id": run_id, "device": device}, parse_text=False)
    if lever is not None:
        if devices:                 # (without a serving run the note above says so, and nothing prints)
            _check_lever(table, lever)
        table = table.filter(pc.equal(table["lever"], lever))
    if people and device is not None:
        from sweepkit.cli.lever_tables import render

        if len(devices) > 1:
            note(f"showing {device} (this run's devices: {', '.join(devices)}; --device picks one)")
        render(table, device, lever)
    else:
        emit(_with_bands(table, fmt), fmt, title="Lever matrix: change from the baseline (capacity metrics at "
                                                 "capacity, latencies at the reference load)")
    if fmt in ("table", "markdown") and lever is None:   # json and csv print the matrix alone
        best = run_query(wh, "best_lever", {"run_id": run_id})
        if device:
            best = best.filter(pc.equal(best["device"], device))
        if people and device is not None:
            from sweepkit.cli.lever_tables import render_best

            render_best(best, device)
            return
        emit(best, fmt, title="Best lever per workload and device (goodput per GPU at capacity; queries/best_lever.sql)")


def _grid_toml(wh, run_id: str) -> str | None:
    rows = wh.query("select grid_toml from runs where kind = 'serving' and ($r = 'latest' or run_id = $r) "
                    "order by ended_at desc limit 1", {"r": run_id}).column(0).to_pylist()
    return rows[0] if rows else None


def _check_lever(table, lever: str) -> None:
    """``--lever`` must name a lever of the run's matrix (the baseline has no row of its own).

    Raises:
      InputError: a lever not in the run.
    """
    from sweepkit.errors import bad_value

    levers = list(dict.fromkeys(table["lever"].to_pylist()))
    if lever not in levers:
        raise bad_value("--lever", lever, f"a lever of this run's matrix: {', '.join(levers) or 'none'}")


BAND_COLUMNS = ("draws", "share_better", "share_worse", "share_same", "change_p10", "change_p50", "change_p90",
                "verdict_text")
"""The matrix's columns from a run's [serving.bands] (null without bands)."""


def _with_bands(table, fmt: str):
    """The matrix as printed: without bands the band columns are left out (the matrix as before bands
    existed), and so is ``missing`` where every cell has its change; with bands a table or Markdown shows the
    verdict with its share of draws, e.g. better (94%)."""
    if "missing" in table.column_names and table["missing"].null_count == table.num_rows:
        table = table.drop_columns(["missing"])     # every cell has its change: the matrix as before
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
    return wh.query("select distinct device from capacity where run_id = $r order by device",
                    {"r": serving[0]}).column(0).to_pylist()


def matrix_options(f):
    """``--lever NAME`` and ``--long``, shared by ``simulate`` and ``matrix``."""
    f = click.option("--long", "long", is_flag=True,
                     help="Print the long rows (device x lever x workload x metric) instead of the lever tables.")(f)
    return click.option("--lever", default=None, metavar="NAME", help="Only this lever's table (or rows).")(f)


@click.command(context_settings={"max_content_width": 100})
@click.argument("grid", type=click.Path(dir_okay=False))
@warehouse_option
@parquet_uri_option
@click.option("--force", is_flag=True, help="Run again even if this grid (same text, same sweepkit) is committed.")
@click.option("--device", default=None,
              help="The device whose lever tables print (default: the grid's reference device, H100); with "
                   "--long or a machine format, only this device's rows (default: every device).")
@click.option("--profile", "profile", default=None, metavar="NAME|FILE",
              help="Efficiency profile pricing every target pass: reference (the reference constants), seed, "
                   "tensorrt-llm, tensorrt-llm-triton, tensorrt-llm-gptsession, vllm, sglang or a profile file "
                   "(default: the grid's [serving] profile, else reference).")
@matrix_options
@format_option
@scale_options
def simulate(grid: str, warehouse: str | None, parquet_uri: str | None, force: bool, device: str | None,
             profile: str | None, lever: str | None, long: bool, fmt: str, executor: str | None, address: str | None,
             workers: int | None, resume: str | None, retries: int) -> None:
    """Simulate a serving GRID (TOML): capacity searches + reference loads, into the warehouse; print the matrix.

    A grid already committed with the same text and sweepkit version is reused unless --force.
    Progress goes to stderr; the matrix to stdout: per lever a workloads x metrics table for one device
    (--device, --lever; --long or a machine format for the long rows). --executor local|ray runs each (workload, device)
    capacity search as a resumable part (docs/scale-out.md). A grid with [serving.bands] also simulates its
    draws (table serving_draws) and prints each verdict with its share of draws, e.g. better (94%).
    --profile prices target passes with a measured efficiency profile (docs/serving.md, "Efficiency profiles").

    \b
    Example: sweepkit simulate grids/serving-small.toml --warehouse /tmp/wh --device H100 --format markdown
    """
    from sweepkit.serving.grid import load_serving_grid
    from sweepkit.serving.run import run_grid

    spec = load_serving_grid(grid)
    if profile is not None:
        from sweepkit.serving.profile import with_profile

        spec = with_profile(spec, profile)
    if lever is not None and lever not in [lv.name for lv in spec.levers if lv.name != spec.baseline]:
        from sweepkit.errors import bad_value

        raise bad_value("--lever", lever, "a lever of the grid other than its baseline: " + ", ".join(
            lv.name for lv in spec.levers if lv.name != spec.baseline))
    if device is not None and device not in spec.devices:
        from sweepkit.errors import bad_value

        raise bad_value("--device", device, "a device of the grid: " + ", ".join(spec.devices))
    wh = open_warehouse(warehouse, parquet_uri=parquet_uri)
    run_id = None if force or resume else wh.committed_run("serving", spec.sha256)
    if run_id is not None:
        note(f"reusing run {run_id} (grid {spec.name!r} already committed; --force to run it again)")
    elif wants_parts(executor, resume, address):
        run_id = run_in_parts("serving", spec, wh, executor=executor, address=address, workers=workers,
                              resume=resume, retries=retries)
    else:                                   # float64 is scoped by the serving entry points (run_configs)
        t0 = time.perf_counter()
        bar = Progress(f"simulating {spec.name}", spec.n_points * SIMS_PER_POINT, "sims", estimate=True)
        def stop_now(signum, frame):   # nothing is written before run_grid returns: leave at once
            bar.close()
            note("interrupted: nothing was committed")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)

        try:
            with Interrupts() as interrupts:
                signal.signal(signal.SIGINT, stop_now)
                with bar:
                    tables = run_grid(spec, progress=lambda n: (interrupts.check(), bar.advance(n)))
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
    with wh.pinned():                   # the matrix's queries read one snapshot
        _print_matrix(wh, run_id, fmt, device, lever, long)


@click.command(context_settings={"max_content_width": 100})
@warehouse_option
@click.option("--run-id", default="latest", show_default=True, help="Serving run to read.")
@click.option("--device", default=None,
              help="The device whose lever tables print (default: the grid's reference device, H100); with "
                   "--long or a machine format, only this device's rows (default: every device).")
@matrix_options
@format_option
def matrix(warehouse: str | None, run_id: str, device: str | None, lever: str | None, long: bool,
           fmt: str) -> None:
    """Print the lever matrix of a serving run from the warehouse (queries/matrix.sql).

    For people (--format table): per lever, a table of workloads x metrics for one device, each cell the
    change from the baseline with its caveat marks (+27% α), ✓ better / ✗ worse beyond ±2%, coloured on a
    terminal. --long, csv, json and markdown print the long rows (device x lever x workload x metric).

    \b
    Example: sweepkit matrix --device H100 --format markdown
    """
    wh = open_warehouse(warehouse, reading=True)
    with wh.pinned():
        _print_matrix(wh, run_id, fmt, device, lever, long)
