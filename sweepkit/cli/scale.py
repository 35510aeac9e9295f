"""The scale-out options of ``sweepkit run`` and ``sweepkit simulate``: --executor, --address, --resume, ...

With none of them a run streams in this process as before. With ``--executor local|ray`` (or
``--resume RUN_ID``, which implies ``local`` unless told otherwise) it is cut into deterministic parts
(``sweepkit.scale``): decode chunks or serving search groups, computed here over the local JAX devices or
as Ray tasks, committed at once when all are written. One progress bar counts parts as any worker of the
cluster writes them.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable

import click

from sweepkit.cli.common import note


def scale_options(f: Callable) -> Callable:
    """The options, in the order ``--help`` shows them."""
    options = [
        click.option("--executor", type=click.Choice(("local", "ray")), default=None,
                     help="Cut the run into resumable parts, computed in this process over its JAX devices "
                          "(local) or as Ray tasks (ray; pip install 'sweepkit[ray]'). Default: stream here."),
        click.option("--address", default=None,
                     help="Ray cluster to use (HOST:PORT of `ray start --head`, or auto); default: start a "
                          "local one for this run."),
        click.option("--workers", type=int, default=None, help="CPUs of the local Ray cluster (default: all)."),
        click.option("--resume", "resume", default=None, metavar="RUN_ID",
                     help="Finish an interrupted run: only the parts it has not written are computed."),
        click.option("--retries", type=int, default=2, show_default=True,
                     help="Extra tries of a failed task before the run stops (its parts stay for --resume)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def wants_parts(executor: str | None, resume: str | None, address: str | None) -> bool:
    """Whether the options ask for a run in parts (any of them given)."""
    return executor is not None or resume is not None or address is not None


def run_in_parts(kind: str, spec, wh, *, executor: str | None, address: str | None, workers: int | None,
                 resume: str | None, retries: int, chunk_points: int | None = None) -> str:
    """Run ``spec`` (a decode GridSpec or a ServingGrid) in parts; returns the committed run id.

    Prints the run id first (so that a killed run can be resumed), a progress bar or a ticker on stderr,
    and on Ctrl-C or a task that failed on every try, one line saying how to resume (exit 130 or 1).
    """
    from sweepkit.scale import TaskFailed, run_decode, run_serving

    bar = _Bar(kind)
    t0 = time.perf_counter()
    common = dict(executor=executor or "local", address=address, resume=resume, workers=workers,
                  retries=retries, on_start=bar.start, on_done=bar.done, on_wait=note)
    try:
        if kind == "decode":
            run_id = run_decode(spec, wh, chunk_points=chunk_points, **common)
        else:
            run_id = run_serving(spec, wh, **common)
    except TaskFailed as exc:
        bar.stop()
        raise click.ClickException(f"{exc}; nothing was committed: finish with --resume {bar.run_id}") from None
    except KeyboardInterrupt:
        bar.stop()
        note(f"interrupted: nothing was committed; the parts written are kept: finish with --resume {bar.run_id}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)              # as the streaming path: no interpreter teardown with XLA work in flight
    bar.stop()
    note(f"run {run_id}: {bar.total:,} {bar.unit} ({len(bar.seen)} parts computed now) "
         f"in {time.perf_counter() - t0:.2f} s with the {executor or 'local'} executor -> {wh.root}")
    return run_id


class _Bar:
    """One progress bar for the whole cluster (rich on a terminal, else a line every 10 s)."""

    def __init__(self, kind: str):
        self.kind, self.unit = kind, "points" if kind == "decode" else "tasks"
        self.run_id, self.total, self.seen = None, 0, []
        self.progress = self.task = None
        self.last = self.t0 = time.perf_counter()
        self.count = self.first = 0

    def start(self, run_id: str, done: int, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.run_id, self.total, self.count, self.first = run_id, total, done, done
        self.t0 = time.perf_counter()
        note(f"run {run_id}: {total:,} {self.unit}, {done:,} already written (interrupted? --resume {run_id})")
        console = Console(stderr=True)
        if console.is_terminal:
            self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[rate]}"),
                                     TextColumn("ETA"), TimeRemainingColumn(), console=console)
            self.progress.start()
            self.task = self.progress.add_task(run_id, total=total, completed=done, rate="")

    def done(self, task) -> None:
        self.seen.append(task.index)
        self.count += task.weight
        if self.progress is not None:
            rate = (self.count - self.first) / max(time.perf_counter() - self.t0, 1e-9)
            self.progress.update(self.task, advance=task.weight, rate=f"{rate:,.1f} {self.unit}/s")
            return
        now = time.perf_counter()
        if now - self.last >= 10.0:
            self.last = now
            rate = (self.count - self.first) / max(now - self.t0, 1e-9)
            eta = (self.total - self.count) / rate if rate > 0 else float("inf")
            note(f"{self.run_id}: {self.count:,} of {self.total:,} {self.unit}, {rate:,.1f}/s, ETA {eta:.0f} s")

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
