"""Serving levers as data: a lever is a named change from the baseline cluster (here: a speculative draft).

``data/levers.toml`` holds the seed's baseline and its two speculative levers (seed-system.md sec. 1). A lever
names a draft (``none``, ``mtp`` or a catalogue model sharing the target's vocabulary), the draft length gamma
and the assumed acceptance alpha per drafted token.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sweepkit.catalogue import draft_names
from sweepkit.errors import InputError
from sweepkit.serving._toml import check_keys, number, read_toml, string, table

_FIELDS = {"description", "source", "draft", "gamma", "alpha"}


@dataclasses.dataclass(frozen=True)
class Lever:
    """A named change from the baseline.

    Attributes:
      name, description, source: key, one line, where it comes from.
      draft: ``none`` (plain decoding), ``mtp`` or a draft model's catalogue name.
      gamma: drafted tokens per verify pass (0 without a draft).
      alpha: acceptance probability of each drafted token (i.i.d.; assumed, not measured).
    """

    name: str
    description: str
    source: str
    draft: str
    gamma: int
    alpha: float

    @property
    def speculative(self) -> bool:
        return self.draft != "none"


def _lever(name: str, raw: dict, where: str) -> Lever:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a table of lever fields")
    check_keys(raw, _FIELDS, {"draft"}, where)
    draft = string(raw, "draft", where)
    if draft not in draft_names():
        raise InputError(f"{where}: draft = {draft!r} is not allowed; expected one of {', '.join(draft_names())}")
    spec = draft != "none"
    gamma = number(raw, "gamma", where, lo=1 if spec else 0, hi=16 if spec else 0, integer=True,
                   default=None if spec else 0)
    alpha = number(raw, "alpha", where, lo=0.0, hi=1.0, default=None if spec else 0.0)
    return Lever(name=name, description=str(raw.get("description", name)), source=str(raw.get("source", "")),
                 draft=draft, gamma=gamma, alpha=alpha)


def load_levers(path: str | Path | None = None) -> dict[str, Lever]:
    """All levers of a TOML file (default: the packaged three), validated (one-line InputError)."""
    raw, where = read_toml(path, "levers.toml")
    return {k: _lever(k, v, f"{where} [levers.{k}]") for k, v in table(raw, "levers", where).items()}
