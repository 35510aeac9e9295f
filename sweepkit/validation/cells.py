"""One cell of a measurement CSV row: checked, converted, or a one-line error naming the file, row, column,
value and what is allowed (:func:`sweepkit.errors.bad_value`).

Example:
  >>> cell_int({"tp": "4"}, "tp", "m.csv row 2")
  4
  >>> cell_rate({"request_rate": "inf"}, "m.csv row 2")
  inf
"""

from __future__ import annotations

from sweepkit.catalogue import get_device, get_model
from sweepkit.errors import InputError, bad_value

PERCENTILES = ("mean", "50", "90", "99")
"""Latency statistics the serving engine reports (the mean or a percentile)."""


def _checked(raw: dict, key: str, where: str, convert, ok, allowed: str):
    """The cell ``key`` converted (None when empty); a one-line error naming ``allowed`` when it does not convert
    or ``ok`` rejects it."""
    text = (raw.get(key) or "").strip()
    if not text:
        return None
    try:
        value = convert(text)
    except ValueError:
        raise bad_value(key, text, allowed, where=where) from None
    if not ok(value):
        raise bad_value(key, text, allowed, where=where)
    return value


def cell_int(raw: dict, key: str, where: str, default=None, minimum: int = 1):
    """An optional integer >= ``minimum`` (``default`` when the cell is empty)."""
    value = _checked(raw, key, where, int, lambda v: v >= minimum, f"an integer >= {minimum}")
    return default if value is None else value


def cell_float(raw: dict, key: str, where: str) -> float | None:
    """An optional positive number (None when the cell is empty)."""
    return _checked(raw, key, where, float, lambda v: 0 < v < float("inf"), "a number > 0")


def cell_rate(raw: dict, where: str) -> float | None:
    """``request_rate``: a number > 0, or ``inf`` (every request at t = 0)."""
    if (raw.get("request_rate") or "").strip().lower() == "inf":
        return float("inf")
    try:
        return cell_float(raw, "request_rate", where)
    except InputError:
        text = (raw.get("request_rate") or "").strip()
        raise bad_value("request_rate", text, "a number > 0 or inf (every request at t = 0)", where=where) from None


def get_model_known(name: str):
    """The catalogue model ``name`` or None."""
    try:
        return get_model(name)
    except InputError:
        return None


def get_device_known(name: str):
    """The catalogue device ``name`` or None."""
    try:
        return get_device(name)
    except InputError:
        return None


def native(device: str, fmt: str) -> bool:
    """Whether ``device`` (a catalogue name) computes in ``fmt`` natively: a quantised checkpoint's weights run
    in its format only there, elsewhere weight-only against bf16 activations (FP8 on Ampere, NVFP4 on Hopper)."""
    try:
        return get_device(device).speedup(fmt) > 1.0
    except InputError:
        return False


def cell_value(raw: dict, where: str) -> float:
    """The measured ``value``: a finite number > 0."""
    text = raw["value"].strip()
    try:
        value = float(text)
    except ValueError:
        raise bad_value("value", text, "a number > 0", where=where) from None
    if not value > 0 or value == float("inf"):
        raise bad_value("value", text, "a number > 0 (times and rates are positive)", where=where)
    return value


def cell_name(raw: dict, key: str, where: str, check) -> str:
    """The catalogue name of a row's device or model (an alias or HF id gives the name it stands for)."""
    value = raw[key].strip()
    try:
        return check(value, key).name
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None


def cell_percentile(raw: dict, where: str) -> str:
    """A latency's ``percentile``: mean, 50, 90 or 99 (50 when the cell is empty)."""
    text = (raw.get("percentile") or "").strip().lower()
    if not text:
        return "50"
    if text not in PERCENTILES:
        raise bad_value("percentile", text, f"one of {', '.join(PERCENTILES)}", where=where)
    return text
