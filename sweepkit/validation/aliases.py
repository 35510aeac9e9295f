"""Names as measurements write them -> catalogue names: Hugging Face model ids, marketing device names.

A measurement names its model the way its source does (``meta-llama/Llama-3.3-70B-Instruct``) and its
device the way a datasheet does (``H100 SXM (80GB HBM3)``). :func:`model_name` and :func:`device_name` give
the catalogue name a row is priced with, or None when the catalogue has no such model or device yet (the
row is then listed as not modelled, with the name, and becomes modelled when the catalogue grows).

Models: the organisation prefix is dropped, the name lower-cased, ``Meta-Llama-3`` read as ``llama-3``,
and suffixes that do not change the architecture removed (``-instruct``, ``-hf``, ``-v0.1``, ``-2507``,
``-0528``, ``-fp8``, ...). The first of these candidates the catalogue knows wins: the name itself, the
stripped name, then :data:`SAME_ARCHITECTURE` (a release with another name and the same shapes).

Devices: the first word of the name (``H100 SXM (80GB HBM3)`` -> ``H100``), with :data:`DEVICE_ALIASES` for
names whose first word is not the catalogue's.

References:
  Llama-3.3-70B-Instruct and Llama-3.1-70B share config.json shapes (80 layers, hidden 8192, 64 heads,
  8 KV heads, intermediate 28672, vocab 128256): huggingface.co/meta-llama/Llama-3.3-70B-Instruct.
  DeepSeek-R1 is DeepSeek-V3's architecture (config.json of deepseek-ai/DeepSeek-R1: DeepseekV3ForCausalLM).
"""

from __future__ import annotations

import re

from sweepkit.catalogue import device_names, model_names

SUFFIXES = ("-instruct-2507", "-instruct", "-chat", "-hf", "-v0.1", "-0528", "-fp8", "-base")
"""Model-name suffixes that name a checkpoint, not an architecture (removed, repeatedly, in this order)."""
SAME_ARCHITECTURE = {"llama-3.3-70b": "llama-3.1-70b", "deepseek-r1": "deepseek-v3"}
"""Stripped model name -> a catalogue model of the same shapes (used when the catalogue lacks the name)."""
DEVICE_ALIASES = {"a100-sxm4-80gb": "A100", "ascend": "Ascend-910B", "rtx": "RTX-3090", "gb200": "GB200",
                  "gb300": "GB300"}
"""Lower-cased first word (or whole name) -> catalogue device name."""


def stripped_model(name: str) -> str:
    """``org/Name-Suffix`` -> ``name`` lower-cased without the :data:`SUFFIXES` (``Meta-Llama-3`` -> ``llama-3``).

    Example:
      >>> stripped_model("meta-llama/Llama-3.3-70B-Instruct"), stripped_model("Qwen/Qwen3-235B-A22B-Instruct-2507")
      ('llama-3.3-70b', 'qwen3-235b-a22b')
    """
    base = name.strip().split("/")[-1].lower()
    base = re.sub(r"^meta-llama-", "llama-", base)
    changed = True
    while changed:
        changed = False
        for s in SUFFIXES:
            if base.endswith(s) and len(base) > len(s):
                base, changed = base[: -len(s)], True
    return base


def model_name(name: str) -> str | None:
    """The catalogue model a measured model name is priced as, or None (module docstring).

    Example:
      >>> model_name("meta-llama/Llama-3.1-8B-Instruct"), model_name("acme/unknown-9b")
      ('llama-3.1-8b', None)
    """
    known = set(model_names())
    base = stripped_model(name)
    for cand in (name.strip(), base, SAME_ARCHITECTURE.get(base)):
        if cand and cand in known:
            return cand
    return None


def device_name(name: str) -> str | None:
    """The catalogue device a measured device name is priced as, or None.

    Example:
      >>> device_name("H100 SXM (80GB HBM3)"), device_name("A100-SXM4-80GB"), device_name("TPU v9")
      ('H100', 'A100', None)
    """
    known = set(device_names())
    text = name.strip()
    if text in known:
        return text
    first = text.split()[0] if text.split() else ""
    for cand in (first, DEVICE_ALIASES.get(text.lower()), DEVICE_ALIASES.get(first.lower()),
                 first.upper()):
        if cand and cand in known:
            return cand
    return None
