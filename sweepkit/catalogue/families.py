"""Device families: which fitted entry of an efficiency profile a device x format without one inherits.

The rule and the table are data (``families.toml``): for (device d, format f) the candidate entries are,
family by family down d's fallback chain, each format g in (f, then f's nearer formats), the family's devices
(d first) in format g. Every field is taken from the first candidate that has it, else from the profile's
``[default]``. MoE efficiency without MoE evidence is derived from dense:

    moe_eff_max(d, f) = min(1, gemm_eff_max(d, f) * moe_eff_max(c) / gemm_eff_max(c))

with c the first candidate holding both fields. Only achieved fractions and overheads are inherited; peaks
and bandwidths stay the device's own (devices.toml). Families never cross vendors.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources

from sweepkit.errors import InputError

FILE = "families.toml"


@lru_cache(maxsize=None)
def families() -> dict:
    """The parsed family table: {'families': {name: {vendor, devices, fallback}}, 'formats': {f: [g, ...]}}."""
    doc = tomllib.loads(resources.files("sweepkit.catalogue").joinpath(FILE).read_text(encoding="utf-8"))
    fams = doc.get("families", {})
    for name, fam in fams.items():
        nxt = fam.get("fallback", "")
        if nxt and (nxt not in fams or fams[nxt]["vendor"] != fam["vendor"]):
            raise InputError(f"sweepkit:{FILE} [families.{name}]: fallback {nxt!r} is not a family of vendor "
                             f"{fam['vendor']!r}")
    return doc


def family_of(device: str) -> str | None:
    """The family holding ``device`` (None for a device in no family: it inherits nothing)."""
    return next((n for n, f in families()["families"].items() if device in f["devices"]), None)


def vendor_of(device: str) -> str | None:
    """The vendor of ``device``'s family (None outside every family)."""
    fam = family_of(device)
    return families()["families"][fam]["vendor"] if fam else None


def candidates(device: str, compute_format: str) -> list[tuple[str, str]]:
    """(device, format) keys in the order their entries are inherited, (device, format) itself first.

    >>> candidates("GB300", "fp8")[:3]
    [('GB300', 'fp8'), ('B200', 'fp8'), ('GB200', 'fp8')]
    """
    fams = families()["families"]
    formats = [compute_format] + [g for g in families()["formats"].get(compute_format, []) if g != compute_format]
    out, name, seen = [(device, compute_format)], family_of(device), set()
    while name and name not in seen:
        seen.add(name)
        members = fams[name]["devices"]
        for g in formats:
            for d in ([device] if device in members else []) + [m for m in members if m != device]:
                if (d, g) not in out:
                    out.append((d, g))
        name = fams[name].get("fallback", "")
    return out


def inherited(entries: dict, device: str, compute_format: str, fields: tuple[str, ...]) -> dict:
    """{field: (value, (device, format) it came from)} for every field some candidate entry holds; fields no
    candidate holds are left out (the caller's default applies)."""
    order = [k for k in candidates(device, compute_format) if k in entries]
    out = {}
    for f in fields:
        src = next((k for k in order if f in entries[k]), None)
        if src is not None:
            out[f] = (entries[src][f], src)
    gemm = out.get("gemm_eff_max")
    if gemm and "moe_eff_max" not in entries.get(gemm[1], {}):
        both = next((k for k in order if {"gemm_eff_max", "moe_eff_max"} <= entries[k].keys()), None)
        if both is not None:
            ratio = entries[both]["moe_eff_max"] / entries[both]["gemm_eff_max"]
            out["moe_eff_max"] = (min(1.0, gemm[0] * ratio), both)
    return out
