"""Grid specs: a TOML file naming the values of each sweep axis, validated against the catalogue.

Pipeline position: catalogue -> cost model -> **sweep** (grid spec -> engine) -> warehouse -> queries.

A grid file::

    name = "seed"                        # required, a string
    description = "the chapter's table"  # optional
    devices_file = "my-devices.toml"     # optional: a devices TOML (sweepkit calibrate), beside the grid
    [axes]
    device = ["H100", "A100"]            # a non-empty list (a bare scalar counts as a one-value list)
    batch = { start = 1, stop = 512, num = 10, scale = "log" }   # or a range, stop inclusive
    alpha = { start = 0.5, stop = 0.9, num = 5 }                  # scale defaults to "linear"
    decay = [1.0, 0.9]                   # alpha_i = alpha r^(i-1): 1 is i.i.d.
    acceptance = ["eagle-llama2-chat-70b"]                        # named per-position tables

Axes (nesting order, the last varies fastest) and the defaults of axes left out:

    ==============  ==============  ==========================================================
    axis            default         allowed
    ==============  ==============  ==========================================================
    device          ["H100"]        ``sweepkit devices``
    model           ["llama-3-8b"]  ``sweepkit models``
    draft           ["mtp"]         ``none``, ``mtp`` or a catalogue model sharing the target's vocab
    tp              [1]             integer >= 1 (tensor-parallel degree)
    weight_format   ["bf16"]        bf16, fp8, int8, int4, fp4
    kv_format       ["bf16"]        as weight_format
    compute_format  ["bf16"]        as weight_format
    batch           [1]             integer >= 1 (rows decoded together)
    context         [512]           integer >= 1 (tokens cached per row)
    gamma           [3]             integer >= 0 (draft length)
    alpha           [0.7]           number in [0, 1] (alpha_1: acceptance of the first drafted token)
    decay           [1.0]           number >= 0 (r: alpha_i = alpha r^(i-1); 1 is i.i.d.)
    acceptance      []              ``sweepkit acceptance`` (named per-position tables)
    ==============  ==============  ==========================================================

The last three axes together are the grid's acceptance models (:func:`acceptance_models`): every
alpha x decay, then every named table, in that order. A grid that names tables and gives neither alpha nor
decay sweeps the tables only. So the points are the product of the other axes' lengths times
len(alpha) x len(decay) + len(acceptance).

An optional ``[bands]`` table gives uncertainty draws per point (:mod:`sweepkit.sweep.bands`).
Ranges on integer axes are rounded and de-duplicated, keeping their order; a list must not repeat a value.
A range has at most 1,000,000 values (``MAX_AXIS_VALUES``) and a grid at most 10^12 points (``MAX_POINTS``).
Any error raises :class:`sweepkit.errors.InputError` with one line naming the file, the field, the bad value
and what is allowed (axis values: :mod:`sweepkit.sweep.axis_values`).
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweepkit import acceptance as _acceptance
from sweepkit.catalogue import (devices_file, get_draft, get_model, is_config_path, load_hf_config, load_models_file,
                                register_model)
from sweepkit.errors import InputError, bad_value, short
from sweepkit.inputs import read_text
from sweepkit.sweep.axis_values import INT_MAX, MAX_AXIS_VALUES, axis_values
from sweepkit.sweep.bands import Bands, parse_bands

AXES = ("device", "model", "draft", "tp", "weight_format", "kv_format", "compute_format",
        "batch", "context", "gamma", "alpha", "decay", "acceptance")
"""Grid axes in nesting order (the last varies fastest; alpha, decay and acceptance form one axis of models)."""

DEFAULTS: dict[str, tuple] = {
    "device": ("H100",), "model": ("llama-3-8b",), "draft": ("mtp",), "tp": (1,),
    "weight_format": ("bf16",), "kv_format": ("bf16",), "compute_format": ("bf16",),
    "batch": (1,), "context": (512,), "gamma": (3,), "alpha": (0.7,),
    "decay": (1.0,), "acceptance": (),
}
"""Values of the axes a grid file leaves out."""

TOP_LEVEL_KEYS = ("name", "description", "models_file", "devices_file", "axes", "bands")
ACCEPTANCE_AXES = ("alpha", "decay", "acceptance")
MAX_POINTS = 10**12
"""Most points a grid may have (about 12 TB of Parquet, at ~12 bytes a point); split a bigger sweep into several
grids."""
__all__ = ["ACCEPTANCE_AXES", "AXES", "DEFAULTS", "GridSpec", "INT_MAX", "MAX_AXIS_VALUES", "MAX_POINTS",
           "acceptance_models", "load_grid", "n_acceptance_models", "one_line_of", "parse_grid"]


@dataclass(frozen=True)
class GridSpec:
    """A validated grid: every axis resolved to a tuple of values.

    Attributes:
      name: the grid's ``name``.  description: its ``description`` ("" when absent).
      path: the file it came from (as given), or the ``where`` label of :func:`parse_grid`.
      toml_text: the file's text, verbatim.  sha256: hex SHA-256 of ``toml_text`` (UTF-8).
      axes: axis name -> tuple of values, in :data:`AXES` order (str, int, or float for alpha).
      n_points: the number of grid points (a Python int).
      bands: the ``[bands]`` table (uncertainty draws per point; :mod:`sweepkit.sweep.bands`), or None.
      devices_file: the grid's ``devices_file`` (a devices TOML, e.g. from ``sweepkit calibrate``), resolved
        against the grid file's folder; "" when absent. Its devices may appear on the device axis.
    """

    name: str
    description: str
    path: str
    toml_text: str
    sha256: str
    axes: dict[str, tuple] = field(repr=False)
    n_points: int
    bands: Bands | None = None
    devices_file: str = ""


def load_grid(path: str | Path) -> GridSpec:
    """Read and validate a grid TOML file.

    Args:
      path: the file.

    Returns:
      A :class:`GridSpec`.

    Raises:
      InputError: missing or unreadable file, or any invalid content (one line).
    """
    text = read_text(path, "grid file")                    # bounded; a byte-order mark (Windows editors) is dropped
    return parse_grid(text, str(path), base=Path(path).parent)


def parse_grid(text: str, where: str = "<grid>", base: Path | None = None) -> GridSpec:
    """Validate the text of a grid file.

    Args:
      text: TOML text.
      where: label for error messages and ``GridSpec.path`` (usually the file name).
      base: folder that relative ``config.json`` paths on the model and draft axes hang from (default: the
        current folder).

    Returns:
      A :class:`GridSpec`.

    Example:
      >>> spec = parse_grid('name = "x"\\n[axes]\\nbatch = [1, 8]\\nalpha = [0.6, 0.8]', "x.toml")
      >>> spec.n_points, spec.axes["batch"], spec.axes["device"]
      (4, (1, 8), ('H100',))
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML: {exc}") from None
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            raise bad_value(key, short(raw[key]), "a top-level key among " + ", ".join(TOP_LEVEL_KEYS),
                            where=where)
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise bad_value("name", name, "a non-empty string (the grid's name)", where=where)
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise bad_value("description", description, "a string", where=where)
    table = raw.get("axes", {})
    if not isinstance(table, dict):
        raise bad_value("axes", short(table), "a table [axes] of axis = list or range", where=where)
    for key in table:
        if key not in AXES:
            raise bad_value(f"axes.{key}", short(table[key]), "an axis among " + ", ".join(AXES), where=where)
    configs = _load_models_file(raw, where, base) + _load_configs(table, where, base)
    extra = _devices_file(raw.get("devices_file"), where)
    with devices_file(extra or None):
        axes = {a: (axis_values(a, table[a], where) if a in table else DEFAULTS[a]) for a in AXES}
    if "acceptance" in table and "alpha" not in table and "decay" not in table:
        axes["alpha"] = axes["decay"] = ()                   # the named tables only
    _check_drafts(axes, where)
    _check_tp(axes, where)
    n_points = n_acceptance_models(axes) * math.prod(len(v) for a, v in axes.items() if a not in ACCEPTANCE_AXES)
    if n_points > MAX_POINTS:
        raise InputError(f"{where}: axes: the grid has {n_points:,} points (the product of the axis lengths); "
                         f"at most {MAX_POINTS:,} are allowed: split it into several grids")
    bands = parse_bands(raw.get("bands"), where)
    digest = hashlib.sha256(text.encode("utf-8"))
    for config_text in configs:                     # a changed config.json is another grid: never reused
        digest.update(b"\0" + config_text.encode("utf-8"))
    return GridSpec(name=name, description=description, path=where, toml_text=text, bands=bands,
                    sha256=digest.hexdigest(), axes=axes, n_points=n_points, devices_file=extra)


def n_acceptance_models(axes: dict[str, tuple]) -> int:
    """How many acceptance models a grid's axes give: len(alpha) x len(decay) + len(acceptance)."""
    return len(axes["alpha"]) * len(axes.get("decay", (1.0,))) + len(axes.get("acceptance", ()))


def acceptance_models(axes: dict[str, tuple]) -> list[_acceptance.AcceptanceModel]:
    """The grid's acceptance models, in row order: every (alpha, decay) (decay varying fastest), then every
    named table. Axes left out (as in hand-made ``axes`` dicts) take their defaults."""
    models = [_acceptance.parametric(a, r) for a in axes["alpha"] for r in axes.get("decay", (1.0,))]
    return models + [_acceptance.get_table(name) for name in axes.get("acceptance", ())]


def _devices_file(value: Any, where: str) -> str:
    """The grid's devices_file resolved against the grid file's folder ("" when absent)."""
    if value is None:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise bad_value("devices_file", value, "a path to a devices TOML (sweepkit calibrate --out)", where=where)
    path = Path(value)
    return str(path if path.is_absolute() else Path(where).parent / path)


def _load_configs(table: dict, where: str, base: Path | None) -> list[str]:
    """Load every ``config.json`` the model and draft axes name (relative to ``base``); returns their texts.

    Each is registered in the catalogue under the text the grid gives (``sweepkit.catalogue.register_model``).
    """
    texts = []
    for axis in ("model", "draft"):
        values = table.get(axis, [])
        for v in values if isinstance(values, list) else [values]:
            if isinstance(v, str) and is_config_path(v):
                path = Path(v) if Path(v).is_absolute() or base is None else base / v
                try:
                    texts.append(read_text(path, "config.json", where=f"{where}: axes.{axis} = {v!r}"))
                    register_model(load_hf_config(path, name=v))
                except InputError as exc:
                    raise InputError(one_line_of(exc, f"{where}: axes.{axis} = {v!r}")) from None
    return texts


def _load_models_file(raw: dict, where: str, base: Path | None) -> list[str]:
    """Register the models of ``models_file`` (relative to ``base``) for the axes; returns its text."""
    if "models_file" not in raw:
        return []
    value = raw["models_file"]
    if not isinstance(value, str) or not value.strip():
        raise bad_value("models_file", value, "the path of a TOML file of [models.<name>] tables", where=where)
    path = Path(value) if Path(value).is_absolute() or base is None else base / value
    label = f"{where}: models_file = {value!r}"
    text = read_text(path, "models file (TOML)", where=label)
    load_models_file(path, where=label)
    return [text]


def one_line_of(exc: InputError, prefix: str) -> str:
    """``exc``'s message under ``prefix`` (once)."""
    text = str(exc)
    return text if text.startswith(prefix) else f"{prefix}: {text}"


def _check_tp(axes: dict[str, tuple], where: str) -> None:
    """Every TP degree must divide every model's attention heads (each device holds whole heads)."""
    for model in axes["model"]:
        heads = get_model(model).n_heads
        for tp in axes["tp"]:
            if heads % tp:
                divisors = [d for d in range(1, heads + 1) if heads % d == 0 and d <= INT_MAX["tp"]]
                raise bad_value("axes.tp", tp, f"a divisor of {model}'s {heads} attention heads "
                                f"({', '.join(map(str, divisors))})", where=where)


def _check_drafts(axes: dict[str, tuple], where: str) -> None:
    """Every (model, draft) pair must resolve: a draft model shares its target's vocabulary."""
    for model in axes["model"]:
        target = get_model(model)
        for draft in axes["draft"]:
            try:
                get_draft(draft, target, field="axes.draft")
            except InputError as exc:
                raise InputError(f"{where}: {exc}") from None
