"""Other spellings of catalogue names: HF repository ids for models, vendor spellings for devices.

A name resolves, in order: as a catalogue key; through ``aliases.toml`` after normalising (case folded,
runs of spaces, hyphens and underscores made one space); the same without a trailing parenthesised note
("H200 (141GB HBM3)" -> "H200") or cut at its first parenthesis or comma ("H100 (80GB), 8 per node" ->
"H100"); each of those without a leading vendor name ("NVIDIA DGX B200" -> "DGX B200"); and, for a HF id
``org/Name``, as the catalogue key or the alias (an aliased HF id's ``Name``) equal to ``Name`` or to ``Name``
less its trailing suffixes one by one (case folded): a quantised checkpoint's (``-FP8``, ``-FP8-dynamic``,
``-FP8-KV``, ``-FP4``, ``-NVFP4``, ``-MXFP4``: :data:`QUANT_SUFFIXES`) and ``-Instruct`` / ``-hf`` /
``-chat`` / ``-Base`` / ``-Preview``.

A quantised checkpoint keeps its base model's config.json shapes (NVIDIA's Model Optimizer checkpoints,
``nvidia/Llama-3.3-70B-Instruct-FP4``; RedHat's ``-FP8-dynamic``; AMD's ``-FP8-KV``); its formats are the
suffix's (:func:`checkpoint_format`, :func:`checkpoint_kv_format`). A checkpoint whose format changes more
than that is named in aliases.toml (``nvidia/DeepSeek-R1-FP4``: bf16 attention). Unknown names get the
catalogue's error listing the known names, with the closest ones first.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from typing import Iterable

from sweepkit.catalogue._toml import read_packaged
from sweepkit.errors import InputError, bad_value

_SUFFIXES = ("-instruct", "-hf", "-chat", "-base", "-preview")
QUANT_SUFFIXES = {"-fp8-dynamic": "fp8", "-fp8-kv": "fp8", "-fp8": "fp8", "-nvfp4": "fp4", "-mxfp4": "fp4",
                  "-fp4": "fp4"}
"""A quantised checkpoint's name suffix (case folded) -> the format its weights and activations take: FP8 and
NVFP4 (W4A4, read as ``fp4`` as the measured corpus does) checkpoints of NVIDIA's TensorRT Model Optimizer
(huggingface.co/nvidia, "Only the weights and activations of the linear operators within transformer blocks
are quantized"), RedHat's llm-compressor ``-FP8-dynamic`` (W8A8) and AMD Quark's ``-FP8-KV`` (W8A8 with an FP8
KV cache) and ``-MXFP4`` (huggingface.co/amd)."""
KV_SUFFIXES = {"-fp8-kv": "fp8"}
"""A suffix that also states the KV cache's format."""
_NOTE = re.compile(r"\s*\([^()]*\)\s*$")
_HEAD = re.compile(r"\s+\(|,")
_VENDOR = re.compile(r"^(nvidia|amd|huawei)\s+", re.I)


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


def _stems(tail: str) -> list[tuple[str, str]]:
    """``tail``, then ``tail`` less each trailing suffix in turn (``-Preview``, a quantisation, ``-Instruct``,
    ...), as (suffix, stem) pairs; the first pair's suffix is ""."""
    out = [("", tail)]
    while True:
        suffix = next((s for s in (*_SUFFIXES, *QUANT_SUFFIXES) if tail.endswith(s) and len(tail) > len(s)), None)
        if suffix is None:
            return out
        tail = tail[: -len(suffix)]
        out.append((suffix, tail))


def _quant_suffix(name: str) -> str | None:
    tail = name.strip().rsplit("/", 1)[-1].casefold()
    return next((suffix for suffix, _ in _stems(tail) if suffix in QUANT_SUFFIXES), None)


def checkpoint_format(name: str) -> str | None:
    """The format a quantised checkpoint's name states (:data:`QUANT_SUFFIXES`), or None.

    >>> checkpoint_format("nvidia/Llama-3.3-70B-Instruct-FP4"), checkpoint_format("meta-llama/Llama-3.1-8B")
    ('fp4', None)
    """
    suffix = _quant_suffix(name)
    return QUANT_SUFFIXES[suffix] if suffix else None


def checkpoint_kv_format(name: str) -> str | None:
    """The KV cache format a quantised checkpoint's name states (:data:`KV_SUFFIXES`), or None.

    >>> checkpoint_kv_format("amd/Llama-3.3-70B-Instruct-FP8-KV"), checkpoint_kv_format("nvidia/Qwen3-8B-FP4")
    ('fp8', None)
    """
    return KV_SUFFIXES.get(_quant_suffix(name) or "")


def _hf_candidates(name: str) -> list[str]:
    return [stem for _, stem in _stems(name.rsplit("/", 1)[-1].casefold())]


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
    heads = [name, _NOTE.sub("", name), _HEAD.split(name, 1)[0]]
    for candidate in dict.fromkeys([*heads, *(_VENDOR.sub("", h) for h in heads)]):
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
