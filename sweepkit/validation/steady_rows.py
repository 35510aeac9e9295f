"""The rows the steady state prices (:mod:`sweepkit.validation.steady`), stacked as arrays: :class:`RowInputs`.

:func:`row_inputs` turns :class:`~sweepkit.validation.measurements.Measurement` rows into one
:class:`RowInputs` pytree (leading axis: rows), each row's scalars read from what it states:

    c      = concurrency, else R when all R requests arrive at once (request_rate = inf, or a max-throughput
             row, whose requests are all queued at t = 0), else inf
    R      = requests of such a burst (no concurrency stated), else 0 (the steady state alone)
    f_free = the KV free-memory fraction the row states, else its framework's (:func:`kv_free_fraction`), 0 for
             the engine's rule

A decode pool's node test (:func:`decode_only`) states its batch per GPU b_gpu: c = b_gpu x GPUs; a prefill
pool's (:func:`prefill_only`) its prompts per GPU in one step: c = prompts x GPUs. A row with
expert parallelism or attention data parallelism on a mixture-of-experts model carries its
:class:`~sweepkit.costmodel.layout.Layout` (:func:`sweepkit.validation.row_layout.row_layout`; two-batch
overlap where the framework names it, :func:`two_batch_overlap`), any other row the identity layout over its
tp GPUs. The scheduler flags (stated token budget and batch cap, asynchronous scheduling, prefill-first) come
from :mod:`sweepkit.validation.levers`; what the row measures from :data:`METRIC_KINDS`.

Example:
  A row at concurrency 64 gives c = 64 and R = 0; a burst of 1,000 requests (request_rate = inf, no
  concurrency) gives c = R = 1,000; a row with neither, c = inf and R = 0 (:func:`concurrency`,
  :func:`burst_requests`).

References:
  TensorRT-LLM kv_cache_free_gpu_mem_fraction (github.com/NVIDIA/TensorRT-LLM,
  docs/source/performance/perf-benchmarking.md); LMSYS, "Deploying DeepSeek with PD Disaggregation and
  Large-scale Expert Parallelism on 96 H100 GPUs", 2025 (lmsys.org/blog/2025-05-05-large-scale-ep/).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.catalogue import get_device, get_format, get_model
from sweepkit.catalogue.efficiency import framework_family
from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays, device_arrays, model_arrays
from sweepkit.costmodel.layout import IMBALANCE, IMBALANCE_EPLB, Layout, make_layout
from sweepkit.validation.levers import (host_overlap, per_rank_settings, perfectly_balanced, prefill_first,
                                       scheduler_defaults, scheduler_scales, stated_kv_free_fraction,
                                       two_batch_overlap)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class RowInputs:
    """One max-throughput row as scalars: device, model, tp (devices per replica), replicas, I and O
    (tokens), bytes per weight and KV value, the format speed-up k, the batch cap, the step token budget,
    f_free (0: the serving engine's KV rule), the concurrency c (requests; inf for a max-throughput row),
    the metric the row measures (:data:`METRIC_KINDS`), the row's stated token budget and batch cap as
    ratios to its framework's defaults (1: the defaults) and whether its host work overlaps the device's
    (1: ``--async-scheduling``; :mod:`sweepkit.validation.levers`), whether its scheduler runs prefills
    first (1: :mod:`sweepkit.validation.prefill_first`); ``layout``: the replica's EP / attention-DP
    layout (the identity, dp = ep = r_kv = 1, for a replica of tp GPUs) and ``laid`` 1 where the row has one;
    ``decode_only`` 1 for a decode pool's node test (:func:`decode_only`: c its rows, O unused), ``prefill_only`` 1
    for a prefill pool's (:func:`prefill_only`: c its prompts in one step, O unused)."""

    device: DeviceArrays
    model: ModelArrays
    tp: jax.Array
    replicas: jax.Array
    isl: jax.Array
    osl: jax.Array
    weight_bytes: jax.Array
    kv_bytes: jax.Array
    compute_speedup: jax.Array
    batch_cap: jax.Array
    token_budget: jax.Array
    kv_free_fraction: jax.Array
    concurrency: jax.Array
    metric_kind: jax.Array
    budget_scale: jax.Array
    cap_scale: jax.Array
    host_overlap: jax.Array
    framework_budget: jax.Array
    framework_cap: jax.Array
    burst_requests: jax.Array
    prefill_first: jax.Array
    layout: Layout
    laid: jax.Array
    decode_only: jax.Array
    prefill_only: jax.Array
    waves: jax.Array
    """1 for a max-throughput row of a stated dataset size (:func:`burst_requests` > 0): its fixed-length requests
    run in waves (:func:`sweepkit.validation.steady.dataset_waves`); 0 otherwise."""


KV_FREE_FRACTION = {"tensorrt-llm": 0.9}
"""f_free per framework (:func:`~sweepkit.catalogue.efficiency.framework_family`: behind Triton or in
gptSessionBenchmark too): TensorRT-LLM's kv_cache_free_gpu_mem_fraction default (docs/source/performance/
perf-benchmarking.md, github.com/NVIDIA/TensorRT-LLM) and the Triton backend's ``kv_cache_free_gpu_mem_fraction``
(default 0.9, github.com/triton-inference-server/tensorrtllm_backend docs/model_config.md); frameworks not listed
use the engine's rule."""


def kv_free_fraction(m) -> float:
    """f_free of a row: the fraction it states (``--kv_cache_free_gpu_mem_fraction``,
    :func:`sweepkit.validation.levers.stated_kv_free_fraction`), else its framework's default
    (:data:`KV_FREE_FRACTION`), else 0 (the serving engine's rule).

    Example:
      A TensorRT-LLM row stating ``--kv_cache_free_gpu_mem_fraction 0.93`` gives 0.93; one stating none 0.9; a
      vLLM row 0 (tests/validation/test_kv_free_fraction.py).
    """
    stated = stated_kv_free_fraction(m)
    return stated if stated is not None else KV_FREE_FRACTION.get(framework_family(m.framework), 0.0)


METRIC_KINDS = {"max_output_throughput": 0, "output_throughput": 0, "total_throughput": 1, "tpot": 2, "itl": 2}
"""Metric -> ``metric_kind`` (0 output tokens/s, 1 total tokens/s, 2 seconds per output token)."""


def decode_only(m) -> bool:
    """Whether ``m`` is a decode pool's node test: ``scenario`` starting "decode-only", no output length, its
    cached context as ``input_tokens`` and its batch per GPU as ``concurrency`` (as LMSYS states them), and no
    speculative decoding named (a simulated MTP run needs the draft's acceptance)."""
    scenario = (m.scenario or "").lower()
    return (scenario.startswith("decode-only") and "mtp" not in scenario and m.output_tokens is None
            and bool(m.input_tokens) and m.concurrency is not None and m.metric == "output_throughput")


def prefill_only(m) -> bool:
    """Whether ``m`` is a prefill pool's node test: ``scenario`` starting "prefill-only", no output length, its
    prompt length as ``input_tokens``, the prompts one step prefills per GPU as ``concurrency`` (LMSYS states the
    tokens per GPU: 16,384 = 4 prompts of 4,096) and the input tokens/s as ``total_throughput``."""
    scenario = (m.scenario or "").lower()
    return (scenario.startswith("prefill-only") and m.output_tokens is None and bool(m.input_tokens)
            and m.concurrency is not None and m.metric == "total_throughput")


def node_test(m) -> bool:
    """A decode or prefill pool's node test (:func:`decode_only`, :func:`prefill_only`): the steady state under a
    profile alone prices it (the serving engine has no output length to run)."""
    return decode_only(m) or prefill_only(m)


def all_at_once(m) -> bool:
    """Whether every request of the row arrives at t = 0: ``request_rate = inf``, or a ``max_output_throughput``
    row (the metric is defined with every request queued at once, as trtllm-bench throughput runs its dataset)."""
    return m.metric == "max_output_throughput" or (m.request_rate is not None and np.isinf(m.request_rate))


def concurrency(m) -> float:
    """c of a row: its ``concurrency``, else its ``requests`` when all arrive at once (:func:`all_at_once`),
    else inf (a max-throughput row or a burst of an unstated number of requests); a decode-only row's batch
    per GPU times its GPUs (:func:`decode_only`)."""
    if node_test(m):
        return float(m.concurrency) * m.gpus
    if m.concurrency is not None:
        return float(m.concurrency)
    return float(m.requests) if all_at_once(m) and m.requests else float("inf")


def burst_requests(m) -> float:
    """R of a burst row (all requests at once, :func:`all_at_once`, with ``requests`` stated and no
    ``concurrency``), else 0 (the steady state alone: a fixed concurrency, or a burst of an unstated size).

    Example:
      A TensorRT-LLM v0.20 max-throughput row at 128 / 4096 tokens, whose dataset held 1,500 requests, is a burst
      of R = 1,500 (tests/validation/test_burst_rows.py).
    """
    return float(m.requests) if all_at_once(m) and m.requests and m.concurrency is None else 0.0


def _layout(m, dtype) -> tuple[Layout, int, int, bool]:
    """(layout, attention tp, replicas, has a layout) of row ``m`` (:func:`sweepkit.validation.row_layout.row_layout`
    where it has ep or dp > 1 on a mixture-of-experts model, else the identity over tp GPUs)."""
    from sweepkit.validation.row_layout import moe_exchange, row_layout

    device, model = get_device(m.device), get_model(m.model)
    if model.is_moe and max(m.ep, m.dp) > 1:
        lay = row_layout(m)
        per_node = m.gpus // lay.nodes if lay.nodes else None
        imb = 1.0 if perfectly_balanced(m) else IMBALANCE_EPLB if lay.redundant_experts else IMBALANCE
        return (make_layout(device, model, lay.tp, dp=lay.dp, ep=lay.ep, imbalance=imb,
                            compute_format=m.compute_format, gpus_per_node=per_node,
                            redundant_experts=lay.redundant_experts, two_batch_overlap=two_batch_overlap(m),
                            exchange=moe_exchange(m), dtype=dtype),
                lay.tp, lay.instances, True)
    ident = make_layout(device, model, m.tp, dtype=dtype)
    return dataclasses.replace(ident, kv_replicas=jnp.asarray(1.0, dtype)), m.tp, m.gpus // m.tp, False


def row_inputs(points, batch_cap: float, token_budget: float, dtype=jnp.float64) -> RowInputs:
    """Stack :class:`~sweepkit.validation.measurements.Measurement` rows (leading axis) of the metrics in
    :data:`METRIC_KINDS`; each row's f_free from its framework (:data:`KV_FREE_FRACTION`), c from
    :func:`concurrency`; its stated scheduler flags from :mod:`sweepkit.validation.levers`; its layout from
    :func:`sweepkit.validation.row_layout.row_layout`."""
    devs = [get_device(m.device) for m in points]
    lays = [_layout(m, dtype) for m in points]

    def col(values):
        return jnp.asarray(np.asarray(values, dtype=np.float64), dtype=dtype)

    return RowInputs(
        device=device_arrays(devs, dtype), model=model_arrays([get_model(m.model) for m in points], dtype),
        tp=col([t for _, t, _, _ in lays]), replicas=col([r for _, _, r, _ in lays]),
        isl=col([m.input_tokens for m in points]), osl=col([m.output_tokens or 1.0 for m in points]),
        weight_bytes=col([get_format(m.weight_format).bytes_per_value for m in points]),
        kv_bytes=col([get_format(m.kv_format).bytes_per_value for m in points]),
        compute_speedup=col([d.speedup(m.compute_format) for d, m in zip(devs, points)]),
        batch_cap=col([batch_cap] * len(points)), token_budget=col([token_budget] * len(points)),
        kv_free_fraction=col([kv_free_fraction(m) for m in points]),
        concurrency=col([concurrency(m) for m in points]),
        metric_kind=col([METRIC_KINDS.get(m.metric, 0) for m in points]),
        budget_scale=col([scheduler_scales(m)[0] for m in points]),
        cap_scale=col([scheduler_scales(m)[1] for m in points]),
        host_overlap=col([host_overlap(m) for m in points]),
        framework_budget=col([(scheduler_defaults(m) or per_rank_settings(m, float(lay.dp)))[0]
                              for m, (lay, _, _, _) in zip(points, lays)]),
        framework_cap=col([(scheduler_defaults(m) or per_rank_settings(m, float(lay.dp)))[1]
                           for m, (lay, _, _, _) in zip(points, lays)]),
        burst_requests=col([burst_requests(m) for m in points]),
        prefill_first=col([prefill_first(m) for m in points]),
        layout=jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[lay for lay, _, _, _ in lays]),
        laid=col([float(has) for _, _, _, has in lays]), decode_only=col([decode_only(m) for m in points]),
        prefill_only=col([prefill_only(m) for m in points]),
        waves=col([float(m.metric == "max_output_throughput" and burst_requests(m) > 0) for m in points]))
