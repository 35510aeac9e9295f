"""Progress of a long command on stderr: a rich bar with rate and ETA on a terminal, plain lines elsewhere.

On a terminal, :class:`Progress` draws a rich.progress bar (done / total, rate, elapsed, ETA). When stderr is not
a terminal (a log file, CI) it writes one line when the first work is done (so a log shows the run started)
and then at most one every ``every_s`` seconds, each with the count, the rate and the ETA, e.g.
``simulating serving-small: 12 of ~28 sims, 2.1 sims/s, 4 s elapsed, ETA 8 s``.

A total known only roughly (the simulations of capacity searches, whose count depends on where each search
ends) is an estimate: it is printed with ``~`` and raised to what is done when the work runs past it.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


def eta_s(done: float, total: float, elapsed_s: float) -> float | None:
    """Seconds left at the rate so far: ``elapsed_s x (total - done) / done``; None before any work is done.

    >>> eta_s(25, 100, 10.0)
    30.0
    >>> eta_s(0, 100, 3.0) is None
    True
    """
    if done <= 0 or elapsed_s <= 0:
        return None
    return max(0.0, elapsed_s * (total - done) / done)


class Progress:
    """Progress of one job: ``advance(n)`` as work is done; a context manager (the bar closes on exit).

    Args:
      name: what is being done, e.g. ``simulating seed``.  total: the amount of work (None: unknown).
      unit: what is counted (``points``, ``sims``).  estimate: the total is an estimate (``~``, raised as needed).
      stream: where lines go (default stderr).  every_s: seconds between plain lines.
      terminal: force the rich bar (True) or plain lines (False); default: whether ``stream`` is a terminal.
    """

    def __init__(self, name: str, total: int | None, unit: str, *, estimate: bool = False,
                 stream: TextIO | None = None, every_s: float = 10.0, terminal: bool | None = None):
        self.name, self.total, self.unit, self.estimate = name, total, unit, estimate
        self.stream = stream if stream is not None else sys.stderr
        self.every_s, self.done = every_s, 0
        self.t0 = self.last = time.perf_counter()
        self.lines = 0
        self._lock = threading.Lock()       # work may be counted from several threads (capacity searches)
        is_tty = getattr(self.stream, "isatty", lambda: False)()
        self.bar = self.task = None
        if terminal if terminal is not None else is_tty:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bar, TaskProgressColumn,
                                       TextColumn, TimeElapsedColumn, TimeRemainingColumn)

            self.bar = Bar(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn(unit + ("~" if estimate else "")), TaskProgressColumn(),
                           TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"),
                           TimeRemainingColumn(), console=Console(file=self.stream), transient=False)

    def __enter__(self) -> Progress:
        self.t0 = self.last = time.perf_counter()
        if self.bar is not None:
            self.bar.start()
            self.task = self.bar.add_task(self.name, total=self.total, rate="")
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more units done; redraw the bar, or write a line when one is due (thread-safe)."""
        with self._lock:
            self._advance(n)

    def _advance(self, n: int) -> None:
        first = self.done == 0
        self.done += n
        if self.estimate and self.total is not None and self.done >= self.total:
            self.total = int(self.done * 1.1) + 1
        now = time.perf_counter()
        elapsed = now - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.bar is not None:
            self.bar.update(self.task, advance=n, total=self.total, rate=f"{rate:,.1f} {self.unit}/s")
            return
        if first or now - self.last >= self.every_s:
            self.last = now
            self.stream.write(self.line(elapsed) + "\n")
            self.stream.flush()
            self.lines += 1

    def line(self, elapsed_s: float) -> str:
        """The plain progress line at ``elapsed_s`` seconds."""
        rate = self.done / elapsed_s if elapsed_s > 0 else 0.0
        of = "" if self.total is None else f" of {'~' if self.estimate else ''}{self.total:,}"
        text = f"{self.name}: {self.done:,}{of} {self.unit}, {rate:,.1f} {self.unit}/s, {elapsed_s:.0f} s elapsed"
        left = None if self.total is None else eta_s(self.done, self.total, elapsed_s)
        return text + (f", ETA {left:.0f} s" if left is not None else "")
