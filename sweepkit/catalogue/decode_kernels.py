"""Which decode-attention kernel a framework release runs for a model's attention shape (``decode_kernels.toml``).

A tensor-core MQA / GQA decode kernel (TensorRT-LLM's XQA) reads each KV head once for the query heads that
share it and runs its matmuls on tensor cores: its time is the ordinary roofline (KV bytes over HBM bandwidth,
attention FLOPs over the tensor peak). A CUDA-core kernel of one thread block per (sequence, query head)
(TensorRT-LLM's masked MHA) does the same 2 L q A attention FLOPs (:func:`sweepkit.costmodel.passes.attention_flops`)
on the FP32 CUDA cores, once per query head whatever the KV heads, so under GQA the work per KV byte grows
with the group g = H / H_kv:

    t_attn = max(KV_read / (B b_kv),  2 L q A / (P_vec e_vec))

(P_vec: the device's FP32 CUDA-core peak, ``vector_flops_per_s``; e_vec: :func:`vector_decode_eff`). Under MHA
(g = 1) the KV term dominates on the devices catalogued (H100 fp8 KV: 2 FLOPs per KV byte against
P_vec e_vec / (B b_kv) = 67e12 x 0.1 / 2.75e12 = 2.4), so the kernel choice moves only GQA models.
"""

from __future__ import annotations

import re
from functools import cache

from sweepkit.catalogue._toml import read_packaged
from sweepkit.errors import InputError

FILE = "decode_kernels.toml"
_RELEASE = re.compile(r"\bv?(\d+)\.(\d+)")


def release_of(framework: str) -> tuple[int, int] | None:
    """(major, minor) of the release a framework string names after its first word, else None.

    >>> release_of("TensorRT-LLM v0.9.0 (gptSessionBenchmark, static batching)"), release_of("TensorRT-LLM")
    ((0, 9), None)
    """
    words = framework.strip().split(maxsplit=1)
    return _version(words[1]) if len(words) > 1 else None


def _version(text: str) -> tuple[int, int] | None:
    hit = _RELEASE.search(text)
    return (int(hit.group(1)), int(hit.group(2))) if hit else None


@cache
def kernel_table() -> dict[str, list[dict]]:
    """{framework key: [entries in the file's order]}, each entry checked; raises InputError naming the field."""
    out = {}
    for key, entries in read_packaged(FILE).get("framework", {}).items():
        for i, e in enumerate(entries):
            where = f"sweepkit:{FILE} [[framework.{key!r}]] #{i + 1}"
            if _version(str(e.get("through", ""))) is None:
                raise InputError(f"{where}: through = {e.get('through')!r} is not a release; expected 'MAJOR.MINOR'")
            effs = e.get("vector_eff", {})
            bad = [k for k, v in effs.items() if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1]
            if bad:
                raise InputError(f"{where}: vector_eff.{bad[0]} = {effs[bad[0]]!r} is not allowed; expected a "
                                 f"number in (0, 1]")
        out[key] = list(entries)
    return out


def vector_decode_eff(framework: str, n_heads: int, n_kv_heads: int, head_dim: int, kv_format: str) -> float:
    """e_vec of the CUDA-core decode kernel ``framework``'s release runs for this attention shape, or 0.0
    where it runs a tensor-core kernel (module docstring).

    The first entry of the framework (``decode_kernels.toml``) whose ``through`` release is at or after the
    framework string's release applies; the shape runs the tensor-core kernel where g = H / H_kv is in its
    ``tensor_core_groups`` and d_h in its ``tensor_core_head_dims``. A framework named without a release, a
    release after every entry, a model without KV heads, or a KV format the entry has no ``vector_eff`` for
    gives 0.0 (the tensor-core roofline).

    Args:
      framework: the framework as a measurement names it (release after the first word).
      n_heads, n_kv_heads: H and H_kv of the model.  head_dim: d_h.  kv_format: the KV cache format.

    Returns:
      e_vec in (0, 1], or 0.0.

    Example:
      >>> fw = "TensorRT-LLM v0.9.0 (gptSessionBenchmark, static batching)"
      >>> vector_decode_eff(fw, 32, 8, 128, "fp8"), vector_decode_eff(fw, 64, 8, 128, "fp8")   # Mistral, Llama-2-70B
      (0.1, 0.0)

    References:
      TensorRT-LLM v0.9 DecoderXQARunner::shouldUse and docs/source/advanced/gpt-attention.md, 'XQA
      Optimization' (github.com/NVIDIA/TensorRT-LLM); the sources in ``decode_kernels.toml``.
    """
    release = release_of(framework)
    if release is None or n_kv_heads <= 0 or n_heads % n_kv_heads:
        return 0.0
    from sweepkit.catalogue.efficiency import framework_family

    for e in kernel_table().get(framework_family(framework), []):    # the framework, whatever runs it
        if release <= _version(str(e["through"])):
            tensor = n_heads // n_kv_heads in e.get("tensor_core_groups", []) and head_dim in e.get(
                "tensor_core_head_dims", [])
            return 0.0 if tensor else float(e.get("vector_eff", {}).get(kv_format, 0.0))
    return 0.0
