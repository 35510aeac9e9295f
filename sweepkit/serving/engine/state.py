"""Pytrees of the cluster engine: static sizes, a configuration's policy as data, requests, load and state.

One lane (one configuration at one load) holds every instance of the cluster on an explicit leading axis
``[I]``, so that routing can compare instances; each lane is its own call of its compiled program.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.costmodel.steps import Instance
from sweepkit.serving.engine.minblocks import block_mins
from sweepkit.serving.engine.records import STAT_NAMES, Arrival, Plan, Rows, Stats

HIST_LOG10_LO = -5.0
"""Smallest ITL histogram edge, log10 seconds (10 us)."""
HIST_LOG10_HI = 3.0
"""Largest ITL histogram edge, log10 seconds (1,000 s)."""

RUN_STEPS = 16
"""Most decode steps planned at one boundary (see :mod:`sweepkit.serving.engine.decode_run`)."""

FREE, PREFILL, DECODE, SWAPPED, HELD, RESERVED = 0, 1, 2, 3, 4, 5
"""Row phases of a slot: free; admitted, prompt not yet computed; decoding; swapped out to host memory;
(disaggregated, pull hand-off) a prefill instance's computed prompt whose KV is held until it lands on the
decode pool; a decode instance's room reserved for a prompt whose KV is crossing the link."""

PREFILL_PRIORITY, DECODE_PRIORITY, CHUNKED = 0, 1, 2
"""Batching policies (``Policy.batching``)."""

LEAST_LOADED, SESSION, LEAST_OUTSTANDING = 0, 1, 2
"""Routers (``Policy.router``): the fewest queued + decoding rows (a prompt mid-prefill counts in neither); the
first turn's instance for every turn of a session; the fewest requests held in any phase (queued, prefilling,
decoding, swapped or reserved)."""

COLOCATED, PREFILL_POOL, DECODE_POOL = 0, 1, 2
"""Instance roles (``Policy.role``): prefill and decode on one instance; a disaggregated prefill instance
(computes prompts and the first token, then hands the KV over); a disaggregated decode instance."""


class Shape(NamedTuple):
    """Static sizes of one compiled cluster simulation (hashable: a jit static argument).

    instances: I.  slots: rows per instance (>= batch cap).  admits: queue entries examined per boundary.
    requests: N = turns x sessions (turn k of session s is request k x ``Requests.stride`` + s).  sessions: B,
    the capacity of the per-session arrays (a run's layout may use fewer: ``Requests.stride``).  turns: T,
    the capacity in turns (a workload may use fewer: ``Requests.turns``; the prefix cache's programs hold
    exactly the workload's).  systems: shared system prompts (prefix-cache segments 0..systems-1).  gamma_max: draft passes priced.
    prefix: static switch for the prefix cache arrays.  paged: whether any row may grow past its admission
    (paged KV, the prefix cache, pools) and so be preempted.  swap: whether a preemption may swap rows out.
    pools: whether instances may hand KV off (disaggregated pools).  A program compiled without one of these
    leaves its phases out; with all three (the default) it runs every configuration.  bins: ITL histogram
    bins.  max_iters: safety bound.
    """

    instances: int = 2
    slots: int = 256
    admits: int = 32
    requests: int = 1
    sessions: int = 1
    turns: int = 1
    systems: int = 1
    gamma_max: int = 0
    prefix: bool = False
    paged: bool = True
    swap: bool = True
    pools: bool = True
    bins: int = 2000
    max_iters: int = 2_000_000

    @property
    def queue(self) -> int:
        """Entries of an instance's FIFO ring: every request, and at least the window a boundary sees
        (``slots`` before the head, for requests preempted to the front, and ``admits`` from it)."""
        return max(self.requests, self.slots + self.admits)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Policy:
    """A configuration's levers as data (scalars), so configurations of one shape share one program.

    Attributes:
      inst: the replica priced by :func:`sweepkit.costmodel.steps.step_cost`.  instances: replicas in use
      (<= the shape's; the rest never receive a request, so layouts of 1, 2 and 4 share a program).
      batching: PREFILL_PRIORITY, DECODE_PRIORITY or CHUNKED.  token_budget: tokens per prefill or mixed step.
      batch_cap: rows per instance (rows still prefilling count).  router: LEAST_LOADED, SESSION or LEAST_OUTSTANDING.
      block_tokens: KV unit (1 = reserved whole sequences, 16 = paged blocks).  paged: grow rows block by
      block and preempt.  swap: preempt by swapping out (else recompute).  watermark_units: free units kept at
      admission.  kv_units: KV capacity per instance in units.  kv_token_bytes: KV bytes per token (target
      + draft).  prefix: prefix caching on.  accept_survival: [G] P(a verify pass accepts at least j drafts) =
      prod_{i<=j} alpha_i for j = 1..G (zero past the lever's gamma).  spec_seed: acceptance seed.
      host_bytes_per_s, host_block_s, host_j_per_bit: the swap link.
      role: [I] COLOCATED, PREFILL_POOL or DECODE_POOL.  prefill_inst, prefill_kv_units,
      prefill_watermark_units: a prefill instance's replica and KV (disaggregated).  link_bytes_per_s,
      link_latency_s, link_j_per_bit: the FIFO channel that carries the KV from prefill to decode.
      pull: 1 for the pull hand-off (the decode instance reserves room before the transfer starts, the
      prefill instance holds the KV until it lands: a full decode pool backs pressure up into prefill
      admission), 0 for push (the transfer starts at once; the decode instance admits it once landed).
      state_units: KV units each running request holds beside its tokens' KV: its linear-attention state on
        a hybrid model (:func:`sweepkit.costmodel.memory.state_positions`, rounded up to whole units; 0
        otherwise).
    """

    inst: Instance
    instances: jax.Array
    batching: jax.Array
    token_budget: jax.Array
    batch_cap: jax.Array
    router: jax.Array
    block_tokens: jax.Array
    paged: jax.Array
    swap: jax.Array
    watermark_units: jax.Array
    kv_units: jax.Array
    kv_token_bytes: jax.Array
    prefix: jax.Array
    accept_survival: jax.Array
    spec_seed: jax.Array
    host_bytes_per_s: jax.Array
    host_block_s: jax.Array
    host_j_per_bit: jax.Array
    role: jax.Array
    prefill_inst: Instance
    prefill_kv_units: jax.Array
    prefill_watermark_units: jax.Array
    link_bytes_per_s: jax.Array
    link_latency_s: jax.Array
    link_j_per_bit: jax.Array
    pull: jax.Array
    state_units: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Requests:
    """Every request of a run (load independent); request k x stride + s is turn k of session s.

    prompt_tokens, output_tokens, segment_tokens (new input + output: the prefix-cache segment the turn
    adds), think_s (before this turn), system_id: [N].  system_tokens: [systems] shared prompt lengths.
    stride: sessions in the request layout (a scalar, <= ``Shape.sessions``: the arrays past turns x stride
    are padding, so one compiled program serves every layout up to its capacity).  turns: the workload's
    turns per session (a scalar, <= ``Shape.turns``, so workloads of several turn counts share a program).
    """

    prompt_tokens: jax.Array
    output_tokens: jax.Array
    segment_tokens: jax.Array
    think_s: jax.Array
    system_id: jax.Array
    system_tokens: jax.Array
    stride: jax.Array
    turns: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Load:
    """One offered load: first-turn arrivals [B] (inf: not simulated), measured window, SLOs, early-stop limit.

    ``warmup_requests``: the earliest arrivals dropped from the measured window and the steady set (n_drop);
    ``eligible_to_s``: the window's last arrival (the last session start; the steady set has no end);
    ``miss_limit``: the misses of the window's later arrivals past which attainment < 0.9 is certain (0.1 x
    the largest window the run can have, n - n_drop; 1e18: never stop)."""

    arrival0_s: jax.Array
    eligible_to_s: jax.Array
    ttft_slo_s: jax.Array
    tpot_slo_s: jax.Array
    miss_limit: jax.Array
    warmup_requests: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class State:
    """Loop state of one lane. Per instance [I]: step end time, awake flag, FIFO ring [I, N] with head and
    tail, swap seconds owed to the next step, cache arrays [I, M] (cached flag, pins as int32, last use) and the
    cache's running totals [I] (cached and pinned KV units), counters.
    Per request [N]: arrival, first token, finish, tokens emitted so far, last-token time, rejected.
    Disaggregated: per session [B] the time its request's KV lands (inf: none in flight); per request [N]
    the KV transfer's start and landing, whether its prompt was computed by the prefill pool, whether it waits
    in a decode queue for room before its transfer (pull), and the prefill and decode instances of its
    hand-off; the link's next free time and its joules. ``nxt``: the earliest pending arrival as
    :func:`sweepkit.serving.engine.loop.next_arrival` finds it (kept from the end of the previous iteration).
    Early stop: ``misses`` counts the certain misses of the measured window's arrivals, those after
    ``window_from_s`` (the arrival time of the ``warmup_requests``-th request routed, inf until then;
    ``arrived`` counts the requests routed so far).
    """

    t_s: jax.Array
    done: jax.Array
    iters: jax.Array
    truncated: jax.Array
    stopped: jax.Array
    a0: jax.Array
    buf_s: jax.Array
    buf_min: jax.Array
    home: jax.Array
    next_turn: jax.Array
    rows: Rows
    busy_until_s: jax.Array
    awake: jax.Array
    queue: jax.Array
    q_head: jax.Array
    q_tail: jax.Array
    swap_owed_s: jax.Array
    plan: Plan
    c_in: jax.Array
    c_refs: jax.Array
    c_last_s: jax.Array
    c_units: jax.Array
    c_pinned: jax.Array
    arrival_s: jax.Array
    first_s: jax.Array
    finish_s: jax.Array
    r_out: jax.Array
    r_last_s: jax.Array
    rejected: jax.Array
    stats: Stats
    hist: jax.Array
    zeros: jax.Array
    misses: jax.Array
    arrived: jax.Array
    window_from_s: jax.Array
    in_system: jax.Array
    little_area: jax.Array
    hand_s: jax.Array
    hand_min: jax.Array
    nxt: Arrival | None
    link_free_s: jax.Array
    link_j: jax.Array
    xfer_start_s: jax.Array
    xfer_land_s: jax.Array
    prefilled: jax.Array
    handed: jax.Array
    xfer_from: jax.Array
    xfer_to: jax.Array


def bin_index(gap_s: jax.Array, bins: int) -> jax.Array:
    """Histogram bin of an inter-token gap (log-spaced over [1e-5, 1e3] s, clipped)."""
    x = (jnp.log10(jnp.maximum(gap_s, 1e-30)) - HIST_LOG10_LO) / (HIST_LOG10_HI - HIST_LOG10_LO) * bins
    return jnp.clip(jnp.floor(x), 0, bins - 1).astype(jnp.int32)


def bin_centres_s(bins: int) -> np.ndarray:
    """Geometric centre of each ITL histogram bin, seconds (relative half-width 0.46% at 2,000 bins)."""
    edges = np.linspace(HIST_LOG10_LO, HIST_LOG10_HI, bins + 1)
    return 10.0 ** ((edges[:-1] + edges[1:]) / 2.0)


def init_state(load: Load, shape: Shape) -> State:
    """An empty cluster before its first arrival."""
    I, S, N, B = shape.instances, shape.slots, shape.requests, shape.sessions
    K = RUN_STEPS
    M = shape.systems + N if shape.prefix else 1
    f = load.arrival0_s.dtype
    zf, zi = jnp.zeros((I, S), f), jnp.zeros((I, S), jnp.int32)
    rows = Rows(rid=zi - 1, phase=zi, target=zf, done=zf, out=zf, alloc=zf, hit=zf, pins=zf, last_s=zf, arr_s=zf)
    inf_n = jnp.full((N,), jnp.inf, f)
    return State(
        t_s=load.arrival0_s[0], done=~jnp.isfinite(load.arrival0_s[0]), iters=jnp.zeros((), jnp.int32),
        truncated=jnp.zeros((), bool), stopped=jnp.zeros((), bool), a0=jnp.zeros((), jnp.int32),
        buf_s=jnp.full((B,), jnp.inf, f), buf_min=block_mins(jnp.full((B,), jnp.inf, f)), home=jnp.full((B,), -1, jnp.int32),
        next_turn=jnp.zeros((B,), jnp.int32), rows=rows, busy_until_s=jnp.zeros((I,), f),
        awake=jnp.zeros((I,), bool), queue=jnp.zeros((I, shape.queue), jnp.int32), q_head=jnp.zeros((I,), jnp.int32),
        q_tail=jnp.zeros((I,), jnp.int32), swap_owed_s=jnp.zeros((I,), f),
        plan=Plan(n=jnp.zeros((I,), jnp.int32), t0=jnp.zeros((I,), f), dt=jnp.zeros((I, K), f),
                  en=jnp.zeros((I, K), f), E=jnp.zeros((I, K, S), f), alloc=jnp.zeros((I, K, S), f),
                  ends=jnp.zeros((I, K), f), fin=jnp.zeros((I, K), f),
                  fin_at=jnp.zeros((I, S), jnp.int32), kv_delta=jnp.zeros((I, K), f),
                  frac=jnp.zeros((I,), f), rows=jnp.zeros((I,), f), dec=jnp.zeros((I, K), f),
                  promoted=jnp.zeros((I,), f)), c_in=jnp.zeros((I, M), bool),
        c_refs=jnp.zeros((I, M), jnp.int32), c_last_s=jnp.zeros((I, M), f), c_units=jnp.zeros((I,), f),
        c_pinned=jnp.zeros((I,), f), arrival_s=inf_n, first_s=inf_n,
        finish_s=inf_n, r_out=jnp.zeros((N,), f), r_last_s=jnp.zeros((N,), f), rejected=jnp.zeros((N,), bool),
        stats=Stats(**{k: jnp.zeros((I,), f) for k in STAT_NAMES}), hist=jnp.zeros((shape.bins,), f),
        zeros=jnp.zeros((), f), misses=jnp.zeros((), jnp.int32), arrived=jnp.zeros((), jnp.int32),
        window_from_s=jnp.where(load.warmup_requests > 0, jnp.inf, -jnp.inf).astype(f), in_system=jnp.zeros((), f),
        little_area=jnp.zeros((), f), hand_s=jnp.full((B,), jnp.inf, f),
        hand_min=block_mins(jnp.full((B,), jnp.inf, f)), nxt=None, link_free_s=jnp.zeros((), f),
        link_j=jnp.zeros((), f), xfer_start_s=inf_n, xfer_land_s=inf_n,
        prefilled=jnp.zeros((N,), bool), handed=jnp.zeros((N,), bool), xfer_from=jnp.zeros((N,), jnp.int32),
        xfer_to=jnp.zeros((N,), jnp.int32),
    )
