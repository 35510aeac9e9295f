"""Reading the packaged TOML data files (importlib.resources, so an installed wheel works too)."""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any


def read_packaged(name: str) -> dict[str, Any]:
    """Parse ``sweepkit/catalogue/<name>`` as TOML."""
    text = resources.files("sweepkit.catalogue").joinpath(name).read_text(encoding="utf-8")
    return tomllib.loads(text)
