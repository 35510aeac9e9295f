"""``calibrate --framework``: fit one framework's efficiency profile on its steady-state rows.

Rows used: ``max_output_throughput`` and loaded rows (:func:`steady_row`) of the framework (:func:`sweepkit.catalogue.efficiency.framework_key`
of the row's ``framework``), no draft, serving status MODELLED, split = train (every split with
``all_rows``), never a row of split ``check`` (an independent check: :func:`fittable`).
The fit (:func:`sweepkit.validation.profile_fit.fit_profile`) starts from ``start`` (the seed table unless
given); slices of (device, compute format) without a training row keep the start's fields, and a slice
without MoE rows is written without MoE fields (:data:`MOE_FIELDS`, inherited from its family), and a field the
training rows do not pin down (:func:`without_unidentified`) is left out of the slice too: it is inherited
from the family's fitted entries, or the default, as a slice without rows would be.
The errors are reported per slice: device x model class (dense or MoE) x compute format.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from sweepkit.catalogue import get_model
from sweepkit.catalogue.families import families
from sweepkit.catalogue.efficiency import FIELDS, Profile, framework_key, packaged_profile
from sweepkit.errors import InputError
from sweepkit.validation.measurements import Measurement
from sweepkit.validation.profile_fit import ProfileFit, fit_profile, identified_fields
from sweepkit.validation.profiles import fitted_profile, profile_values, steady_row
from sweepkit.validation.serving_points import MAX_BATCH, TOKEN_BUDGET
from sweepkit.validation.steady_rows import row_inputs


UNCHANGED = 1e-6
"""Largest |log ratio| of a training row's value for a field to count as not pinned down by the rows
(:func:`without_unidentified`)."""
MOE_FIELDS = ("moe_eff_max", "moe_tokens_half")
"""Fields a slice's entry leaves out when its training rows hold no MoE model: they are then inherited
(:mod:`sweepkit.catalogue.families`, MoE efficiency as the sibling's ratio to dense), not the prior's value."""


def slice_of(m: Measurement) -> str:
    """'DEVICE dense|moe FORMAT': the slice a row's error is reported in."""
    kind = "moe" if get_model(m.model).n_experts > 0 else "dense"
    return f"{m.device} {kind} {m.compute_format}"


def fittable(m: Measurement) -> bool:
    """Whether ``m`` may be fitted on: every row but those of split ``check``, the independent checks a
    measurement file keeps out of every fit (:data:`sweepkit.validation.measurements.SPLITS`)."""
    return m.split != "check"


def framework_rows(points: list[Measurement], framework: str, sources: tuple[str, ...] = ()) -> list[Measurement]:
    """The framework's rows the analytic steady state prices (:func:`steady_row`; those whose source starts
    with one of ``sources``, when given)."""
    key = framework_key(framework)
    return [m for m in points if framework_key(m.framework) == key
            and (not sources or m.source.startswith(sources)) and steady_row(m)]


@dataclasses.dataclass(frozen=True)
class FrameworkFit:
    """The fitted profile, the raw fit, the rows fitted on and every row of the framework with its error %
    under the start and the fitted profile."""

    profile: Profile
    fit: ProfileFit
    train: list
    rows: list
    before_pct: np.ndarray
    after_pct: np.ndarray


def errors_pct(points: list[Measurement], profile: Profile) -> np.ndarray:
    """100 (modelled / measured - 1) of each row under ``profile``."""
    values = profile_values(points, [profile] * len(points))
    return 100.0 * (values / np.array([m.value_si for m in points]) - 1.0)


def calibrate_framework(points: list[Measurement], framework: str, *, file: str, sha256: str,
                        all_rows: bool = False, start: Profile | None = None,
                        sources: tuple[str, ...] = (), loss: str = "l2", held: dict | None = None) -> FrameworkFit:
    """Fit ``framework``'s profile on its rows of split train (every split with ``all_rows``) whose source
    may be fitted on (:func:`fittable`) and starts with one of ``sources`` (when given), under the data
    ``loss`` (:data:`sweepkit.validation.profile_fit.LOSSES`), ``held`` fields kept at their values; raises InputError (naming the file) with fewer
    than 2 training rows."""
    start = with_kernel_time(start or packaged_profile(), framework)
    rows = framework_rows(points, framework, sources)
    train = [m for m in rows if (all_rows or m.split == "train") and fittable(m)]
    if len(train) < 2:
        raise InputError(f"{file}: {len(train)} max_output_throughput rows with framework {framework!r}"
                         f"{'' if all_rows else ' and split = train'}; a fit needs at least 2"
                         f"{'' if all_rows else ' (--all-rows uses every split)'}")
    with jax.enable_x64(True):
        res = fit_profile(row_inputs(train, MAX_BATCH, TOKEN_BUDGET), [m.value_si for m in train],
                          [(m.device, m.compute_format) for m in train], start,
                          fit_token_budget=any(m.metric != "max_output_throughput" for m in train), loss=loss,
                          held=held)
    moe = {(m.device, m.compute_format) for m in train if get_model(m.model).n_experts > 0}
    slices = {k: v if k in moe else {f: x for f, x in v.items() if f not in MOE_FIELDS}
              for k, v in res.slices.items()}
    for k, fields in (held or {}).items():      # a held field is written whatever rows its slice has
        slices[k] = {**(slices[k] if k in slices else start.entries.get(k, {})), **fields}
    med = lambda r: float(100 * np.median(np.abs(np.expm1(r))))  # noqa: E731
    prof = fitted_profile(start, framework, slices, res.overheads, file=file, sha256=sha256,
                          rows=[m.row for m in train], error_before_pct=med(res.residuals_before),
                          error_after_pct=med(res.residuals_after), token_budget=res.token_budget)
    prof = without_unidentified(prof, train, keep=held or {})
    return FrameworkFit(profile=prof, fit=res, train=train, rows=rows, before_pct=errors_pct(rows, start),
                        after_pct=errors_pct(rows, prof))


def with_kernel_time(start: Profile, framework: str) -> Profile:
    """``start`` with the framework's per-kernel time (:data:`sweepkit.costmodel.kernels.KERNEL_S`) where it has
    none: data the fit holds fixed, not a fitted field.

    Example:
      The seed profile started for SGLang gets ``kernel_s`` = 3.584 us; for vLLM it stays without one.
    """
    from sweepkit.catalogue.efficiency import KERNEL_FIELD
    from sweepkit.costmodel.kernels import KERNEL_S

    value = KERNEL_S.get(framework_key(framework))
    if value is None or KERNEL_FIELD in start.overheads:
        return start
    return dataclasses.replace(start, overheads={**start.overheads, KERNEL_FIELD: value[0]}, kernel_source=value[1])


def without_unidentified(profile: Profile, train: list[Measurement], keep: dict | None = None) -> Profile:
    """``profile`` with each entry field the rows of ``train`` do not pin down left out, so that it is inherited
    from the family's entries or the default (:mod:`sweepkit.catalogue.families`) as a slice without rows is.

    A field f of slice k (not one ``keep`` holds: {(device, format): {field: value}}) is left out when no row
    depends on it at the profile's values (a zero column of d log
    model / d theta: :func:`sweepkit.validation.profile_fit.identified_fields`) and every row of ``train`` keeps its
    value, to |log ratio| <= :data:`UNCHANGED`, with f inherited instead: a field whose term does not bind at
    the fitted value but would at the inherited one (the fit pushed it until it stopped binding) is kept.
    Candidates are tried in the order of the family table (families, then their devices, as listed in
    families.toml), each against the profile with the earlier ones left out, so a family's first device, which
    its siblings inherit from, is tried before them.

    Example:
      The shipped TensorRT-LLM profile's H200 FP8 entry, fitted on max-throughput rows that never bind on
      weight streaming, takes H100 FP8's ``weight_bw_eff`` (tests/validation/test_profile_fit.py).
    """
    train = [m for m in train if steady_row(m)]
    keys = [(m.device, m.compute_format) for m in train]
    with jax.enable_x64(True):
        ident = identified_fields(row_inputs(train, MAX_BATCH, TOKEN_BUDGET), keys, profile)

    def values(p):
        return np.log(profile_values(train, [p] * len(train)))

    base = values(profile)
    fams = [d for fam in families()["families"].values() for d in fam["devices"]]
    for k in sorted(ident, key=lambda k: (fams.index(k[0]) if k[0] in fams else len(fams), k)):
        held = (keep or {}).get(k, {})
        for f in [f for f in profile.entries.get(k, {}) if f in FIELDS and f not in ident[k] and f not in held]:
            entries = {**profile.entries, k: {g: v for g, v in profile.entries[k].items() if g != f}}
            trial = dataclasses.replace(profile, entries=entries)
            if np.max(np.abs(values(trial) - base)) <= UNCHANGED:
                profile = trial
    return profile


def slice_table(result: FrameworkFit) -> list[dict]:
    """Per slice and split: rows, median |error| % and median signed error % before and after."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, m in enumerate(result.rows):
        groups.setdefault((slice_of(m), m.split), []).append(i)
    out = []
    for (name, split), idx in sorted(groups.items()):
        b, a = result.before_pct[idx], result.after_pct[idx]
        out.append(dict(slice=name, split=split, rows=len(idx), abs_error_before_pct=round(float(np.median(np.abs(b))), 1),
                        abs_error_after_pct=round(float(np.median(np.abs(a))), 1),
                        error_before_pct=round(float(np.median(b)), 1), error_after_pct=round(float(np.median(a)), 1)))
    return out
