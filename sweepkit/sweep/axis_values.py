"""Values of one grid axis: a list or a range table, each value checked against the axis's domain.

Pipeline position: catalogue -> cost model -> **sweep** (grid spec -> engine) -> warehouse -> queries;
:mod:`sweepkit.sweep.grid` reads a grid file and calls :func:`axis_values` for each axis it names.

An axis's value is a list, a bare scalar (a one-value list) or a range table ``{start, stop, num, scale}``
(stop inclusive; ``scale`` linear or log, log needing start, stop > 0):

    x_i = start + i (stop - start) / (num - 1)              (linear)
    x_i = start (stop / start)^(i / (num - 1))              (log)

with the ends exact. Integer axes (tp, batch, context, gamma) round a range and drop repeats, keeping the
order; a list must not repeat a value. Name axes (device, model, draft, formats, acceptance) take catalogue
names, aliases or HF ids (returned as the catalogue name), and model / draft a path to a ``config.json``.
Any bad value raises :class:`sweepkit.errors.InputError` with one line naming the file, the field, the value
and what is allowed.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from sweepkit import acceptance as _acceptance
from sweepkit.catalogue import (device_key, device_names, draft_names, format_names, is_config_path, model_key,
                                model_names)
from sweepkit.errors import InputError, bad_value, short

RANGE_KEYS = ("start", "stop", "num", "scale")
MAX_AXIS_VALUES = 1_000_000
"""Most values one axis may have (a range's num)."""
SCALES = ("linear", "log")
NAME_AXES = {"device": device_names, "model": model_names, "draft": draft_names,
             "weight_format": format_names, "kv_format": format_names, "compute_format": format_names,
             "acceptance": lambda: sorted(_acceptance.load_packaged().tables)}
"""Axes whose values are names -> the function listing the names allowed."""
INT_MIN = {"tp": 1, "batch": 1, "context": 1, "gamma": 0}
"""Smallest value of each integer axis."""
INT_MAX = {"tp": 1024, "batch": 1 << 20, "context": 1 << 24, "gamma": 64}
"""Largest value of each integer axis (also for ``sweepkit.evaluate``): beyond them the float32 engine
loses integer precision or the draft loop grows without use (gamma)."""


def axis_values(axis: str, value: Any, where: str) -> tuple:
    """The checked values of one axis as a grid file gives them (module docstring).

    Args:
      axis: the axis name (``sweepkit.sweep.grid.AXES``).  value: the file's value: a list, a scalar or a
        range table.  where: the file, for messages.

    Returns:
      The values, in order: int on integer axes, float on alpha / decay, catalogue names (or config paths)
      on name axes.

    Raises:
      InputError: a value outside the axis's domain, a repeat, or a malformed range (one line).

    Example:
      >>> axis_values("batch", {"start": 1, "stop": 64, "num": 4, "scale": "log"}, "g.toml")
      (1, 4, 16, 64)
      >>> axis_values("alpha", [0.6, 0.8], "g.toml")
      (0.6, 0.8)
    """
    field_name = f"axes.{axis}"
    if isinstance(value, dict):
        if axis in NAME_AXES:
            raise bad_value(field_name, short(value), "a non-empty list of names", where=where)
        values = _range(axis, value, where)
    elif isinstance(value, list):
        values = value
    else:
        values = [value]
    if not values:
        raise bad_value(field_name, value, "a non-empty list or a range table {start, stop, num, scale}",
                        where=where)
    checked = tuple(_check_value(axis, v, where) for v in values)
    if len(set(checked)) != len(checked):
        dup = next(v for i, v in enumerate(checked) if v in checked[:i])
        raise bad_value(field_name, short(value), f"distinct values ({dup!r} repeats)", where=where)
    return checked


def _range(axis: str, table: dict, where: str) -> list:
    field_name = f"axes.{axis}"
    for key in table:
        if key not in RANGE_KEYS:
            raise bad_value(f"{field_name}.{key}", short(table[key]),
                            "a range key among " + ", ".join(RANGE_KEYS), where=where)
    for key in ("start", "stop", "num"):
        if key not in table:
            raise InputError(f"{where}: {field_name} range is missing {key}; a range needs start, stop, num "
                             f"(scale optional: linear or log)")
    start, stop, num = table["start"], table["stop"], table["num"]
    for key, v in (("start", start), ("stop", stop)):
        if not _is_real(v):
            raise bad_value(f"{field_name}.{key}", v, "a finite number", where=where)
    if not (_is_real(num) and float(num).is_integer() and 1 <= num <= MAX_AXIS_VALUES):
        raise bad_value(f"{field_name}.num", num, f"an integer in [1, {MAX_AXIS_VALUES:,}]", where=where)
    scale = table.get("scale", "linear")
    if scale not in SCALES:
        raise bad_value(f"{field_name}.scale", scale, SCALES, where=where)
    num = int(num)
    if scale == "log":
        for key, v in (("start", start), ("stop", stop)):
            if v <= 0:
                raise bad_value(f"{field_name}.{key}", v, "a number > 0 on a log scale", where=where)
        points = np.geomspace(float(start), float(stop), num)
    else:
        points = np.linspace(float(start), float(stop), num)
    points[0] = float(start)
    if num > 1:
        points[-1] = float(stop)                            # exact ends despite rounding in geomspace
    if axis in INT_MIN:
        return list(dict.fromkeys(int(round(p)) for p in points))
    return [float(f"{p:.12g}") for p in points]        # 0.15, not 0.15000000000000002


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _check_value(axis: str, v: Any, where: str) -> Any:
    field_name = f"axes.{axis}"
    if axis in NAME_AXES:
        allowed = NAME_AXES[axis]()
        if isinstance(v, str) and axis in ("model", "draft") and is_config_path(v):
            return v                                        # loaded (and checked) by _load_configs
        key = {"device": device_key, "model": model_key, "draft": model_key}.get(axis, lambda _: None)(v)
        if v not in allowed and key in allowed:
            return key                                      # an alias or HF id: the catalogue name
        if not isinstance(v, str) or v not in allowed:
            extra = ["a path to a HF config.json"] if axis in ("model", "draft") else []
            raise bad_value(field_name, short(v), list(allowed) + extra, where=where)
        return v
    if axis in INT_MIN:
        low, high = INT_MIN[axis], INT_MAX[axis]
        if not (_is_real(v) and float(v).is_integer() and low <= v <= high):
            raise bad_value(field_name, short(v), f"an integer in [{low}, {high:,}]", where=where)
        return int(v)
    if axis == "decay":
        if not (_is_real(v) and v >= 0.0):
            raise bad_value(field_name, short(v), "a number >= 0 (alpha_i = alpha r^(i-1))", where=where)
        return float(v)
    if not (_is_real(v) and 0.0 <= v <= 1.0):           # alpha
        raise bad_value(field_name, short(v), "a number in [0, 1]", where=where)
    return float(v)
