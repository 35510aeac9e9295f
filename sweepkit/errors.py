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
