"""Shared CLI pieces: the one-line error, the ``--warehouse`` / ``--format`` options, and table output.

Output formats (``--format``): ``table`` (rich, for people), ``csv``, ``json`` (one JSON array of row
objects on stdout and nothing else: progress and notes go to stderr) and ``markdown``.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import math
import signal
import sys
from typing import TYPE_CHECKING, Any, Callable

import click

if TYPE_CHECKING:                   # pyarrow is imported where a table is printed, not for every command's start
    import pyarrow as pa

FORMATS = ("table", "csv", "json", "markdown")


class BadInput(click.ClickException):
    """Bad user input: printed as one ``Error: ...`` line on stderr, exit status 2."""

    exit_code = 2


def one_line(text: str) -> str:
    """The first non-empty line of a (possibly multi-line) message."""
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return str(text).strip()


def with_hint(message: str) -> str:
    """A DuckDB message with the way out where there is a known one."""
    if "No files found that match the pattern" in message and "run_id=" in message:
        run_id = message.split("run_id=", 1)[1].split("/", 1)[0]
        return (f"{message} (a Parquet file of committed run {run_id} is missing; "
                f"`sweepkit drop {run_id}` removes that run)")
    return message


def warehouse_option(f: Callable) -> Callable:
    return click.option("--warehouse", "warehouse", type=click.Path(file_okay=False), default=None,
                        help="Warehouse folder (default: $SWEEPKIT_WAREHOUSE or ./warehouse).")(f)


def parquet_uri_option(f: Callable) -> Callable:
    return click.option("--parquet-uri", "parquet_uri", default=None, metavar="URI",
                        help="Write the run's Parquet to an object store, s3://bucket/prefix (endpoint and "
                             "credentials from the AWS_* environment variables) or gs://bucket/prefix; a "
                             "warehouse's runs keep their Parquet in one place, so needed only on its first "
                             "run (docs/warehouse.md).")(f)


def format_option(f: Callable) -> Callable:
    return click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                        help="Output format; json prints one JSON array of row objects and nothing else.")(f)


def open_warehouse(path: str | None, *, reading: bool = False, parquet_uri: str | None = None):
    """The warehouse ``--warehouse`` names (None: the default).

    Args:
      path: the option's value.  reading: the command only reads: a folder that does not exist is bad input
        (a mistyped path would otherwise answer empty results); writers create it.
      parquet_uri: ``--parquet-uri`` of a writing command: checked (and its bucket looked up) before any work.

    Raises:
      InputError: an empty path, a warehouse to read that does not exist, a bad ``--parquet-uri``, one
        other than the committed runs', or a bucket that does not exist.
    """
    from sweepkit.errors import bad_value
    from sweepkit.store import Warehouse, objstore

    if path is not None and not path.strip():
        raise bad_value("--warehouse", path, "a folder path (omit it for $SWEEPKIT_WAREHOUSE or ./warehouse)")
    wh = Warehouse(path, parquet_uri=parquet_uri)
    if reading and not wh.root.is_dir():
        label = "--warehouse" if path is not None else "warehouse (default)"
        raise bad_value(label, str(wh.root), "an existing warehouse folder (`sweepkit run GRID` creates one)")
    if not reading and wh.location() is not None:
        objstore.check_reachable(wh.location())
    return wh


def note(message: str) -> None:
    """A remark for people: stderr, so stdout stays machine-readable."""
    click.echo(message, err=True)


def _plain(value: Any) -> Any:
    """A JSON-ready value: NaN/inf -> None, dates -> ISO text, decimals -> float."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _cell(value: Any) -> str:
    """Human text for one value: floats to 6 significant digits, None as empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def markdown_cell(text: str) -> str:
    """``text`` safe inside one Markdown table cell: ``|`` escaped, a line break as ``<br>``.

    Example:
      >>> markdown_cell("a|b\\nc")
      'a\\\\|b<br>c'
    """
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    return text.replace("\r\n", "<br>").replace("\n", "<br>").replace("\r", "<br>")


def unique_names(names: list[str]) -> list[str]:
    """Column names made unique for printing: a repeated name gets _2, _3, ... (``select a.x, b.x``).

    >>> unique_names(["x", "x", "y", "x_2"])
    ['x', 'x_3', 'y', 'x_2']
    """
    taken, out = set(names), []
    seen: set[str] = set()
    for name in names:
        if name in seen:
            k = 2
            while f"{name}_{k}" in taken:
                k += 1
            taken.add(f"{name}_{k}")
            name = f"{name}_{k}"
        seen.add(name)
        out.append(name)
    return out


TABLE_MAX_ROWS = 10_000
"""``--format table`` prints at most this many rows (the others formats print every row)."""


def _rows(table: pa.Table):
    """Row dicts, converted batch by batch so that Python objects for one batch exist at a time."""
    for batch in table.to_batches(max_chunksize=1 << 16):
        yield from batch.to_pylist()


def emit(table: pa.Table, fmt: str, title: str | None = None) -> None:
    """Print an Arrow table on stdout in ``fmt`` (repeated column names get a suffix: :func:`unique_names`).

    Rows are converted and written batch by batch, so a result of millions of rows prints in bounded
    memory beside the Arrow table itself; ``table`` shows the first TABLE_MAX_ROWS rows and says so.
    """
    if len(set(table.column_names)) < table.num_columns:
        table = table.rename_columns(unique_names(table.column_names))
    names = table.column_names
    out = sys.stdout
    if fmt == "json":
        out.write("[")
        for i, r in enumerate(_rows(table)):
            if i:
                out.write(", ")
            json.dump(_plain(r), out, allow_nan=False)
        out.write("]\n")
    elif fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(names)
        for r in _rows(table):
            w.writerow(["" if r[n] is None else _plain(r[n]) for n in names])
    elif fmt == "markdown":
        out.write("| " + " | ".join(markdown_cell(n) for n in names) + " |\n")
        out.write("|" + "|".join("---" for _ in names) + "|\n")
        for r in _rows(table):
            out.write("| " + " | ".join(markdown_cell(_cell(r[n])) for n in names) + " |\n")
    else:
        from rich.console import Console

        width = Console(file=out).width if out.isatty() else 200
        t = rich_table(table, title, width)
        Console(file=out, width=max(width, t.needed_width)).print(t)
        if not table.num_rows:
            note("(no rows)")
        elif table.num_rows > TABLE_MAX_ROWS:
            note(f"showing the first {TABLE_MAX_ROWS:,} of {table.num_rows:,} rows; --format csv or json prints "
                 "them all")


def rich_table(table: pa.Table, title: str | None = None, width: int = 200):
    """The rich table ``--format table`` prints (at most TABLE_MAX_ROWS rows), for a terminal ``width`` wide.

    A number is never cut. When the table is wider than ``width``, headers break into lines as wide as
    their column's values (8 characters at least) and text values wrap likewise; numbers never wrap.
    ``needed_width`` (an attribute of the returned table) is the narrowest width that keeps that promise:
    print at least that wide (the terminal wraps the lines of a wider table rather than cutting them).
    """
    from rich.table import Table

    names = table.column_names
    cells = [[_cell(r[n]) for n in names] for r in _rows(table.slice(0, TABLE_MAX_ROWS))]
    longest = [max((len(row[i]) for row in cells), default=1) for i in range(len(names))]
    numeric = [_is_number(table.schema.field(n).type) for n in names]
    natural = 1 + sum(max(len(n), w) + 3 for n, w in zip(names, longest))
    t = Table(title=title, show_lines=False, header_style="bold")
    needed = 1
    for n, w, is_number in zip(names, longest, numeric):
        column_w = max(len(n), w) if natural <= width else max(w if is_number else min(w, 8), min(len(n), 8))
        header = "\n".join(n[i:i + column_w] for i in range(0, len(n), column_w))
        t.add_column(header, justify="right" if is_number else "left", no_wrap=is_number,
                     min_width=column_w, max_width=None if natural <= width else column_w, overflow="fold")
        needed += column_w + 3
    for row in cells:
        t.add_row(*row)
    t.needed_width = needed
    return t


def _is_number(kind: pa.DataType) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)


def parse_params(pairs: tuple[str, ...]) -> dict[str, str]:
    """``("k=v", ...)`` -> {k: v}; a pair without ``=``, or a key given twice, is bad input."""
    from sweepkit.errors import bad_value

    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise bad_value("--param", pair, "key=value, e.g. --param context=512")
        if key.strip() in out:
            raise bad_value("--param", pair, f"each key once ({key.strip()} is already {out[key.strip()]!r})")
        out[key.strip()] = value
    return out


class Interrupts:
    """SIGINT as a flag, acted on between chunks.

    Python's default handler raises KeyboardInterrupt wherever the main thread happens to be; inside a
    callback whose exceptions are ignored (JAX's gc callback, seen in CI) the interrupt is swallowed and the
    run goes on to commit. Here the handler only records the signal, and :meth:`checked` raises
    KeyboardInterrupt at the next chunk boundary, in ordinary code, so write_run throws the run away.
    """

    def __init__(self):
        self.seen = False

    def __enter__(self):
        self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self._previous)
        return False

    def _handler(self, signum, frame):
        self.seen = True

    def check(self, *_args) -> None:
        """Raise KeyboardInterrupt here, in ordinary code, if SIGINT arrived."""
        if self.seen:
            raise KeyboardInterrupt

    def checked(self, batches):
        for batch in batches:
            if self.seen:
                raise KeyboardInterrupt
            yield batch
        if self.seen:
            raise KeyboardInterrupt
