"""Max-throughput rows priced under an efficiency profile, and fitted framework profiles written as files.

Which profile prices a ``max_output_throughput`` row: the one given (``--profile FILE``) where it names the
row's framework or no framework, else the fitted profile shipped for the row's framework (:func:`sweepkit.catalogue.efficiency.profile_for`); a row of a
framework without one, or with ``profile = "reference"``, is simulated by the serving engine with the
reference constants (:mod:`sweepkit.validation.serving_points`). Under a profile the row's value is the
analytic steady state (:mod:`sweepkit.validation.steady`) with the scheduler limits the engine assumes.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import jax
import numpy as np

from sweepkit.catalogue.efficiency import SHIPPED, Profile, framework_key, profile_for, profile_toml
from sweepkit.costmodel.efficiency import efficiency_arrays
from sweepkit.validation.measurements import Measurement, row_ranges
from sweepkit.validation.serving_points import MAX_BATCH, MODELLED, TOKEN_BUDGET, serving_status
from sweepkit.validation.steady import measured_throughput, row_inputs

REFERENCE = "reference"
"""The profile word that keeps every row on the serving engine with the reference constants."""


def row_profile(m: Measurement, profile: Profile | str | None) -> Profile | None:
    """The profile pricing ``m`` (None: the serving engine prices it, or it is not a max-throughput row)."""
    if m.metric != "max_output_throughput" or m.draft != "none" or profile == REFERENCE:
        return None
    if isinstance(profile, Profile) and (not profile.framework
                                         or framework_key(profile.framework) == framework_key(m.framework)):
        return profile
    return profile_for(m.framework) if framework_key(m.framework) in SHIPPED else None


_vmapped = jax.jit(jax.vmap(measured_throughput))


def profile_values(points: list[Measurement], profiles: list[Profile]) -> np.ndarray:
    """Output tokens/s of each max-throughput row under its profile (analytic steady state)."""
    with jax.enable_x64(True):
        rows = row_inputs(points, MAX_BATCH, TOKEN_BUDGET)
        eff = efficiency_arrays([p.fields(m.device, m.compute_format) for m, p in zip(points, profiles)])
        return np.asarray(_vmapped(rows, eff))


def priced_by_profile(points: list[Measurement], profile: Profile | str | None = None) -> dict[int, float]:
    """{index: modelled tokens/s} of the rows a profile prices (:func:`row_profile`, serving status MODELLED)."""
    idx, profs = [], []
    for i, m in enumerate(points):
        p = row_profile(m, profile)
        if p is not None and serving_status(m) == MODELLED:
            idx.append(i)
            profs.append(p)
    if not idx:
        return {}
    values = profile_values([points[i] for i in idx], profs)
    return {i: float(v) for i, v in zip(idx, values)}


def fitted_profile(start: Profile, framework: str, slices: dict, overheads: dict, *, file: str, sha256: str,
                   rows: list[int], error_before_pct: float, error_after_pct: float,
                   date: dt.date | None = None) -> Profile:
    """``start`` with the fitted slices and overheads, its ``source`` carrying the lineage."""
    date = date or dt.datetime.now(dt.UTC).date()
    source = (f"fitted by sweepkit calibrate --framework {framework} on {date.isoformat()}: {file} "
              f"(sha256 {sha256}), rows {row_ranges(rows)}; median |error| {error_before_pct:.1f}% -> "
              f"{error_after_pct:.1f}%; start: {start.name} ({start.source})")
    entries = {**start.entries, **slices}
    sources = {**start.sources, **{k: f"fitted to {framework} rows" for k in slices}}
    return Profile(name=framework_key(framework), framework=framework, source=source,
                   overheads=dict(overheads), default=dict(start.default), entries=entries, sources=sources)


def write_profile(path: str | Path, p: Profile, comment: str = "") -> None:
    """Write ``p`` as a profile file (to a temporary name, then renamed into place)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(profile_toml(p, comment), encoding="utf-8")
    os.replace(tmp, path)
