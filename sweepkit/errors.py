"""One error type for bad input, so the CLI can print one clear line (exit status 2) and never a traceback."""

from __future__ import annotations

from typing import Any, Iterable


class InputError(ValueError):
    """Bad user input: names where (file or argument), the field, the bad value and what is allowed."""


def bad_value(field: str, value: Any, allowed: str | Iterable[Any], where: str | None = None) -> InputError:
    """Build an :class:`InputError` with the house format.

    >>> str(bad_value("alpha", 1.5, "a number in [0, 1]", where="grids/x.toml"))
    'grids/x.toml: alpha = 1.5 is not allowed; expected a number in [0, 1]'
    """
    if not isinstance(allowed, str):
        allowed = "one of " + ", ".join(str(a) for a in allowed)
    prefix = f"{where}: " if where else ""
    return InputError(f"{prefix}{field} = {value!r} is not allowed; expected {allowed}")


def short(value: Any, limit: int = 60) -> Any:
    """``value``, or its repr cut to ``limit`` characters (ending "...") when longer, for a one-line message.

    >>> short(3), short("abcdefgh", limit=6)
    (3, 'ab...)
    >>> str(bad_value("axes.batch", short(list(range(40))), "distinct values"))
    'axes.batch = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16... is not allowed; expected distinct values'

    """
    text = repr(value)
    return value if len(text) <= limit else _Raw(text[:limit - 3] + "...")


class _Raw(str):
    """A cut repr, printed as it is (not quoted again)."""

    def __repr__(self) -> str:
        return str(self)
