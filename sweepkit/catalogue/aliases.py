"""Other spellings of catalogue names: HF repository ids for models, vendor spellings for devices.

A name resolves, in order: as a catalogue key; through ``aliases.toml`` after normalising (case folded,
runs of spaces, hyphens and underscores made one space); the same without a trailing parenthesised note
("H200 (141GB HBM3)" -> "H200") or cut at its first parenthesis or comma ("H100 (80GB), 8 per node" ->
"H100"); and, for a HF id ``org/Name``, as the catalogue key equal to ``Name`` or to
``Name`` less one ``-Instruct`` / ``-hf`` / ``-chat`` / ``-Base`` suffix (case folded). Unknown names get
the catalogue's error listing the known names, with the closest ones first.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from typing import Iterable

from sweepkit.catalogue._toml import read_packaged
from sweepkit.errors import InputError, bad_value

_SUFFIXES = ("-instruct", "-hf", "-chat", "-base")
_NOTE = re.compile(r"\s*\([^()]*\)\s*$")
_HEAD = re.compile(r"\s+\(|,")


def normalise(name: str) -> str:
    """Case-folded, with every run of spaces, hyphens and underscores as one space.

    >>> normalise("B200 (HGX)"), normalise("A100-SXM4-80GB")
    ('b200 (hgx)', 'a100 sxm4 80gb')
    """
    return re.sub(r"[\s\-_]+", " ", name.strip().casefold())


@cache
def _table(kind: str) -> dict[str, str]:
    return {normalise(k): v for k, v in read_packaged("aliases.toml")[kind].items()}


def alias_table(kind: str) -> dict[str, str]:
    """The packaged aliases of ``kind`` (``models`` or ``devices``), as written: spelling -> catalogue key."""
    return dict(read_packaged("aliases.toml")[kind])


def _hf_candidates(name: str) -> list[str]:
    tail = name.rsplit("/", 1)[-1].casefold()
    return [tail, *(tail[: -len(s)] for s in _SUFFIXES if tail.endswith(s))]


def resolve(name: str, kind: str, known: Iterable[str]) -> str | None:
    """The catalogue key ``name`` stands for among ``known``, or None.

    Args:
      name: a catalogue key, an alias or a HF id.  kind: ``models`` or ``devices``.  known: catalogue keys.

    Example:
      ``resolve("openai/gpt-oss-120b", "models", load_models())`` is ``"gpt-oss-120b"``;
      ``resolve("GB200 NVL72", "devices", load_devices())`` is ``"GB200"``.
    """
    if not isinstance(name, str):
        return None
    known = list(known)
    if name in known:
        return name
    table = _table(kind)
    folded = {k.casefold(): k for k in known}
    for candidate in dict.fromkeys([name, _NOTE.sub("", name), _HEAD.split(name, 1)[0]]):
        key = normalise(candidate)
        if key in table and table[key] in known:
            return table[key]
        if candidate.casefold() in folded:
            return folded[candidate.casefold()]
        if kind == "models" and "/" in candidate:
            for tail in _hf_candidates(candidate):
                if tail in folded:
                    return folded[tail]
    return None


def unknown(field: str, name: object, known: Iterable[str], extra: Iterable[str] = ()) -> InputError:
    """The one-line error for an unknown name: the closest catalogue names first, then the others."""
    known = list(known)
    close = difflib.get_close_matches(str(name).casefold(), [k.casefold() for k in known], n=3, cutoff=0.5)
    first = [k for c in close for k in known if k.casefold() == c]
    return bad_value(field, name, list(dict.fromkeys([*first, *known, *extra])))
