"""Pytrees of the serving simulator: static sizes, configuration, requests, load and loop state."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays

HIST_LOG10_LO = -5.0
"""Smallest ITL histogram edge, log10 seconds (10 us)."""
HIST_LOG10_HI = 3.0
"""Largest ITL histogram edge, log10 seconds (1,000 s)."""


class SimShape(NamedTuple):
    """Static sizes of one compiled simulation (hashable: a jit static argument).

    slots: S row slots (>= batch cap).  sessions: B, first turns per instance (release buffer and FIFO of
    released later turns are indexed by session; 1 for single-turn workloads).  admits: A, most requests one
    prefill step admits.  steps: K decode steps priced per iteration.  gamma_max: G draft passes priced per step.
    retire: F rows retired per iteration.  scan: W first-turn arrivals counted per iteration.  cohorts: H
    groups of rows sharing a last-token time (ITL bookkeeping).  bins: ITL histogram bins over [1e-5, 1e3] s.
    max_iters: safety bound.  multi_turn: static switch for the released-turn FIFO.
    """

    slots: int = 256
    sessions: int = 1
    admits: int = 16
    steps: int = 16
    gamma_max: int = 0
    retire: int = 2
    scan: int = 128
    cohorts: int = 16
    bins: int = 2000
    max_iters: int = 400_000
    multi_turn: bool = False


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Hardware:
    """One (device, lever) configuration of an instance, all scalars.

    kv_capacity_tokens: KV positions the instance holds (target + draft per token).
    gamma: drafted tokens per verify pass (0 without a draft, whose ``present`` is then 0).
    prefill_token_budget: prompt tokens per prefill step.  batch_cap: running rows (<= slots).
    """

    device: DeviceArrays
    target: ModelArrays
    draft: ModelArrays
    tp: jax.Array
    weight_bytes: jax.Array
    kv_bytes: jax.Array
    compute_speedup: jax.Array
    kv_capacity_tokens: jax.Array
    gamma: jax.Array
    prefill_token_budget: jax.Array
    batch_cap: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Requests:
    """Requests routed to one instance (load independent). Local id k x B + s is turn k of local session s,
    so ids 0..B-1 are the first turns in arrival order; ``next_id`` chains a session (-1 after its last turn).

    prompt_tokens, output_tokens: [N] int32.  passes: [N] int32 decode passes after the prefill (lever
    dependent).  next_id: [N] int32.  think_s: [N] think time before this turn (0 for first turns).
    """

    prompt_tokens: jax.Array
    output_tokens: jax.Array
    passes: jax.Array
    next_id: jax.Array
    think_s: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Load:
    """One load on one instance.

    arrival0_s: [B + W] first-turn arrival times, sorted; inf for sessions not simulated and for W padding.
    itl_from_s, itl_to_s: requests arriving in [from, to] feed the ITL histogram.
    eligible_to_s: misses of requests arriving by then count towards early stopping.
    ttft_slo_s, tpot_slo_s: SLOs.  miss_limit: the cluster stops once its sure misses exceed it (the load has
    surely failed; 1e18: never).  drop_n: warm-up requests the cluster's window drops (1e18: no early stop).
    first_turns: sessions simulated on this instance (all their first turns arrive by eligible_to_s).
    """

    arrival0_s: jax.Array
    itl_from_s: jax.Array
    itl_to_s: jax.Array
    eligible_to_s: jax.Array
    ttft_slo_s: jax.Array
    tpot_slo_s: jax.Array
    miss_limit: jax.Array
    drop_n: jax.Array
    first_turns: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class State:
    """Loop state of one instance.

    passes: decode steps the instance has run; a row admitted at count c needing P passes ends at c + P.
    Slots [S]: request id (-1 free), end pass (END_FREE when free), ITL-window flag, arrival and first-token
    times (copies, so the per-request arrays are only written inside the loop, in place); free_stack / n_free: the
    free slots. sum_prompt, sum_rate, sum_emit: over running rows, prompt tokens, mean tokens per pass and
    tokens emitted so far (cached context = sum_prompt + sum_emit).
    a0 / p0: first turns arrived / admitted; late: first turns that arrived more than the TTFT SLO ago (their
    TTFT misses once they are admitted: early stopping counts those still waiting).  buf_*: [B] released next turn per session (arrival inf: none).
    ring_*: [B] FIFO of released turns that have arrived (arrival order), head/tail counters.
    rel_elig: released later turns arriving by ``eligible_to_s``.  stopped: the cluster surely failed (early stop).
    coh_t, coh_n: [H] last-token time and window-row count of each cohort; coh_h the newest.
    Per request [N]: arrival, first token, finish (inf until known). Accumulators: see simulator docs.
    """

    t_s: jax.Array
    done: jax.Array
    iters: jax.Array
    passes: jax.Array
    slot_rid: jax.Array
    slot_end: jax.Array
    slot_win: jax.Array
    slot_arr_s: jax.Array
    slot_first_s: jax.Array
    free_stack: jax.Array
    n_free: jax.Array
    sum_prompt: jax.Array
    sum_rate: jax.Array
    sum_emit: jax.Array
    a0: jax.Array
    p0: jax.Array
    late: jax.Array
    rel_elig: jax.Array
    buf_rid: jax.Array
    buf_arr_s: jax.Array
    ring_rid: jax.Array
    ring_arr_s: jax.Array
    head: jax.Array
    tail: jax.Array
    coh_t: jax.Array
    coh_n: jax.Array
    coh_h: jax.Array
    arrival_s: jax.Array
    first_s: jax.Array
    finish_s: jax.Array
    kv_used: jax.Array
    kv_peak: jax.Array
    busy_s: jax.Array
    energy_j: jax.Array
    decode_steps: jax.Array
    row_passes: jax.Array
    prefill_steps: jax.Array
    batch_time: jax.Array
    area: jax.Array
    hist: jax.Array
    zeros: jax.Array
    misses: jax.Array
    truncated: jax.Array
    stopped: jax.Array


END_FREE = 1 << 30
"""``slot_end`` of a free slot (never reached by the pass counter)."""


def bin_index(gap_s: jax.Array, bins: int) -> jax.Array:
    """Histogram bin of an inter-token gap (log-spaced over [1e-5, 1e3] s, clipped)."""
    x = (jnp.log10(jnp.maximum(gap_s, 1e-30)) - HIST_LOG10_LO) / (HIST_LOG10_HI - HIST_LOG10_LO) * bins
    return jnp.clip(jnp.floor(x), 0, bins - 1).astype(jnp.int32)


def bin_centres_s(bins: int) -> np.ndarray:
    """Geometric centre of each ITL histogram bin, seconds (relative half-width 0.46% at 2,000 bins)."""
    edges = np.linspace(HIST_LOG10_LO, HIST_LOG10_HI, bins + 1)
    return 10.0 ** ((edges[:-1] + edges[1:]) / 2.0)


def init_state(req: Requests, load: Load, shape: SimShape) -> State:
    """Empty instance at its first arrival."""
    n = req.prompt_tokens.shape[0]
    B = shape.sessions
    f = load.arrival0_s.dtype
    S, H = shape.slots, shape.cohorts
    zero = jnp.zeros((), f)
    izero = jnp.zeros((), jnp.int32)
    arrival = jnp.concatenate([load.arrival0_s[:B], jnp.full((n - B,), jnp.inf, f)])
    ring = B if shape.multi_turn else 1
    return State(
        t_s=jnp.minimum(load.arrival0_s[0], jnp.inf), done=~jnp.isfinite(load.arrival0_s[0]), iters=izero,
        passes=izero, slot_rid=jnp.full((S,), -1, jnp.int32), slot_end=jnp.full((S,), END_FREE, jnp.int32),
        slot_win=jnp.zeros((S,), f), slot_arr_s=jnp.zeros((S,), f), slot_first_s=jnp.zeros((S,), f),
        free_stack=jnp.arange(S - 1, -1, -1, dtype=jnp.int32),
        n_free=jnp.asarray(S, jnp.int32), sum_prompt=zero, sum_rate=zero, sum_emit=zero, a0=izero, p0=izero, late=izero, rel_elig=izero,
        buf_rid=jnp.full((ring,), -1, jnp.int32), buf_arr_s=jnp.full((ring,), jnp.inf, f),
        ring_rid=jnp.full((ring,), -1, jnp.int32), ring_arr_s=jnp.full((ring,), jnp.inf, f), head=izero,
        tail=izero, coh_t=jnp.zeros((H,), f), coh_n=jnp.zeros((H,), f), coh_h=izero,
        arrival_s=arrival, first_s=jnp.full((n,), jnp.inf, f), finish_s=jnp.full((n,), jnp.inf, f),
        kv_used=zero, kv_peak=zero, busy_s=zero, energy_j=zero, decode_steps=zero, row_passes=zero,
        prefill_steps=zero, batch_time=zero, area=zero, hist=jnp.zeros((shape.bins,), f), zeros=zero,
        misses=izero, truncated=jnp.zeros((), bool), stopped=jnp.zeros((), bool),
    )
