"""Efficiency profiles: achieved fractions per device x compute format x operator class, per framework.

A profile file is TOML with a ``[profile]`` table (``name``, ``framework``, ``source``), a ``[framework]``
table (``step_overhead_s``, ``token_overhead_s``, and optionally ``kernel_s``: the fixed seconds of each kernel
a decoder layer launches, with ``kernel_s_source`` naming where it comes from; data that ``calibrate`` holds,
fitted only on serving-engine rows by :mod:`sweepkit.validation.kernel_fit`; and ``context_kernel_s``, the same
for the kernels of a pass that carries prompt tokens, on top of ``kernel_s``), a
``[default]`` table of the per-format fields and
``[efficiency."DEVICE".FORMAT]`` entries overriding any of them (each may carry a ``source``), and an optional
``[scheduler]`` table (``token_budget``: tokens one step schedules, fitted on loaded rows). The packaged
``efficiency.toml`` is the seed (the reference constants); ``profile-<framework>.toml`` files are fitted
profiles shipped with sweepkit (``sweepkit calibrate --framework``). docs/costmodel.md lists the fields.
"""

from __future__ import annotations

import dataclasses
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

from sweepkit.errors import InputError, bad_value

FIELDS = ("gemm_eff_max", "gemm_tokens_half", "moe_eff_max", "moe_tokens_half", "attn_prefill_eff",
          "weight_bw_eff", "kv_bw_eff", "link_eff", "allreduce_overhead_s", "tp_loss")
"""Per device x format fields (fractions in (0, 1]; *_tokens_half in tokens, >= 0; seconds)."""
FRAMEWORK_FIELDS = ("step_overhead_s", "token_overhead_s")
KERNEL_FIELD = "kernel_s"
"""Optional ``[framework]`` field (seconds per kernel, :mod:`sweepkit.costmodel.kernels`); kept by a refit."""
CONTEXT_KERNEL_FIELD = "context_kernel_s"
"""Optional ``[framework]`` field: t_k,ctx, seconds per kernel of a pass that carries prompt tokens (a context
pass a runtime launches without a CUDA graph, :mod:`sweepkit.costmodel.kernels`); kept by a refit."""
VECTOR_FIELD = "vector_decode_eff"
"""e_vec of a CUDA-core decode-attention kernel (:mod:`sweepkit.catalogue.decode_kernels`), set per priced row
by the framework release and the model's attention shape, never read from a profile file (absent: 0, the
tensor-core roofline)."""
KEPT_FIELDS = ("kept_gemm_eff_max", "kept_gemm_tokens_half")
"""GEMM fields of the weights a checkpoint keeps in a wider format (:meth:`Profile.kept_fields`), set per priced
row or instance from the profile's entry in that format, never read from a profile file (absent: 0, the
pass's format's)."""
SEED = "efficiency.toml"
SHIPPED = {"tensorrt-llm": "profile-tensorrt-llm.toml", "tensorrt-llm-triton": "profile-tensorrt-llm-triton.toml",
           "tensorrt-llm-gptsession": "profile-tensorrt-llm-gptsession.toml",
           "vllm": "profile-vllm.toml", "sglang": "profile-sglang.toml"}
"""Framework key -> packaged fitted profile."""
SERVED_BY = {("tensorrt-llm", "triton"): "tensorrt-llm-triton",
             ("tensorrt-llm", "gptsessionbenchmark"): "tensorrt-llm-gptsession"}
"""(framework key, a word of the framework's name) -> the key of that framework behind that server: TensorRT-LLM
behind Triton's tensorrtllm_backend runs its C++ executor without CUDA graphs unless ``cuda_graph_mode`` is set
(default false: github.com/triton-inference-server/tensorrtllm_backend docs/model_config.md), so its profile
prices each kernel's launch (``kernel_s``) where trtllm-bench's runs do not. TensorRT-LLM's gptSessionBenchmark
(releases up to 0.9) times ``GptSession::generate`` on the host, whose context step runs the engine without a CUDA
graph (graphs, behind ``--enable_cuda_graph``, capture generation steps only: cpp/tensorrt_llm/runtime/gptSession.cpp
``executeContextStep`` / ``executeGenerationStep``), so its profile prices each kernel of a context pass
(``context_kernel_s``)."""


@dataclasses.dataclass(frozen=True)
class Profile:
    """A parsed profile: name, framework, source, per-framework overheads, default and per-(device, format)
    fields (dicts of floats), the per-entry sources."""

    name: str
    framework: str
    source: str
    overheads: dict
    default: dict
    entries: dict
    sources: dict = dataclasses.field(default_factory=dict)
    token_budget: float = 0.0
    """Tokens one step schedules at most, fitted on loaded rows ([scheduler] token_budget; 0: the serving
    engine's budget)."""
    kernel_source: str = ""
    """Where ``overheads["kernel_s"]`` comes from (``kernel_s_source``)."""

    def fields(self, device: str, compute_format: str, kept_format: str = "") -> dict[str, float]:
        """The per-format fields for ``device`` in ``compute_format`` (its entry, else the entries it inherits
        by :mod:`sweepkit.catalogue.families`, over the default), plus the framework overheads, plus
        :meth:`kept_fields` for the weights a model keeps in ``kept_format`` ("" for none)."""
        return {**self.default, **{k: v for k, (v, _) in self.origins(device, compute_format).items()},
                **self.overheads, **self.kept_fields(device, kept_format)}

    def kept_fields(self, device: str, kept_format: str) -> dict[str, float]:
        """:data:`KEPT_FIELDS` for GEMMs over weights a checkpoint keeps in ``kept_format`` (gpt-oss's and
        NVIDIA's NVFP4 DeepSeek-R1's bf16 attention): this profile's dense GEMM fields for ``device`` in that
        format; {} for no format."""
        if not kept_format:
            return {}
        f = self.fields(device, kept_format)
        return {"kept_gemm_eff_max": f["gemm_eff_max"], "kept_gemm_tokens_half": f["gemm_tokens_half"]}

    def origins(self, device: str, compute_format: str) -> dict:
        """{field: (value, (device, format) of the entry it comes from)} for the fields an entry sets
        (:func:`sweepkit.catalogue.families.inherited`); the others come from the default."""
        from sweepkit.catalogue.families import inherited

        return inherited(self.entries, device, compute_format, FIELDS)


def framework_key(name: str) -> str:
    """A framework as a file key: its name's first word, lower case, or the key of that framework behind a server
    its name names (:data:`SERVED_BY`).

    >>> framework_key("TensorRT-LLM (PyTorch backend)"), framework_key("vLLM"), framework_key("SGLang 0.4")
    ('tensorrt-llm', 'vllm', 'sglang')
    >>> framework_key("TensorRT-LLM v0.14 + Triton tensorrtllm_backend")
    'tensorrt-llm-triton'
    >>> framework_key("TensorRT-LLM v0.9.0 (gptSessionBenchmark, static batching)")
    'tensorrt-llm-gptsession'
    """
    family = framework_family(name)
    words = [w.strip("(),;") for w in name.strip().lower().split()[1:]]
    served = [SERVED_BY[(family, w)] for w in words if (family, w) in SERVED_BY]
    return served[0] if served else family


def framework_family(name: str) -> str:
    """The framework a name names, whatever server or benchmark runs it: its first word, lower case.

    >>> framework_family("TensorRT-LLM v0.14 + Triton tensorrtllm_backend"), framework_family("vLLM 0.10")
    ('tensorrt-llm', 'vllm')
    """
    words = name.strip().lower().split()
    return words[0].strip("(),;") if words else ""


def _number(table: dict, key: str, where: str, lo: float, hi: float) -> float:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise bad_value(key, value, f"a number in [{lo:g}, {hi:g}]", where=where)
    return float(value)


_RANGES = {"gemm_tokens_half": (0.0, 1e6), "moe_tokens_half": (0.0, 1e6), "allreduce_overhead_s": (0.0, 1e-2), "tp_loss": (0.0, 1.0),
           "attn_prefill_eff": (1e-4, 2.0), "step_overhead_s": (0.0, 1.0),
           "token_overhead_s": (0.0, 1e-2), KERNEL_FIELD: (0.0, 1e-3), CONTEXT_KERNEL_FIELD: (0.0, 1e-3)}


def _fields(table: dict, allowed: tuple[str, ...], where: str, required: bool) -> dict[str, float]:
    unknown = [k for k in table if k not in allowed + ("source",)]
    if unknown:
        raise bad_value(unknown[0], table[unknown[0]], f"one of {', '.join(allowed)}, source", where=where)
    missing = [k for k in allowed if k not in table]
    if required and missing:
        raise InputError(f"{where}: missing field {missing[0]} (a profile's table needs {', '.join(allowed)})")
    return {k: _number(table, k, where, *_RANGES.get(k, (1e-4, 1.0))) for k in allowed if k in table}


def parse_profile(text: str, name: str) -> Profile:
    """Parse and check a profile file's text (``name`` for messages); raises InputError."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{name}: not a valid TOML profile ({exc})") from None
    head = doc.get("profile", {})
    entries, sources = {}, {}
    for dev, formats in doc.get("efficiency", {}).items():
        for fmt, table in formats.items():
            entries[(dev, fmt)] = _fields(table, FIELDS, f"{name} [efficiency.{dev}.{fmt}]", False)
            sources[(dev, fmt)] = str(table.get("source", ""))
    fw = dict(doc.get("framework", {}))
    kernel_source = str(fw.pop("kernel_s_source", ""))
    kernel = _fields({k: fw.pop(k) for k in (KERNEL_FIELD, CONTEXT_KERNEL_FIELD) if k in fw},
                     (KERNEL_FIELD, CONTEXT_KERNEL_FIELD), f"{name} [framework]", False)
    sched = doc.get("scheduler", {})
    budget = _number(sched, "token_budget", f"{name} [scheduler]", 64.0, 1e6) if "token_budget" in sched else 0.0
    return Profile(name=str(head.get("name", Path(name).stem)), token_budget=budget, framework=str(head.get("framework", "")),
                   source=str(head.get("source", "")),
                   overheads={**_fields(fw, FRAMEWORK_FIELDS, f"{name} [framework]", True), **kernel},
                   kernel_source=kernel_source,
                   default=_fields(doc.get("default", {}), FIELDS, f"{name} [default]", True), entries=entries,
                   sources=sources)


@cache
def packaged_profile(file: str = SEED) -> Profile:
    """A profile shipped in sweepkit/catalogue (the seed table by default)."""
    text = resources.files("sweepkit.catalogue").joinpath(file).read_text(encoding="utf-8")
    return parse_profile(text, f"sweepkit:{file}")


def load_profile(path: str | Path) -> Profile:
    """A profile file from ``path``; raises InputError naming the file when it is missing or malformed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise InputError(f"{path}: no such profile file") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text (TOML) file") from None
    return parse_profile(text, str(path))


def profile_for(framework: str) -> Profile:
    """The shipped fitted profile of ``framework`` (any spelling :func:`framework_key` maps), else the seed."""
    file = SHIPPED.get(framework_key(framework))
    return packaged_profile(file) if file and resources.files("sweepkit.catalogue").joinpath(file).is_file() \
        else packaged_profile()


def _value(v) -> str:
    return repr(float(v)) if isinstance(v, (int, float)) else '"' + str(v).replace('"', "'") + '"'


def profile_toml(p: Profile, comment: str = "") -> str:
    """``p`` in the profile file format (:func:`parse_profile` reads it back)."""
    lines = [f"# {c}" for c in comment.splitlines()]
    lines += ["[profile]", f"name = {_value(p.name)}", f"framework = {_value(p.framework)}",
              f"source = {_value(p.source)}", "", "[framework]"]
    lines += [f"{k} = {_value(p.overheads[k])}" for k in FRAMEWORK_FIELDS]
    if KERNEL_FIELD in p.overheads:
        lines += [f"{KERNEL_FIELD} = {_value(p.overheads[KERNEL_FIELD])}",
                  f"kernel_s_source = {_value(p.kernel_source)}"]
    if CONTEXT_KERNEL_FIELD in p.overheads:
        lines.append(f"{CONTEXT_KERNEL_FIELD} = {_value(p.overheads[CONTEXT_KERNEL_FIELD])}")
    lines += ["", "[default]"]
    lines += [f"{k} = {_value(p.default[k])}" for k in FIELDS]
    if p.token_budget:
        lines += ["", "[scheduler]", f"token_budget = {_value(p.token_budget)}"]
    for (dev, fmt), table in sorted(p.entries.items()):
        lines += ["", f'[efficiency."{dev}".{fmt}]'] + [f"{k} = {_value(v)}" for k, v in table.items()]
        if p.sources.get((dev, fmt)):
            lines.append(f"source = {_value(p.sources[(dev, fmt)])}")
    return "\n".join(lines) + "\n"
