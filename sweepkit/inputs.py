"""Reading the files a user names (grids, serving TOML, trace CSVs, config.json, queries) with a size bound.

Every reader stops at a bound instead of reading whatever the path holds (``/dev/zero``, a log file named by
mistake), and turns unreadable or undecodable content into one :class:`~sweepkit.errors.InputError` line.
"""

from __future__ import annotations

from pathlib import Path

from sweepkit.errors import InputError

MAX_TEXT_BYTES = 4 << 20
"""Largest grid, serving, workload, lever, cluster, query or config.json file (4 MiB; the largest shipped
is ~12 kB)."""

MAX_TRACE_BYTES = 256 << 20
"""Largest trace CSV (256 MiB: ~20 M requests of two lengths each)."""


def read_text(path: str | Path, what: str, max_bytes: int = MAX_TEXT_BYTES, where: str | None = None) -> str:
    """The UTF-8 text of a user's file (a byte-order mark is dropped), at most ``max_bytes`` long.

    Args:
      path: the file.  what: what it should be, for messages ("grid file", "trace CSV", ...).
      max_bytes: the bound.  where: the label messages start with (default: the path).

    Raises:
      InputError: no such file, a folder, unreadable, larger than ``max_bytes``, or not UTF-8 text.
    """
    where = str(path) if where is None else where
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise InputError(f"{where}: no such {what}") from None
    except IsADirectoryError:
        raise InputError(f"{where}: is a folder; expected a {what}") from None
    except OSError as exc:
        raise InputError(f"{where}: cannot read the {what} ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise InputError(f"{where}: size is more than {max_bytes:,} bytes; expected a {what} of at most "
                         f"{max_bytes:,} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: byte {exc.start} = 0x{data[exc.start]:02x} is not UTF-8; expected a {what} "
                         f"in UTF-8 text") from None
    if "\x00" in text:
        raise InputError(f"{where}: character {text.index(chr(0))} is a NUL byte; expected a {what} in text")
    return text
