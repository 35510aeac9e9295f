"""What a measured lever pair changes, which of it sweepkit can express, and the flags a row was served with.

A row's serving flags are the ``flags:`` part of its ``notes`` (as the sources list them: ``--async-scheduling
--max-num-batched-tokens 4096``). Those the steady state (:mod:`sweepkit.validation.steady`) prices:

    --max-num-batched-tokens N, --chunked-prefill-size N     step token budget:  N_tok = N_fit x N / N_default
    --max-num-seqs N, --max-running-requests N              batch cap:          b_max = b_fit x N / b_default
    --async-scheduling                                       host work overlaps the device's:
                                                             t_step = max(t_device, t_host), not their sum

where N_fit, b_fit are what the row's profile prices the framework's defaults with, and N_default,
b_default the framework's own defaults on the row's device (:func:`scheduler_defaults`): a stated setting
moves the priced one by its ratio to the default, so a row served with the defaults is priced as before.

A pair (a ``:with`` and a ``:without`` row, sweepkit.validation.summary) changes one or more *parts*
(:func:`lever_parts`): the framework, the layout (tp, GPUs, dp, ep, pp), the KV or weight format, the
scheduler settings, asynchronous scheduling, a speculative draft, prefix caching. Its *family* is the parts
joined by ``+``; levers a source names only in its ``lever`` text (two-batch overlap, cache-aware routing,
expert balance: :data:`NAMED`) are parts too; expert balance is priced where the ``:with`` side is a simulated
perfect balance (:func:`perfectly_balanced`: I = 1 against the layout's imbalance), two-batch overlap where one
side runs it and the other not (:func:`two_batch_overlap`). A pair is *expressed* when
every part is one the model prices and both sides are priced the
same way (both by the steady state, or both by the serving engine); otherwise :func:`pair_status` says
which part is not, and why, and the pair's predicted change is not reported.

References:
  vLLM engine defaults per device: github.com/vllm-project/vllm, vllm/engine/arg_utils.py
  (``_set_default_args``: 8,192 batched tokens and 1,024 sequences for the OpenAI server on GPUs of >= 70 GiB
  other than A100; 2,048 and 256 otherwise; PR #17885 for the A100 exception).
  vLLM ``--async-scheduling`` (v0.10+): the scheduler prepares step k + 1 while step k runs on the device
  (docs.vllm.ai, engine arguments).
"""

from __future__ import annotations

import re

from sweepkit.catalogue.efficiency import SHIPPED, framework_family, framework_key, profile_for
from sweepkit.errors import bad_value
from sweepkit.validation.measurements import Measurement

GIB = 2.0 ** 30
FLAGS = re.compile(r"flags:\s*([^;]*)")
BUDGET_FLAGS = ("max-num-batched-tokens", "chunked-prefill-size", "max-num-tokens")
CAP_FLAGS = ("max-num-seqs", "max-running-requests", "max-batch-size")
SPECULATIVE = re.compile(r"speculative|eagle|\bmtp\b|draft|num-steps", re.I)
TBO = re.compile(r"two-batch overlap|\btbo\b", re.I)
NAMED = ((TBO, "two-batch overlap", "the sides run it alike (the :with side's framework must name TBO)"),
         (re.compile(r"cache-aware|load balancer|router", re.I), "routing",
          "prefix-cache hits per data-parallel worker are not modelled"),
         (re.compile(r"\beplb\b|expert distribution", re.I), "expert balance",
          "the layouts route tokens to experts uniformly"))
"""Levers a source names only in its ``lever`` text: (pattern, part, why it is not expressed)."""
EXPRESSED = "expressed"


def two_batch_overlap(m: Measurement) -> bool:
    """Whether the row ran two-batch overlap: its framework names it ("TBO", "two-batch overlap"), unless it is
    the ``:without`` side of a pair whose lever names it (an ablation states the framework once for both
    sides).

    Example:
      LMSYS's decode ablation, framework "SGLang (... + EPLB + TBO)", lever "two-batch overlap (TBO) on vs
      off:without": False; the same row's ``:with`` side: True (tests/validation/test_levers.py).
    """
    if m.side == "without" and TBO.search(m.lever.rsplit(":", 1)[0]):
        return False
    return TBO.search(m.framework or "") is not None


def flags(m: Measurement) -> str:
    """The row's serving flags as its source lists them ('' when ``notes`` names none)."""
    found = FLAGS.search(m.notes or "")
    return found.group(1).strip() if found else ""


def stated(m: Measurement, names: tuple[str, ...]) -> float | None:
    """The number a flag of ``names`` sets in the row's flags (``--name N`` or ``--name=N``), None if unset."""
    for name in names:
        found = re.search(rf"--{re.escape(name)}[ =](\d+)", flags(m).replace("_", "-"))
        if found:
            return float(found.group(1))
    return None


def stated_kv_free_fraction(m: Measurement) -> float | None:
    """f_free a TensorRT-LLM row states (``--kv_cache_free_gpu_mem_fraction F``), None where it states none or
    the row is another framework's (vLLM's ``--gpu-memory-utilization`` is a share of the whole memory, not of
    what the weights leave).

    TensorRT-LLM sizes its KV pool per GPU as F x (memory - the peak of its profiling pass) (``cal_max_tokens``,
    tensorrt_llm/_torch/pyexecutor/_util.py), F = 0.9 unless stated.

    Example:
      ``flags: --tp 8 --ep 8 --max_batch_size 896 --kv_cache_free_gpu_mem_fraction 0.93`` gives 0.93.

    Raises:
      InputError: the stated fraction is not in (0, 1].
    """
    if framework_family(m.framework) != "tensorrt-llm":
        return None
    found = re.search(r"--kv-cache-free-gpu-mem-fraction[ =]([0-9.eE+-]+)", flags(m).replace("_", "-"))
    if not found:
        return None
    try:
        value = float(found.group(1))
    except ValueError:
        value = float("nan")
    if not 0.0 < value <= 1.0:
        raise bad_value("notes: --kv_cache_free_gpu_mem_fraction", found.group(1), "a number in (0, 1]",
                        where=f"{m.file or m.source} row {m.row}")
    return value


def scheduler_defaults(m: Measurement) -> tuple[float, float] | None:
    """(token budget, batch cap) the row's framework uses by default on its device, None when not known.

    vLLM's OpenAI server: 8,192 tokens and 1,024 sequences on a GPU of >= 70 GiB other than A100, else 2,048
    and 256 (vllm/engine/arg_utils.py). SGLang: a chunked-prefill size of 2,048 tokens on a GPU of < 35 GiB,
    8,192 below 160 GiB, 16,384 above (python/sglang/srt/server_args.py, v0.4-v0.5; per replica: with DP
    attention each rank takes 1 / dp of it); its running-request cap follows the KV pool and is given as 0
    (not known: the profile's cap is kept, and a stated cap is not read).

    Example:
      >>> from sweepkit.validation import parse_measurements
      >>> m = parse_measurements("source,device,model,metric,value,unit,framework\\n"
      ...                        "s,A100,llama-3.1-8b,tpot,1,s,vLLM v0.11.0\\n", "demo.csv")[0]
      >>> scheduler_defaults(m)
      (2048.0, 256.0)
    """
    key = framework_key(m.framework)
    if key not in ("vllm", "sglang"):
        return None
    from sweepkit.catalogue import get_device

    hbm = get_device(m.device).hbm_capacity_bytes
    if key == "sglang":
        return (2048.0 if hbm < 35 * GIB else 8192.0 if hbm < 160 * GIB else 16384.0), 0.0
    big = hbm >= 70 * GIB and not m.device.upper().startswith("A100")
    return (8192.0, 1024.0) if big else (2048.0, 256.0)


def scheduler_scales(m: Measurement) -> tuple[float, float]:
    """(N / N_default, b / b_default) of the row's stated token budget and batch cap (1 where not stated or
    the default is not known)."""
    defaults = scheduler_defaults(m)
    if defaults is None:
        return 1.0, 1.0
    budget, cap = stated(m, BUDGET_FLAGS), stated(m, CAP_FLAGS)
    return ((1.0 if budget is None else budget / defaults[0]),
            (1.0 if cap is None or not defaults[1] else cap / defaults[1]))


def per_rank_settings(m: Measurement, ranks: float) -> tuple[float, float]:
    """(N_tok, b_max) of one replica a TensorRT-LLM row states per rank, 0 where it states none.

    trtllm-bench and trtllm-serve take ``--max_num_tokens`` and ``--max_batch_size`` per rank: under attention
    data parallelism each of the replica's ``ranks`` attention ranks schedules its own batch, so

        N_tok = ranks x max_num_tokens,   b_max = ranks x max_batch_size

    (ranks = 1 without attention DP: the tensor-parallel group runs one batch). TensorRT-LLM's own defaults
    are not among :func:`scheduler_defaults` (the shipped profile prices rows that state none), so these are
    absolute settings, not ratios.

    Args:
      m: the row; its ``framework`` and the ``flags:`` of its notes are read.
      ranks: attention data-parallel ranks of its replica (:mod:`sweepkit.validation.row_layout`).

    Returns:
      (tokens per step, running requests) per replica; 0 for a setting not stated or another framework.

    Example:
      DeepSeek-R1 FP4 on 8 B200, ``--tp 8 --ep 8 --max_batch_size 896 --max_num_tokens 2048`` with attention
      DP: (16384, 7168), the 7,168 the run's ``--concurrency`` keeps in flight (tests/validation/test_levers.py).

    References:
      NVIDIA/TensorRT-LLM docs/source/blogs/Best_perf_practice_on_DeepSeek-R1_in_TensorRT-LLM.md
      ("--max_batch_size: Max batch size in each rank").
    """
    if framework_key(m.framework) not in ("tensorrt-llm", "tensorrt-llm-gptsession"):
        return 0.0, 0.0
    budget, cap = stated(m, ("max-num-tokens",)), stated(m, ("max-batch-size",))
    return (0.0 if budget is None else budget * ranks), (0.0 if cap is None else cap * ranks)


def host_overlap(m: Measurement) -> bool:
    """Whether the row's host work overlaps its device work (vLLM's ``--async-scheduling``; SGLang's overlap
    scheduler, named in a ``:with`` row's lever)."""
    named = m.side == "with" and re.search(r"overlap scheduling", m.lever, re.I) is not None
    return "--async-scheduling" in flags(m).replace("_", "-") or named


def prefill_first(m: Measurement) -> bool:
    """Whether the row's scheduler runs a new prefill batch before any decode step (SGLang without
    ``--enable-mixed-chunk``; :mod:`sweepkit.validation.prefill_first`)."""
    return framework_key(m.framework) == "sglang" and "--enable-mixed-chunk" not in flags(m).replace("_", "-")


def _loaded_profile(framework: str) -> bool:
    key = framework_key(framework)
    return key in SHIPPED and bool(profile_for(framework).token_budget)


def perfectly_balanced(m: Measurement) -> bool:
    """Whether the row's lever puts it on the side of a simulated perfect expert balance (LMSYS's "simulated perfect
    EPLB vs default expert distribution:with": random expert selection, priced at I = 1)."""
    condition, _, side = (m.lever or "").rpartition(":")
    return side == "with" and re.search(r"perfect (EPLB|balance)", condition.split(" vs ")[0], re.I) is not None


def lever_parts(w: Measurement, wo: Measurement) -> list[tuple[str, str]]:
    """[(part, why it is not expressed or '')] of what differs between the ``:with`` row ``w`` and the
    ``:without`` row ``wo`` (module docstring), in a fixed order."""
    parts: list[tuple[str, str]] = []
    fw, fwo = w.framework.split()[:1], wo.framework.split()[:1]
    if fw != fwo:
        missing = [f for f in (w.framework, wo.framework) if not _loaded_profile(f)]
        parts.append(("framework", f"no loaded-row profile for {missing[0].split()[0]} (its own efficiency is "
                                   "what the switch changes)" if missing else ""))
    if (w.tp, w.gpus, w.dp, w.ep, w.pp) != (wo.tp, wo.gpus, wo.dp, wo.ep, wo.pp):
        parts.append(("layout", ""))
    if w.kv_format != wo.kv_format:
        parts.append(("kv format", ""))
    if (w.weight_format, w.compute_format) != (wo.weight_format, wo.compute_format):
        parts.append(("weight format", ""))
    if scheduler_scales(w) != scheduler_scales(wo):
        parts.append(("scheduler", ""))
    if host_overlap(w) != host_overlap(wo):
        parts.append(("async scheduling", ""))
    name = w.lever.rsplit(":", 1)[0]
    # a simulated perfect balance is priced (I = 1 against the layout's imbalance): the expert-balance lever then is
    told = {"expert balance": perfectly_balanced(w), "two-batch overlap": two_batch_overlap(w) != two_batch_overlap(wo)}
    parts += [(part, "" if told.get(part) else why) for pattern, part, why in NAMED if pattern.search(name)]
    if w.draft != wo.draft or SPECULATIVE.search(flags(w)) or SPECULATIVE.search(w.lever.split(":")[0]):
        parts.append(("speculative", "needs the draft's acceptance, which the source does not give"))
    if "prefix-caching" in flags(w).replace("_", "-") and "prefix-caching" not in flags(wo).replace("_", "-"):
        parts.append(("prefix caching", "the benchmark's prompt overlap is not stated"))
    return parts


def lever_family(w: Measurement, wo: Measurement) -> str:
    """The pair's parts joined by '+' ('none' when the rows differ in nothing sweepkit reads)."""
    return "+".join(p for p, _ in lever_parts(w, wo)) or "none"


def pair_status(w: Measurement, wo: Measurement, priced_w: str, priced_wo: str) -> str:
    """:data:`EXPRESSED`, or ``not expressed: ...`` naming what is not (module docstring). ``priced_w`` and
    ``priced_wo`` say how each side is priced ('' when not modelled; 'steady state: vllm', 'serving engine:
    reference', ...)."""
    why = [f"{p}: {r}" for p, r in lever_parts(w, wo) if r]
    if not priced_w or not priced_wo:
        why.append("a side is not modelled")
    elif priced_w.split(":")[0] != priced_wo.split(":")[0]:
        why.append(f"sides priced apart ({priced_w.split(':')[0]} / {priced_wo.split(':')[0]})")
    elif priced_w.startswith("serving engine") and {"scheduler", "async scheduling"} & {p for p, _ in lever_parts(w, wo)}:
        why.append("scheduler flags are priced by the steady state only")
    if lever_family(w, wo) == "none":
        why.append("the rows differ in nothing the model reads")
    return "not expressed: " + "; ".join(why) if why else EXPRESSED


def annotate_pairs(points: list[Measurement], table: list[dict]) -> None:
    """Set ``lever_family`` and ``pair_status`` on every ``:with`` row of ``table`` (one dict per point, with
    its ``priced_by``) that has a ``:without`` row of the same pair id, metric and latency statistic; other
    rows get ''."""
    from sweepkit.validation.measurements import LATENCIES

    def key(m: Measurement, pid: str) -> tuple:
        return pid, m.metric, (str(m.percentile) if m.metric in LATENCIES else "")

    without = {}
    for i, m in enumerate(points):
        if m.side == "without":
            for pid in m.pairs:
                without.setdefault(key(m, pid), i)
    for i, m in enumerate(points):
        table[i]["lever_family"], table[i]["pair_status"] = "", ""
        if m.side != "with":
            continue
        j = next((without[key(m, pid)] for pid in m.pairs if key(m, pid) in without), None)
        if j is not None:
            table[i]["lever_family"] = lever_family(m, points[j])
            table[i]["pair_status"] = pair_status(m, points[j], table[i]["priced_by"], table[j]["priced_by"])
