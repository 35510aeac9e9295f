"""A max-throughput row in closed form: the steady state of fixed-length requests, all queued at once.

For one replica holding C KV token positions, a batch cap b_max and a step token budget N_tok, with ISL I and
OSL O, the replica runs n requests at once,

    n = min(b_max, C / (I + O + s), N_tok / (1 + I / O))

with C the KV positions the framework allocates: f_free (HBM x tp - weights) / kv per position where the
framework sizes its cache as a fraction f_free of the memory left after the weights (TensorRT-LLM's
kv_cache_free_gpu_mem_fraction, 0.9 by default), else the serving engine's rule
(:func:`sweepkit.costmodel.memory.kv_capacity_tokens`, 0.9 of HBM less the weights; f_free = 0)
(each request holds up to I + O positions, plus s = s_lin L_lin / kv_token positions of linear-attention state
on a hybrid model, :func:`sweepkit.costmodel.memory.state_positions`, 0 otherwise; every step gives each running
request one output token and prefills, on average, n I / O prompt tokens of the requests that replace the
finished ones). One step
carries n decode rows at a mean context of I + O / 2 and the prompt chunks of n / O whole prompts:

    decode  = decode_work(n (I + O / 2), n)        prefill: T = n I / O, A = (n / O) I (I + 1), K = n I / O
    throughput = replicas x n / t_step            (output tokens/s)

Those prompt tokens come in chunks of the step's budget, as a chunked-prefill scheduler takes them: a share f of
the steps computes p of them beside the decode rows, the others none, t_step = f t(decode, p) + (1 - f)
t(decode, 0) (:mod:`sweepkit.validation.prompt_chunks`; f = 1 where every step needs more than one chunk; under
attention DP the share of steps in which any rank prefills).
Each step's time is the measured profile's (:func:`sweepkit.costmodel.efficiency.step_time`) or the
reference roofline's target pass over the combined work (:func:`reference_throughput`, what the serving
engine prices each step with). Written for ONE row; ``jax.vmap`` stacks rows; differentiable in the
efficiencies (n depends on memory only).

A row with expert parallelism or attention data parallelism (:mod:`sweepkit.validation.row_layout`) is one
replica of tp x dp GPUs under its :class:`~sweepkit.costmodel.layout.Layout`: C is the layout's KV capacity
(:func:`sweepkit.costmodel.layout.layout_kv_capacity_tokens`: each DP rank holds its own requests' KV), and
t_step the profiled pass of that replica (:func:`sweepkit.costmodel.profiled.measured_pass_s`: the layout's
extra work, its all-to-alls at the profile's link efficiency). b_max and N_tok stay per replica: SGLang
divides ``--chunked-prefill-size`` and ``--max-running-requests`` over its DP attention ranks
(python/sglang/srt/server_args.py, github.com/sgl-project/sglang). Under attention DP the step lasts as long as
its busiest rank: the mean step's n / O prompts each run on one rank (at most N_tok / dp tokens a rank), so the
rank-local work prices P_max = max(P / dp, min(P, I, N_tok / dp)) prompt tokens on one rank
(:mod:`sweepkit.costmodel.rank_balance`); a prefill-first row's prompts run in prefill steps of their own, spread
over the ranks. Any other row carries the identity layout
(dp = ep = r_kv = 1), under which t_step is exactly :func:`sweepkit.costmodel.efficiency.step_time`.

A loaded row (a fixed concurrency c, or a burst of c requests: ``request_rate = inf``) runs at most c / replicas
requests per replica, n = min(c / replicas, ...) above; its steady step gives

    output tokens/s = replicas n / t_step,  total tokens/s = output x (I + O) / O,  TPOT = ITL = t_step

(Little's law: c requests each in flight for about O steps of t_step complete c / (O t_step) per second).

A decode-only row (:func:`sweepkit.validation.steady_rows.decode_only`: a disaggregated decode pool's node test, LMSYS's "decode-only node
test (prefill assumed unlimited)", with no output length) states its batch per GPU b_gpu and its cached
context I: every step decodes n = b_gpu x GPUs per replica rows at I cached tokens and prefills nothing,

    decode = decode_work(n I, n),   prefill = 0,   output tokens/s = replicas n / t_step

with n taken as stated (no batch cap, token budget or KV limit: the source ran that batch). A prefill-only row
(:func:`sweepkit.validation.steady_rows.prefill_only`: a prefill pool's node test, LMSYS's 16,384 tokens per GPU
in 4,096-token prompts) prefills its n = prompts per GPU x GPUs per replica prompts of I tokens in one step and
decodes nothing:

    prefill = (T = n I, A = n I (I + 1), K = n I),   decode = 0,   input tokens/s = replicas n I / t_step

A row whose framework names two-batch overlap ("TBO") runs its layout with it (:func:`sweepkit.costmodel.moe_comm.overlapped`).

A burst of R requests all queued at t = 0 (``request_rate = inf`` with ``requests`` stated) is not a steady
state when R is a few times n: its first steps prefill the first n prompts with the whole token budget (the
ramp) and its last O steps drain the last n requests with no prompt left (the tail); :func:`burst` prices
the three phases, which give the steady state as R -> inf; under a prefill-first scheduler (SGLang's default,
:func:`sweepkit.validation.levers.prefill_first`) it runs in waves of whole prefills and then decodes
(:mod:`sweepkit.validation.prefill_first`), and so does any burst whose replica's KV cache holds fewer than two
requests (one request per wave). A max-throughput row of a stated dataset size (trtllm-bench's $num_requests
fixed-length requests) runs in waves of n that finish together (:func:`dataset_waves`). The step token budget and
batch cap are the
framework's defaults on the row's device where :func:`sweepkit.validation.levers.scheduler_defaults` knows
them (vLLM: 8,192 / 1,024, on A100 2,048 / 256), else the profile's fitted budget and the engine's cap; a
TensorRT-LLM row that states ``--max_num_tokens`` / ``--max_batch_size`` (per rank) runs them times its
attention-DP ranks (:func:`sweepkit.validation.levers.per_rank_settings`).

t_step = t_device + t_host, the operator classes and the framework's host time per step; where the row's
host work overlaps the device's (``--async-scheduling``) t_step = max(t_device, t_host). A row's stated token
budget and batch cap scale N_tok and b_max by their ratio to the framework's defaults
(:mod:`sweepkit.validation.levers`).
:func:`row_value` returns the one a row measures (``metric_kind``,
:data:`sweepkit.validation.steady_rows.METRIC_KINDS`); :func:`sweepkit.validation.steady_rows.row_inputs` stacks the rows
(:class:`~sweepkit.validation.steady_rows.RowInputs`).

References:
  Little, "A Proof for the Queuing Formula L = lambda W", Operations Research 9(3), 1961;
  trtllm-bench throughput (github.com/NVIDIA/TensorRT-LLM, docs/source/performance/perf-benchmarking.md);
  Agrawal et al., "Sarathi-Serve", OSDI 2024, arXiv:2403.02310 (chunked prefill in decode steps).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.costmodel.efficiency import Efficiency
from sweepkit.costmodel.layout import layout_work
from sweepkit.costmodel.moe_comm import moe_all_to_all, overlap_microbatches
from sweepkit.costmodel.passes import Work, as_prefill, combine, decode_work
from sweepkit.costmodel.profiled import measured_pass_s
from sweepkit.costmodel.rank_balance import rank_tokens
from sweepkit.costmodel.steps import Instance, target_pass_cost
from sweepkit.validation.prefill_first import prefill_first_burst, prefill_steps, serial
from sweepkit.validation.prompt_chunks import chunked_step_s
from sweepkit.validation.steady_rows import RowInputs
from sweepkit.validation.steady_sizes import (  # the module docstring's C, n, N_tok, b_max
    batch_cap, kv_positions, request_positions, running, token_budget)


def step_work(row: RowInputs, n: jax.Array | None = None) -> tuple[Work, Work]:
    """(decode rows, prompt chunks) of the mean steady step of n running requests (module docstring; default
    :func:`running`); a decode-only row's n rows at I cached tokens and no prompt."""
    n = running(row) if n is None else n
    i, o = row.isl, row.osl
    only, pre = row.decode_only > 0, row.prefill_only > 0
    prompts = jnp.where(only, 0.0, jnp.where(pre, n, n / o))
    rows = jnp.where(pre, 0.0, n)
    return decode_work(rows * jnp.where(only, i, i + o / 2.0), rows), as_prefill(
        Work(tokens=prompts * i, attn_pairs=prompts * i * (i + 1.0), kv_tokens=prompts * i, rows=prompts))


def row_step_time(row: RowInputs, eff: Efficiency) -> jax.Array:
    """t_step of the row's mean steady step under ``eff`` (s): f t(n rows, p prompt tokens) + (1 - f) t(n rows)
    (:func:`sweepkit.validation.prompt_chunks.chunked_step_s`; a node test's :func:`step_work` step), each step
    the device's operator classes plus the host time, or the larger of the two where the host work overlaps
    (``host_overlap``, asynchronous scheduling).

    Example:
      With f = 1 and host_overlap = 0 this is :func:`sweepkit.costmodel.efficiency.step_time` of
      :func:`step_work`; with 1 and a host time below the device time, the device time alone
      (tests/validation/test_levers.py, tests/validation/test_prompt_chunks.py).
    """
    decode, spread = step_work(row)
    step = lambda d, p: _step(row, eff, d, p)  # noqa: E731
    mixed = chunked_step_s(step, decode, running(row), row.isl, row.osl, token_budget(row), prefill_ranks(row))
    return jnp.where((row.decode_only > 0) | (row.prefill_only > 0), step(decode, spread), mixed)


def prefill_ranks(row: RowInputs) -> jax.Array:
    """D of :func:`sweepkit.validation.prompt_chunks.prompt_chunks`: the attention-DP ranks that prefill on their own
    schedules; 1 under a prefill-first scheduler, whose prefill steps batch every rank's waiting prompts."""
    return jnp.where(row.prefill_first > 0, 1.0, row.layout.dp)


def _layout(row: RowInputs):
    """The row's layout, each attention-DP rank scheduling N_tok / dp tokens a step (:func:`token_budget`); under a
    prefill-first scheduler 0: its prompts run in prefill steps of their own that batch every rank's waiting
    prompts, so the mean step spreads them evenly (N_r = 0 gives P_max = P / dp, s = 1)."""
    rank = jnp.where(row.prefill_first > 0, 0.0, token_budget(row) / row.layout.dp)
    return dataclasses.replace(row.layout, rank_budget=rank)


def _instance(row: RowInputs, eff: Efficiency | None) -> Instance:
    absent = jax.tree_util.tree_map(jnp.zeros_like, row.model)
    one = jnp.ones_like(row.tp)
    return Instance(device=row.device, target=row.model, draft=absent, tp=row.tp, pp=one, microbatches=one,
                    weight_bytes=row.weight_bytes, kv_bytes=row.kv_bytes, compute_speedup=row.compute_speedup,
                    gamma=0.0 * one, layout=_layout(row), efficiency=eff, pipelined=False)


def _step(row: RowInputs, eff: Efficiency, decode: Work, prefill: Work) -> jax.Array:
    """The profiled pass of the row's replica over ``decode`` and ``prefill`` (its layout's extra work and
    all-to-alls included; :func:`sweepkit.costmodel.efficiency.step_time` under the identity layout), its host
    time overlapped where ``host_overlap``."""
    inst = _instance(row, eff)
    lay, n = inst.layout, row.tp * row.layout.dp
    extra = layout_work(lay, row.model, combine(decode, prefill), row.weight_bytes, row.kv_bytes)
    tokens = decode.tokens + prefill.tokens
    mb = overlap_microbatches(lay, 1.0, tokens)           # 2 under two-batch overlap: each call moves half
    busiest = rank_tokens(lay.dp, decode, prefill, lay.rank_budget)   # the busiest DP rank's sends, host work
    a2a_s, _ = moe_all_to_all(lay, row.device, row.model, busiest / (mb * n), jnp.where(prefill.tokens > 0.0, 1.0, 0.0),
                              tokens / (mb * n))
    a2a_layers = jnp.where(lay.dp > 1.0, lay.moe_layers, 0.0)
    t = measured_pass_s(inst, decode, prefill, extra, (a2a_layers, a2a_s))
    host = eff.step_overhead_s + eff.token_overhead_s * busiest / lay.dp
    return jnp.where(row.host_overlap > 0, jnp.maximum(t - host, host), t)


def measured_throughput(row: RowInputs, eff: Efficiency) -> jax.Array:
    """Output tokens/s of the row under the measured profile ``eff``: replicas x n / t_step."""
    return row.replicas * running(row) / row_step_time(row, eff)


def burst(row: RowInputs, eff: Efficiency) -> tuple[jax.Array, jax.Array]:
    """(output tokens/s, token-weighted mean TPOT in s) of a burst of R requests (``burst_requests``), all
    queued at t = 0, per replica R_r = R / replicas, run in three phases (module docstring):

        ramp    S_r = n I / p_r steps of n / 2 decode rows and p_r = min(N_tok - n / 2, n I) prompt tokens
        steady  S_s = max(R_r O / n - S_r / 2 - O / 2, 0) steps of the steady step (n rows, n I / O prompt)
        tail    O steps of n / 2 decode rows and no prompt (the last n requests finishing)

    so the decode tokens add up to R_r O; output = R O / (S_r t_r + S_s t_s + O t_tail) and TPOT =
    (S_r n / 2 t_r + S_s n t_s + O n / 2 t_tail) / (R_r O). R -> inf gives the steady state.

    Example:
      1,000 requests of 2,000 in / 100 out under a budget of 8,192 tokens: n = 390, a ramp of 97.6 steps, 157.6
      steady steps and a tail of 100 (tests/validation/test_levers.py).
    """
    n, i, o = running(row), row.isl, row.osl
    r = row.burst_requests / row.replicas
    prompt = jnp.clip(token_budget(row) - n / 2.0, 1.0, n * i)
    s_ramp = n * i / prompt
    s_steady = jnp.maximum(r * o / n - s_ramp / 2.0 - o / 2.0, 0.0)
    half = decode_work(n / 2.0 * (i + o / 2.0), n / 2.0)
    none = Work(tokens=0.0 * n, attn_pairs=0.0 * n, kv_tokens=0.0 * n)
    t_ramp = _step(row, eff, half, as_prefill(Work(tokens=prompt, attn_pairs=prompt * (i + 1.0), kv_tokens=prompt,
                                                   rows=prompt / i)))
    t_tail = _step(row, eff, half, none)
    t_steady = row_step_time(row, eff)
    total_s = s_ramp * t_ramp + s_steady * t_steady + o * t_tail
    tpot = (s_ramp * n / 2.0 * t_ramp + s_steady * n * t_steady + o * n / 2.0 * t_tail) / (r * o)
    # prefill-first: waves of n_w = min(b_max, C / (I + O), R_r) requests (the token budget bounds a step only);
    # a KV cache of fewer than two requests runs them one at a time under any scheduler (n_w = 1)
    held = request_positions(row)
    one_at_a_time = serial(kv_positions(row), i, held - i)
    n_w = jnp.clip(jnp.minimum(batch_cap(row), kv_positions(row) / held), 1.0, jnp.maximum(r, 1.0))
    n_w = jnp.where(one_at_a_time, 1.0, n_w)
    chunk = n_w * i / prefill_steps(n_w, i, token_budget(row))
    t_p = _step(row, eff, none, as_prefill(Work(tokens=chunk, attn_pairs=chunk * (i + 1.0), kv_tokens=chunk,
                                                rows=chunk / i)))
    t_d = _step(row, eff, decode_work(n_w * (i + o / 2.0), n_w), none)
    pf_out, pf_tpot = prefill_first_burst(r, n_w, i, o, token_budget(row), t_p, t_d)
    first = (row.prefill_first > 0) | one_at_a_time
    return (jnp.where(first, row.replicas * pf_out, row.burst_requests * o / total_s),
            jnp.where(first, pf_tpot, tpot))


def steady_step_s(row: RowInputs, eff: Efficiency, k: jax.Array) -> jax.Array:
    """t_s(k): the steady step of k running requests (s), :func:`step_work` at n = k: for a row that is not a
    node test, k decode rows at a mean context of I + O / 2 and the prompt chunks of k / O whole prompts."""
    return _step(row, eff, *step_work(row, k))


def dataset_waves(row: RowInputs, eff: Efficiency) -> jax.Array:
    """Output tokens/s of a max-throughput dataset of R fixed-length requests, all queued at t = 0 (``waves``):
    per replica R_r = R / replicas, at most n at once (:func:`running`). Requests admitted together need the
    same O tokens and so finish together, and the next n take their places: the run is W = floor(R_r / n) full
    waves of O steady steps of n requests and a last wave of the r = R_r - W n left,

        output = R O / (W O t_s(n) + O t_s(r))          (no last wave when n divides R_r)

    with t_s(k) the steady step of k requests (:func:`steady_step_s`: each wave's prompts are prefilled in
    chunks beside the decode rows, as in-flight batching runs them). R -> inf gives the steady state; the
    three phases of :func:`burst` instead average the last wave into n / 2 rows, which prices a small last
    wave (r << n, O steps at r rows) too fast.

    Example:
      R = 2.5 n gives R O / (2 O t_s(n) + O t_s(n / 2)); R = n gives n / t_s(n), the steady state
      (tests/validation/test_burst_rows.py).

    References:
      trtllm-bench throughput (github.com/NVIDIA/TensorRT-LLM, docs/source/performance/perf-overview.md: a
      dataset of $num_requests requests of fixed lengths, --input-stdev=0 --output-stdev=0, queued at once).
    """
    n, o = running(row), row.osl
    r = row.burst_requests / row.replicas
    full = jnp.floor(r / n)
    rest = r - full * n
    last = jnp.where(rest > 0.0, o * steady_step_s(row, eff, jnp.maximum(rest, 1e-9)), 0.0)
    return row.replicas * r * o / (full * o * steady_step_s(row, eff, n) + last)


def row_value(row: RowInputs, eff: Efficiency) -> jax.Array:
    """What the row measures under ``eff`` (SI): output or total tokens/s, or TPOT / ITL in seconds.

    Example:
      8 users of 1000 in, 1000 out price TPOT as the mean step of 8 decode rows, a whole 1000-token prompt
      beside them in 8 / 1000 of the steps (tests/validation/test_loaded_rows.py).
    """
    t = row_step_time(row, eff)
    out = row.replicas * running(row) / t
    b_out, b_tpot = burst(row, eff)
    b_out = jnp.where(row.waves > 0, dataset_waves(row, eff), b_out)
    finite = row.burst_requests > 0
    out, t = jnp.where(finite, b_out, out), jnp.where(finite, b_tpot, t)
    total = jnp.where(row.prefill_only > 0, out * row.isl, out * (row.isl + row.osl) / row.osl)
    return jnp.where(row.metric_kind == 0, out, jnp.where(row.metric_kind == 1, total, t))


def reference_throughput(row: RowInputs) -> jax.Array:
    """Output tokens/s of the row with the reference roofline (one pass over decode rows and chunks)."""
    decode, prefill = step_work(row)
    cost = target_pass_cost(_instance(row, None), combine(decode, prefill))
    return row.replicas * decode.tokens / cost.t_s
