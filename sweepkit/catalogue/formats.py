"""Number formats for weights, KV cache and compute (bytes per value; speed-ups live on the device)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from sweepkit.catalogue._toml import read_packaged
from sweepkit.errors import bad_value


@dataclass(frozen=True)
class Format:
    """A storage / compute number format.

    Attributes:
      name: catalogue key (``bf16``, ``fp8``, ``int8``, ``int4``, ``fp4``).
      bytes_per_value: storage bytes per value, group scales included (int4 AWQ g128: 0.515625).
      description: one line.
    """

    name: str
    bytes_per_value: float
    description: str


@cache
def load_formats() -> dict[str, Format]:
    raw = read_packaged("formats.toml")["formats"]
    return {k: Format(name=k, bytes_per_value=float(v["bytes_per_value"]), description=v["description"])
            for k, v in raw.items()}


def format_names() -> list[str]:
    return list(load_formats())


def get_format(name: str, field: str = "format") -> Format:
    """Look a format up by name; unknown names raise :class:`InputError` listing the known ones."""
    formats = load_formats()
    if name not in formats:
        raise bad_value(field, name, formats)
    return formats[name]
