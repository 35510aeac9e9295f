"""Max-throughput and loaded rows priced under an efficiency profile, and fitted framework profiles written as files.

Which profile prices a ``max_output_throughput`` row, or a loaded row (fixed concurrency or burst:
:func:`steady_row`) when the profile was fitted on loaded rows: the one given (``--profile FILE``) where it names the
row's framework or no framework, else the fitted profile shipped for the row's framework (:func:`sweepkit.catalogue.efficiency.profile_for`); a row of a
framework without one, or with ``profile = "reference"``, is simulated by the serving engine with the
reference constants (:mod:`sweepkit.validation.serving_points`). Under a profile the row's value is the
analytic steady state (:mod:`sweepkit.validation.steady`) with the scheduler limits the engine assumes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.catalogue import get_model
from sweepkit.catalogue.efficiency import SHIPPED, Profile, framework_key, profile_for, profile_toml
from sweepkit.costmodel.efficiency import efficiency_arrays
from sweepkit.errors import InputError
from sweepkit.validation.decode_kernel import with_decode_kernel
from sweepkit.validation.measurements import Measurement, row_ranges
from sweepkit.validation.row_layout import row_layout
from sweepkit.validation.serving_points import MAX_BATCH, MODELLED, TOKEN_BUDGET, serving_status
from sweepkit.validation.steady import row_value
from sweepkit.validation.steady_rows import node_test, row_inputs

REFERENCE = "reference"
"""The profile word that keeps every row on the serving engine with the reference constants."""


def steady_row(m: Measurement) -> bool:
    """Whether the analytic steady state prices ``m``: a max-throughput row, or a loaded row (output or total
    tokens/s, mean or median TPOT / ITL) at a fixed concurrency or a burst (``request_rate = inf``); no
    draft, no pipeline parallelism, serving status MODELLED. Expert parallelism and data-parallel attention
    of a mixture-of-experts model are priced with the row's layout (:mod:`sweepkit.validation.row_layout`);
    a dense model's dp only as replicas of tp."""
    if node_test(m):                        # a decode or prefill pool's node test (steady_rows.node_test)
        return m.draft == "none" and m.pp == 1 and _expressible(m)
    loaded = (m.metric in LOADED and (m.concurrency is not None or (m.request_rate or 0.0) == float("inf"))
              and (m.metric not in ("tpot", "itl") or str(m.percentile) in ("mean", "50", "50.0")))
    if not ((m.metric == "max_output_throughput" or loaded) and m.draft == "none" and m.pp == 1
            and serving_status(m) == MODELLED):
        return False
    return get_model(m.model).is_moe or (m.ep == 1 and (m.dp == 1 or m.dp * m.tp == m.gpus))


def _expressible(m: Measurement) -> bool:
    """Whether the row's layout and catalogue entries can be priced (a decode-only row has no serving point)."""
    try:
        row_layout(m)
    except (InputError, KeyError):
        return False
    return True


LOADED = ("output_throughput", "total_throughput", "tpot", "itl")
"""Loaded-row metrics the steady state prices (:func:`sweepkit.validation.steady.row_value`)."""


def row_profile(m: Measurement, profile: Profile | str | None) -> Profile | None:
    """The profile pricing ``m`` (None: the serving engine prices it, or the steady state cannot). A loaded
    row is priced only by a profile fitted on loaded rows (one with a ``token_budget``)."""
    if m.metric not in ("max_output_throughput",) + LOADED or m.draft != "none" or profile == REFERENCE:
        return None
    if isinstance(profile, Profile) and (not profile.framework
                                         or framework_key(profile.framework) == framework_key(m.framework)):
        chosen = profile
    else:
        chosen = profile_for(m.framework) if framework_key(m.framework) in SHIPPED else None
    loaded = m.metric != "max_output_throughput"
    return None if chosen is None or (loaded and not chosen.token_budget) else with_decode_kernel(chosen, m)


_vmapped = jax.jit(jax.vmap(row_value))


def row_fields(profile: Profile, m: Measurement) -> dict[str, float]:
    """The profile's fields for a row's device and compute format, with the GEMM fields of the weights its
    model keeps in a wider format (``Profile.kept_fields``: gpt-oss's and NVIDIA's NVFP4 DeepSeek-R1's bf16
    attention)."""
    return profile.fields(m.device, m.compute_format, get_model(m.model).attention_weight_format)


def profile_values(points: list[Measurement], profiles: list[Profile]) -> np.ndarray:
    """What each steady-state row measures (SI) under its profile (:func:`sweepkit.validation.steady.row_value`)."""
    with jax.enable_x64(True):
        rows = row_inputs(points, MAX_BATCH, TOKEN_BUDGET)
        rows = dataclasses.replace(rows, token_budget=jnp.asarray([p.token_budget or TOKEN_BUDGET for p in profiles],
                                                                  dtype=rows.token_budget.dtype))
        eff = efficiency_arrays([row_fields(p, m) for m, p in zip(points, profiles)])
        return np.asarray(_vmapped(rows, eff))


def priced_by_profile(points: list[Measurement], profile: Profile | str | None = None) -> dict[int, float]:
    """{index: modelled value (SI)} of the rows a profile prices (:func:`row_profile`, :func:`steady_row`)."""
    idx, profs = [], []
    for i, m in enumerate(points):
        p = row_profile(m, profile)
        if p is not None and steady_row(m):
            idx.append(i)
            profs.append(p)
    if not idx:
        return {}
    values = profile_values([points[i] for i in idx], profs)
    return {i: float(v) for i, v in zip(idx, values)}


def fitted_profile(start: Profile, framework: str, slices: dict, overheads: dict, *, file: str, sha256: str,
                   rows: list[int], error_before_pct: float, error_after_pct: float,
                   date: dt.date | None = None, token_budget: float = 0.0) -> Profile:
    """``start`` with the fitted slices and overheads, its ``source`` carrying the lineage."""
    date = date or dt.datetime.now(dt.UTC).date()
    source = (f"fitted by sweepkit calibrate --framework {framework} on {date.isoformat()}: {file} "
              f"(sha256 {sha256}), rows {row_ranges(rows)}; median |error| {error_before_pct:.1f}% -> "
              f"{error_after_pct:.1f}%; start: {start.name} ({start.source})")
    entries = {**start.entries, **slices}
    sources = {**start.sources, **{k: f"fitted to {framework} rows" for k in slices}}
    return Profile(name=framework_key(framework), framework=framework, source=source,
                   overheads=dict(overheads), default=dict(start.default), entries=entries, sources=sources,
                   token_budget=token_budget or start.token_budget, kernel_source=start.kernel_source)


def write_profile(path: str | Path, p: Profile, comment: str = "") -> None:
    """Write ``p`` as a profile file (to a temporary name, then renamed into place)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(profile_toml(p, comment), encoding="utf-8")
    os.replace(tmp, path)
