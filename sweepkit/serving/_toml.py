"""Reading serving TOML files (packaged defaults or user paths) with one-line :class:`InputError` messages."""

from __future__ import annotations

import math
import numbers
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from sweepkit.errors import InputError, bad_value
from sweepkit.inputs import read_text


def read_toml(path: str | Path | None, packaged: str) -> tuple[dict[str, Any], str]:
    """Parse ``path`` (or ``sweepkit/serving/data/<packaged>`` when None); returns (data, where)."""
    if path is None:
        text = resources.files("sweepkit.serving").joinpath("data").joinpath(packaged).read_text(encoding="utf-8")
        where = f"sweepkit/serving/data/{packaged}"
    else:
        where = str(path)
        text = read_text(path, "file (TOML)")                  # bounded in size, UTF-8 or one-line error
    try:
        return tomllib.loads(text), where
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML ({exc})") from None


def table(raw: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """``raw[key]`` as a table, else a clear error."""
    value = raw.get(key)
    if not isinstance(value, dict) or not value:
        raise InputError(f"{where}: missing [{key}] table; expected at least one entry")
    return value


def check_keys(entry: dict[str, Any], allowed: set[str], required: set[str], where: str) -> None:
    """Reject unknown keys (typos) and missing required ones."""
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise InputError(f"{where}: unknown field {unknown[0]!r}; expected one of {', '.join(sorted(allowed))}")
    missing = sorted(required - set(entry))
    if missing:
        raise InputError(f"{where}: missing field {missing[0]!r}")


def number(entry: dict[str, Any], key: str, where: str, lo: float = -math.inf, hi: float = math.inf,
           lo_open: bool = False, integer: bool = False, default: Any = None) -> float:
    """A finite number in [lo, hi] (or (lo, hi] with ``lo_open``), optionally an integer."""
    value = entry.get(key, default)
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > lo if lo_open else value >= lo) and value <= hi
    if integer:
        ok = ok and float(value).is_integer()
    if not ok:
        bound = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"
        raise bad_value(key, value, f"{'an integer' if integer else 'a number'} in {bound}", where=where)
    return int(value) if integer else float(value)


def string(entry: dict[str, Any], key: str, where: str, default: Any = None) -> str:
    value = entry.get(key, default)
    if not isinstance(value, str) or not value:
        raise bad_value(key, value, "a non-empty string", where=where)
    return value
