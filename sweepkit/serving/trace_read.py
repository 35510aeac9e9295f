"""Request traces read as a stream: one validated row at a time, every bad line refused with its file and number.

Formats (detected from the first line; a ``.gz`` file, or any file starting with gzip's magic bytes, is
decompressed as it is read):

* ``mooncake`` - JSON lines ``{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}``
  (github.com/kvcache-ai/Mooncake, FAST25-release/traces; ``hash_ids`` are the prompt's 512-token blocks,
  equal ids meaning equal blocks with equal prefixes).
* ``azure`` - CSV with columns ``TIMESTAMP`` (``2023-11-16 18:15:46.6805900``), ``ContextTokens``,
  ``GeneratedTokens`` (github.com/Azure/AzurePublicDataset, AzureLLMInferenceTrace_{code,conv}.csv; Patel
  et al., Splitwise, ISCA 2024).
* ``generic`` - JSON lines or CSV with ``t_s`` (seconds), ``input_tokens``, ``output_tokens`` and optionally
  ``session_id`` (any string or integer) and ``hash_ids`` (a JSON list of integers; in CSV, integers separated
  by spaces), the prompt's prefix blocks of ``block_tokens`` tokens.

Rows must come in arrival order (timestamps non-decreasing). Only the current line is held: memory is what the
caller keeps per row.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import gzip
import io
import json
import math
import zlib
from pathlib import Path
from typing import Iterator

from sweepkit.errors import InputError

FORMATS = ("mooncake", "azure", "generic")
MAX_INPUT_TOKENS = 1_000_000
MAX_OUTPUT_TOKENS = 65_536
MAX_REQUESTS = 2_000_000
"""Most requests a trace may hold (the replay keeps ~50 bytes per request and one entry per distinct block)."""
MOONCAKE_BLOCK_TOKENS = 512
"""Tokens per ``hash_ids`` block of the Mooncake traces (github.com/kvcache-ai/Mooncake, FAST25-release)."""
_GZIP_MAGIC = b"\x1f\x8b"


@dataclasses.dataclass(frozen=True)
class Row:
    """One request of a trace: arrival ``t_s`` (s since the trace's clock zero), prompt and output tokens,
    session key (None: not given) and prefix block ids (None: not given)."""

    t_s: float
    input_tokens: int
    output_tokens: int
    session: str | None
    hash_ids: tuple | None


def _open(path: Path) -> io.TextIOBase:
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == _GZIP_MAGIC:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def detect(first_line: str) -> tuple[str, str]:
    """(format, syntax) of a trace from its first line: ``("mooncake" | "generic", "jsonl")`` or
    ``("azure" | "generic", "csv")``.

    Example:
      >>> detect('{"timestamp": 0, "input_length": 9, "output_length": 2}')
      ('mooncake', 'jsonl')
      >>> detect("TIMESTAMP,ContextTokens,GeneratedTokens")
      ('azure', 'csv')
    """
    text = first_line.lstrip("\ufeff").strip()
    if text.startswith("{"):
        return ("mooncake" if '"timestamp"' in text and '"input_length"' in text else "generic"), "jsonl"
    header = [c.strip() for c in next(csv.reader([text]), [])]
    return ("azure" if "ContextTokens" in header else "generic"), "csv"


def _int(value, field: str, lo: int, hi: int, where: str) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool)
    if not ok and isinstance(value, (str, float)) and not isinstance(value, bool):
        try:
            f = float(value)
            ok, value = f.is_integer(), int(f) if math.isfinite(f) and f.is_integer() else value
        except ValueError:
            ok = False
    if not ok or not lo <= value <= hi:
        raise InputError(f"{where}: {field} = {value!r} is not allowed; expected an integer in [{lo:,}, {hi:,}]")
    return value


def _time(value, field: str, scale: float, where: str) -> float:
    try:
        t = float(value) * scale
    except (TypeError, ValueError):
        t = math.nan
    if isinstance(value, bool) or not math.isfinite(t) or t < 0:
        raise InputError(f"{where}: {field} = {value!r} is not allowed; expected a number >= 0")
    return t


def _hashes(value, where: str) -> tuple:
    if isinstance(value, str):
        try:
            value = [int(v) for v in value.split()]
        except ValueError:
            value = None
    if not isinstance(value, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in value):
        raise InputError(f"{where}: hash_ids = {str(value)[:60]!r} is not allowed; expected a list of integers")
    return tuple(value)


def _azure_time(value, where: str) -> float:
    """Seconds since the epoch of an Azure ``TIMESTAMP`` (7 fractional digits are cut to microseconds)."""
    text = str(value).strip()
    head, dot, frac = text.partition(".")
    try:
        t = dt.datetime.fromisoformat(head + (dot + frac[:6] if dot else "")).replace(tzinfo=dt.UTC)
    except ValueError:
        raise InputError(f"{where}: TIMESTAMP = {text!r} is not allowed; expected a date and time like "
                         f"'2023-11-16 18:15:46.6805900'") from None
    return t.timestamp()


def _row(fmt: str, rec: dict, where: str) -> Row:
    """A validated :class:`Row` of a record (a JSON object, or a CSV row as a dict)."""
    if fmt == "mooncake":
        t, inp, out = rec.get("timestamp"), rec.get("input_length"), rec.get("output_length")
        names, scale = ("timestamp", "input_length", "output_length"), 1e-3
    elif fmt == "azure":
        t, inp, out = rec.get("TIMESTAMP"), rec.get("ContextTokens"), rec.get("GeneratedTokens")
        names, scale = ("TIMESTAMP", "ContextTokens", "GeneratedTokens"), 1.0
    else:
        t, inp, out = rec.get("t_s"), rec.get("input_tokens"), rec.get("output_tokens")
        names, scale = ("t_s", "input_tokens", "output_tokens"), 1.0
    for name, value in zip(names, (t, inp, out)):
        if value is None or value == "":
            raise InputError(f"{where}: {name} is missing; a {fmt} trace needs {', '.join(names)}")
    t_s = _azure_time(t, where) if fmt == "azure" else _time(t, names[0], scale, where)
    session = rec.get("session_id") if fmt == "generic" else None
    hashes = rec.get("hash_ids")
    return Row(t_s=t_s, input_tokens=_int(inp, names[1], 1, MAX_INPUT_TOKENS, where),
               output_tokens=_int(out, names[2], 1, MAX_OUTPUT_TOKENS, where),
               session=None if session in (None, "") else str(session),
               hash_ids=None if hashes in (None, "") or fmt == "azure" else _hashes(hashes, where))


def _records(f, syntax: str, path: str) -> Iterator[tuple[int, dict]]:
    """(line number, record) of every non-blank line after a CSV header."""
    if syntax == "jsonl":
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path} line {n}: not a JSON object ({exc.msg}; a truncated or malformed "
                                 f"line)") from None
            if not isinstance(rec, dict):
                raise InputError(f"{path} line {n}: {line.strip()[:40]!r} is not allowed; expected a JSON object")
            yield n, rec
        return
    reader = csv.reader(f)
    header = [c.strip().lstrip("\ufeff") for c in next(reader)]
    for row in reader:
        n = reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise InputError(f"{path} line {n}: {len(row)} fields, expected {len(header)} ({', '.join(header)}); "
                             f"a truncated or malformed line")
        yield n, dict(zip(header, (c.strip() for c in row)))


def trace_format(path: str | Path) -> str:
    """The format of a trace file, detected from its first non-blank line (:func:`detect`)."""
    with _open(Path(path)) as f:
        for line in f:
            if line.strip():
                return detect(line)[0]
    return "generic"


def read_rows(path: str | Path, fmt: str | None = None) -> Iterator[Row]:
    """Stream the validated rows of a trace file, in arrival order, times from the first row's (t = 0).

    Args:
      path: JSONL or CSV, plain or gzip.  fmt: one of :data:`FORMATS` (None: detected from the first line).

    Raises:
      InputError: one line naming the file, the line number, the field, the value and what is allowed (a
        malformed or truncated line, a length out of range, time going backwards, a truncated gzip stream).
    """
    path = Path(path)
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"{path}: format = {fmt!r} is not allowed; expected one of {', '.join(FORMATS)}")
    try:
        f = _open(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the trace ({exc.strerror or exc})") from None
    n, count, t0, last = 0, 0, None, -math.inf
    try:
        with f:
            first = ""
            while not first.strip():
                first = f.readline()
                if not first:
                    raise InputError(f"{path}: the trace is empty; expected one request per line")
            found, syntax = detect(first)
            fmt = fmt or found
            for n, rec in _records(_chain(first, f), syntax, str(path)):
                where = f"{path} line {n}"
                row = _row(fmt, rec, where)
                if row.t_s < last:
                    raise InputError(f"{where}: time {row.t_s - (t0 or 0.0):.6g} s comes before the previous "
                                     f"line's; expected rows in arrival order")
                last = row.t_s
                t0 = row.t_s if t0 is None else t0
                count += 1
                if count > MAX_REQUESTS:
                    raise InputError(f"{where}: the trace holds more than {MAX_REQUESTS:,} requests; expected "
                                     f"at most that (cut it into windows)")
                yield dataclasses.replace(row, t_s=row.t_s - t0)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(f"{path}: the gzip stream is truncated or corrupt after line {n} ({exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text after line {n}; expected JSON lines or CSV") from None
    except csv.Error as exc:
        raise InputError(f"{path} line {n + 1}: not valid CSV ({exc})") from None


def _chain(first: str, f) -> Iterator[str]:
    yield first
    yield from f
