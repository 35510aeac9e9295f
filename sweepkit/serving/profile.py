"""Which efficiency profile prices a serving grid's target passes: the reference constants or a measured one.

A grid chooses with ``profile`` in its ``[serving]`` table, and ``sweepkit simulate --profile`` / ``sweepkit
serve --profile`` override it:

    "reference"            the reference roofline (the default: the reproduction grids match the reference simulator)
    "seed"                 the measured model with the seed constants (sweepkit/catalogue/efficiency.toml)
    a framework's name     its shipped fitted profile (sweepkit/catalogue/profile-<framework>.toml)
    a file path            a profile file (``sweepkit calibrate --framework --out FILE``)

Under a profile each replica's :class:`~sweepkit.costmodel.steps.Instance` carries the profile's
efficiencies for its device and compute format (:meth:`sweepkit.catalogue.efficiency.Profile.fields`: the
device's entry, else its family's, else the default), and the profile's host overheads replace the
cluster's ``step_overhead_s`` (:mod:`sweepkit.costmodel.profiled`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from functools import cache
from importlib import resources
from pathlib import Path

import jax.numpy as jnp

from sweepkit.catalogue.efficiency import SEED, SHIPPED, Profile, framework_key, load_profile, packaged_profile
from sweepkit.costmodel.efficiency import Efficiency, efficiency_arrays
from sweepkit.errors import InputError

REFERENCE = "reference"
"""The profile word for the reference constants (no measured profile)."""


def profile_names() -> list[str]:
    """The words a profile may be given by, besides a file path."""
    return [REFERENCE, "seed", *SHIPPED]


@cache
def _packaged(file: str) -> tuple[Profile, str]:
    text = resources.files("sweepkit.catalogue").joinpath(file).read_text(encoding="utf-8")
    return packaged_profile(file), hashlib.sha256(text.encode()).hexdigest()


def resolve_profile(value: str | None, where: str = "--profile") -> tuple[Profile | None, str]:
    """(the profile, the sha256 of its text) for a name or file; (None, "") for "reference" or None.

    Raises:
      InputError: one line naming ``where``, the value and what is allowed, for an unknown name or an
        unreadable / malformed file.

    Example:
      >>> resolve_profile("tensorrt-llm")[0].framework
      'TensorRT-LLM'
    """
    if value is None or value == REFERENCE:
        return None, ""
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: profile = {value!r} is not allowed; expected one of "
                         f"{', '.join(profile_names())} or a profile file (TOML)")
    if value == "seed":
        return _packaged(SEED)
    if framework_key(value) in SHIPPED and not Path(value).is_file():
        return _packaged(SHIPPED[framework_key(value)])
    path = Path(value)
    if not path.is_file():
        raise InputError(f"{where}: profile = {value!r} is not allowed; expected one of "
                         f"{', '.join(profile_names())} or a profile file (TOML)")
    try:
        prof = load_profile(path)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    return prof, hashlib.sha256(path.read_bytes()).hexdigest()


def instance_efficiency(profile: Profile | None, device: str, compute_format: str,
                        kept_format: str = "") -> Efficiency | None:
    """The float64 :class:`~sweepkit.costmodel.efficiency.Efficiency` of ``device`` in ``compute_format``
    under ``profile``, with the GEMM fields of the weights the model keeps in ``kept_format`` (its
    ``attention_weight_format``; "" for none); None without a profile."""
    if profile is None:
        return None
    return efficiency_arrays(profile.fields(device, compute_format, kept_format), jnp.float64)


def with_profile(grid, value: str):
    """``grid`` (a :class:`~sweepkit.serving.grid.ServingGrid`) priced under profile ``value`` instead of its own:
    the cluster carries the profile, and the grid's stored text ends with a comment naming it and its sha256,
    so a run under another profile is a different grid to the warehouse."""
    prof, digest = resolve_profile(value)
    text = grid.text if value == grid.profile else (
        grid.text.rstrip("\n") + f"\n\n# priced with --profile {value}" + (f" (sha256 {digest})" if digest else "")
        + "\n")
    return dataclasses.replace(grid, cluster=dataclasses.replace(grid.cluster, profile=prof), profile=value,
                               text=text, sha256=hashlib.sha256(text.encode()).hexdigest())
