"""Other spellings of catalogue names: HF repository ids for models, vendor spellings for devices.

A name resolves, in order: as a catalogue key; through ``aliases.toml`` after normalising (case folded,
runs of spaces, hyphens and underscores made one space); the same without a trailing parenthesised note
("H200 (141GB HBM3)" -> "H200") or cut at its first parenthesis or comma ("H100 (80GB), 8 per node" ->
"H100"); and, for a HF id ``org/Name``, as the catalogue key or the alias (an aliased HF id's ``Name``)
equal to ``Name``, to ``Name`` less one quantised checkpoint's suffix (``-FP8``, ``-FP8-dynamic``, ``-FP4``,
``-NVFP4``: :data:`QUANT_SUFFIXES`), and to either less one ``-Instruct`` / ``-hf`` / ``-chat`` / ``-Base``
suffix (case folded). A quantised checkpoint keeps its base model's config.json shapes (NVIDIA's ModelOpt
checkpoints, ``nvidia/Llama-3.3-70B-Instruct-FP4``; RedHat's ``-FP8-dynamic``); its format is the suffix's
(:func:`checkpoint_format`), and a checkpoint whose format changes more than its weights is named in
aliases.toml (``nvidia/DeepSeek-R1-FP4``: bf16 attention). Unknown names get the catalogue's error listing
the known names, with the closest ones first.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from typing import Iterable

from sweepkit.catalogue._toml import read_packaged
from sweepkit.errors import InputError, bad_value

_SUFFIXES = ("-instruct", "-hf", "-chat", "-base")
QUANT_SUFFIXES = {"-fp8-dynamic": "fp8", "-fp8": "fp8", "-nvfp4": "fp4", "-fp4": "fp4"}
"""A quantised checkpoint's name suffix (case folded) -> the format its weights and activations take: FP8 and
NVFP4 (W4A4, read as ``fp4`` as the measured corpus does) checkpoints of NVIDIA's TensorRT Model Optimizer
(huggingface.co/nvidia, "Only the weights and activations of the linear operators within transformer blocks
are quantized") and RedHat's llm-compressor ``-FP8-dynamic`` (W8A8)."""
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


def _unquantised(tail: str) -> str:
    for suffix in QUANT_SUFFIXES:
        if tail.endswith(suffix) and len(tail) > len(suffix):
            return tail[: -len(suffix)]
    return tail


def checkpoint_format(name: str) -> str | None:
    """The format a quantised checkpoint's name states (:data:`QUANT_SUFFIXES`), or None.

    >>> checkpoint_format("nvidia/Llama-3.3-70B-Instruct-FP4"), checkpoint_format("meta-llama/Llama-3.1-8B")
    ('fp4', None)
    """
    tail = name.strip().rsplit("/", 1)[-1].casefold()
    return next((fmt for suffix, fmt in QUANT_SUFFIXES.items() if tail.endswith(suffix) and len(tail) > len(suffix)),
                None)


def _hf_candidates(name: str) -> list[str]:
    tail = name.rsplit("/", 1)[-1].casefold()
    bases = list(dict.fromkeys([tail, _unquantised(tail)]))
    return list(dict.fromkeys(b for base in bases
                              for b in [base, *(base[: -len(s)] for s in _SUFFIXES if base.endswith(s))]))


@cache
def _tails(kind: str) -> dict[str, str]:
    """The alias table keyed by each aliased HF id's ``Name`` (normalised) as well."""
    table = _table(kind)
    return {**{normalise(k.rsplit("/", 1)[-1]): v for k, v in table.items() if "/" in k}, **table}


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
            tails = _tails(kind)
            for tail in _hf_candidates(candidate):
                if tail in folded:
                    return folded[tail]
                if normalise(tail) in tails and tails[normalise(tail)] in known:
                    return tails[normalise(tail)]
    return None


def unknown(field: str, name: object, known: Iterable[str], extra: Iterable[str] = ()) -> InputError:
    """The one-line error for an unknown name: the closest catalogue names first, then the others."""
    known = list(known)
    close = difflib.get_close_matches(str(name).casefold(), [k.casefold() for k in known], n=3, cutoff=0.5)
    first = [k for c in close for k in known if k.casefold() == c]
    return bad_value(field, name, list(dict.fromkeys([*first, *known, *extra])))
