"""A max-throughput row in closed form: the steady state of fixed-length requests, all queued at once.

For one replica holding C KV token positions, a batch cap b_max and a step token budget N_tok, with ISL I and
OSL O, the replica runs n requests at once,

    n = min(b_max, C / (I + O), N_tok / (1 + I / O))

with C the KV positions the framework allocates: f_free (HBM x tp - weights) / kv per position where the
framework sizes its cache as a fraction f_free of the memory left after the weights (TensorRT-LLM's
kv_cache_free_gpu_mem_fraction, 0.9 by default), else the serving engine's rule
(:func:`sweepkit.costmodel.memory.kv_capacity_tokens`, 0.9 of HBM less the weights; f_free = 0)
(each request holds up to I + O positions; every step gives each running request one output token and
prefills, on average, n I / O prompt tokens of the requests that replace the finished ones). One step
carries n decode rows at a mean context of I + O / 2 and the prompt chunks of n / O whole prompts:

    decode  = decode_work(n (I + O / 2), n)        prefill: T = n I / O, A = (n / O) I (I + 1), K = n I / O
    throughput = replicas x n / t_step            (output tokens/s)

t_step is the measured profile's step time (:func:`sweepkit.costmodel.efficiency.step_time`) or the
reference roofline's target pass over the combined work (:func:`reference_throughput`, what the serving
engine prices each step with). Written for ONE row; ``jax.vmap`` stacks rows; differentiable in the
efficiencies (n depends on memory only).

A row with expert parallelism or attention data parallelism (:mod:`sweepkit.validation.row_layout`) is one
replica of tp x dp GPUs under its :class:`~sweepkit.costmodel.layout.Layout`: C is the layout's KV capacity
(:func:`sweepkit.costmodel.layout.layout_kv_capacity_tokens`: each DP rank holds its own requests' KV), and
t_step the profiled pass of that replica (:func:`sweepkit.costmodel.profiled.measured_pass_s`: the layout's
extra work, its all-to-alls at the profile's link efficiency). b_max and N_tok stay per replica: SGLang
divides ``--chunked-prefill-size`` and ``--max-running-requests`` over its DP attention ranks
(python/sglang/srt/server_args.py, github.com/sgl-project/sglang). Any other row carries the identity layout
(dp = ep = r_kv = 1), under which t_step is exactly :func:`sweepkit.costmodel.efficiency.step_time`.

A loaded row (a fixed concurrency c, or a burst of c requests: ``request_rate = inf``) runs at most c / replicas
requests per replica, n = min(c / replicas, ...) above; its steady step gives

    output tokens/s = replicas n / t_step,  total tokens/s = output x (I + O) / O,  TPOT = ITL = t_step

(Little's law: c requests each in flight for about O steps of t_step complete c / (O t_step) per second).
:func:`row_value` returns the one a row measures (``metric_kind``, :data:`METRIC_KINDS`).

References:
  Little, "A Proof for the Queuing Formula L = lambda W", Operations Research 9(3), 1961;
  trtllm-bench throughput (github.com/NVIDIA/TensorRT-LLM, docs/source/performance/perf-benchmarking.md);
  Agrawal et al., "Sarathi-Serve", OSDI 2024, arXiv:2403.02310 (chunked prefill in decode steps).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.catalogue import get_device, get_format, get_model
from sweepkit.catalogue.efficiency import framework_key
from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays, device_arrays, model_arrays
from sweepkit.costmodel.efficiency import Efficiency
from sweepkit.costmodel.layout import IMBALANCE, IMBALANCE_EPLB, Layout, layout_kv_capacity_tokens, layout_work, make_layout, moe_all_to_all
from sweepkit.costmodel.memory import kv_bytes_per_token, kv_capacity_tokens, resident_bytes
from sweepkit.costmodel.passes import Work, combine, decode_work
from sweepkit.costmodel.profiled import measured_pass_s
from sweepkit.costmodel.steps import Instance, target_pass_cost


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class RowInputs:
    """One max-throughput row as scalars: device, model, tp (devices per replica), replicas, I and O
    (tokens), bytes per weight and KV value, the format speed-up k, the batch cap, the step token budget,
    f_free (0: the serving engine's KV rule), the concurrency c (requests; inf for a max-throughput row) and
    the metric the row measures (:data:`METRIC_KINDS`); ``layout``: the replica's EP / attention-DP layout
    (the identity, dp = ep = r_kv = 1, for a replica of tp GPUs) and ``laid`` 1 where the row has one."""

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
    layout: Layout
    laid: jax.Array


def running(row: RowInputs) -> jax.Array:
    """n = min(b_max, C / (I + O), N_tok / (1 + I / O), c / replicas): requests one replica runs at once
    (>= 1)."""
    absent = jax.tree_util.tree_map(jnp.zeros_like, row.model)
    engine = kv_capacity_tokens(row.device, row.tp, row.model, absent, row.weight_bytes, row.kv_bytes)
    free = row.device.hbm_capacity_bytes * row.tp - resident_bytes(row.model, absent, row.weight_bytes)
    framework = row.kv_free_fraction * free / kv_bytes_per_token(row.model, absent, row.kv_bytes)
    cap = jnp.where(row.kv_free_fraction > 0, jnp.maximum(framework, 0.0), engine)
    laid = layout_kv_capacity_tokens(row.layout, row.device, row.tp * row.layout.dp, row.model, absent,
                                     row.weight_bytes, row.kv_bytes)
    cap = jnp.where(row.laid > 0, laid, cap)
    n = jnp.minimum(jnp.minimum(row.batch_cap, cap / (row.isl + row.osl)),
                    row.token_budget / (1.0 + row.isl / row.osl))
    return jnp.maximum(jnp.minimum(n, row.concurrency / row.replicas), 1.0)


def step_work(row: RowInputs) -> tuple[Work, Work]:
    """(decode rows, prompt chunks) of the mean steady step (module docstring)."""
    n, i, o = running(row), row.isl, row.osl
    prompts = n / o
    return decode_work(n * (i + o / 2.0), n), Work(tokens=prompts * i, attn_pairs=prompts * i * (i + 1.0),
                                                   kv_tokens=prompts * i)


def _instance(row: RowInputs, eff: Efficiency | None) -> Instance:
    absent = jax.tree_util.tree_map(jnp.zeros_like, row.model)
    one = jnp.ones_like(row.tp)
    return Instance(device=row.device, target=row.model, draft=absent, tp=row.tp, pp=one, microbatches=one,
                    weight_bytes=row.weight_bytes, kv_bytes=row.kv_bytes, compute_speedup=row.compute_speedup,
                    gamma=0.0 * one, layout=row.layout, efficiency=eff, pipelined=False)


def step_seconds(row: RowInputs, eff: Efficiency) -> jax.Array:
    """t_step of the mean steady step under ``eff``: the profiled pass of the row's replica (its layout's
    extra work and all-to-alls included; exactly :func:`~sweepkit.costmodel.efficiency.step_time` under the
    identity layout)."""
    decode, prefill = step_work(row)
    inst = _instance(row, eff)
    lay, n = row.layout, row.tp * row.layout.dp
    extra = layout_work(lay, row.model, combine(decode, prefill), row.weight_bytes, row.kv_bytes)
    a2a_s, _ = moe_all_to_all(lay, row.device, row.model, (decode.tokens + prefill.tokens) / n)
    a2a_layers = jnp.where(lay.dp > 1.0, lay.moe_layers, 0.0)
    return measured_pass_s(inst, decode, prefill, extra, (a2a_layers, a2a_s))


def measured_throughput(row: RowInputs, eff: Efficiency) -> jax.Array:
    """Output tokens/s of the row under the measured profile ``eff``: replicas x n / t_step."""
    decode, _ = step_work(row)
    return row.replicas * decode.tokens / step_seconds(row, eff)


def row_value(row: RowInputs, eff: Efficiency) -> jax.Array:
    """What the row measures under ``eff`` (SI): output or total tokens/s, or TPOT / ITL in seconds.

    Example:
      A burst of 8 requests of 1000 in, 1000 out prices TPOT as the step time of 8 decode rows plus
      8 / 1000 of a prompt (tests/validation/test_loaded_rows.py).
    """
    decode, _ = step_work(row)
    t = step_seconds(row, eff)
    out = row.replicas * decode.tokens / t
    total = out * (row.isl + row.osl) / row.osl
    return jnp.where(row.metric_kind == 0, out, jnp.where(row.metric_kind == 1, total, t))


def reference_throughput(row: RowInputs) -> jax.Array:
    """Output tokens/s of the row with the reference roofline (one pass over decode rows and chunks)."""
    decode, prefill = step_work(row)
    cost = target_pass_cost(_instance(row, None), combine(decode, prefill))
    return row.replicas * decode.tokens / cost.t_s


KV_FREE_FRACTION = {"tensorrt-llm": 0.9}
"""f_free per framework key: TensorRT-LLM's kv_cache_free_gpu_mem_fraction default (docs/source/performance/
perf-benchmarking.md, github.com/NVIDIA/TensorRT-LLM); frameworks not listed use the engine's rule."""


METRIC_KINDS = {"max_output_throughput": 0, "output_throughput": 0, "total_throughput": 1, "tpot": 2, "itl": 2}
"""Metric -> ``metric_kind`` (0 output tokens/s, 1 total tokens/s, 2 seconds per output token)."""


def concurrency(m) -> float:
    """c of a row: its ``concurrency``, else its ``requests`` when all arrive at once (``request_rate = inf``),
    else inf (a max-throughput row, or a burst of an unstated number of requests)."""
    if m.concurrency is not None:
        return float(m.concurrency)
    burst = m.request_rate is not None and np.isinf(m.request_rate)
    return float(m.requests) if burst and m.requests else float("inf")


def _layout(m, dtype) -> tuple[Layout, int, int, bool]:
    """(layout, attention tp, replicas, has a layout) of row ``m`` (:func:`sweepkit.validation.row_layout.row_layout`
    where it has ep or dp > 1 on a mixture-of-experts model, else the identity over tp GPUs)."""
    from sweepkit.validation.row_layout import row_layout

    device, model = get_device(m.device), get_model(m.model)
    if model.is_moe and max(m.ep, m.dp) > 1:
        lay = row_layout(m)
        per_node = m.gpus // lay.nodes if lay.nodes else None
        imb = IMBALANCE_EPLB if lay.redundant_experts else IMBALANCE
        return (make_layout(device, model, lay.tp, dp=lay.dp, ep=lay.ep, imbalance=imb,
                            compute_format=m.compute_format, gpus_per_node=per_node,
                            redundant_experts=lay.redundant_experts, dtype=dtype),
                lay.tp, lay.instances, True)
    ident = make_layout(device, model, m.tp, dtype=dtype)
    return dataclasses.replace(ident, kv_replicas=jnp.asarray(1.0, dtype)), m.tp, m.gpus // m.tp, False


def row_inputs(points, batch_cap: float, token_budget: float, dtype=jnp.float64) -> RowInputs:
    """Stack :class:`~sweepkit.validation.measurements.Measurement` rows (leading axis) of the metrics in
    :data:`METRIC_KINDS`; each row's f_free from its framework (:data:`KV_FREE_FRACTION`), c from
    :func:`concurrency`, its layout from :func:`sweepkit.validation.row_layout.row_layout`."""
    devs = [get_device(m.device) for m in points]
    lays = [_layout(m, dtype) for m in points]

    def col(values):
        return jnp.asarray(np.asarray(values, dtype=np.float64), dtype=dtype)

    return RowInputs(
        device=device_arrays(devs, dtype), model=model_arrays([get_model(m.model) for m in points], dtype),
        tp=col([t for _, t, _, _ in lays]), replicas=col([r for _, _, r, _ in lays]),
        isl=col([m.input_tokens for m in points]), osl=col([m.output_tokens for m in points]),
        weight_bytes=col([get_format(m.weight_format).bytes_per_value for m in points]),
        kv_bytes=col([get_format(m.kv_format).bytes_per_value for m in points]),
        compute_speedup=col([d.speedup(m.compute_format) for d, m in zip(devs, points)]),
        batch_cap=col([batch_cap] * len(points)), token_budget=col([token_budget] * len(points)),
        kv_free_fraction=col([KV_FREE_FRACTION.get(framework_key(m.framework), 0.0) for m in points]),
        concurrency=col([concurrency(m) for m in points]),
        metric_kind=col([METRIC_KINDS.get(m.metric, 0) for m in points]),
        layout=jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[lay for lay, _, _, _ in lays]),
        laid=col([float(has) for _, _, _, has in lays]))
