"""Pytrees the engine's phases pass to each other: a plan, counters, an arrival, an instance's view, events.

Each is a frozen dataclass registered as a pytree, so it crosses ``jax.lax.cond`` and ``while_loop`` as its
arrays do; a phase returns a new one (``dataclasses.replace``), never changes one in place. Shapes below are
those of one instance at a boundary (S rows, K = ``RUN_STEPS`` planned steps, A admission candidates, M
prefix segments); :class:`~sweepkit.serving.engine.state.State` holds :class:`Plan` and :class:`Stats` with
a leading instance axis [I].
"""

from __future__ import annotations

import dataclasses

import jax


def _pytree(cls):
    return jax.tree_util.register_dataclass(dataclasses.dataclass(frozen=True)(cls))


@_pytree
class Rows:
    """Row slots of every instance, [I, S] each: request id (-1 free), phase, prompt tokens to compute
    (``target``: the prompt, or prompt + generated tokens for a recompute), tokens computed, tokens emitted,
    KV units held privately, cached prefix tokens, chain segments pinned,
    last-token time, arrival."""

    rid: jax.Array
    phase: jax.Array
    target: jax.Array
    done: jax.Array
    out: jax.Array
    alloc: jax.Array
    hit: jax.Array
    pins: jax.Array
    last_s: jax.Array
    arr_s: jax.Array


@_pytree
class Plan:
    """An instance's planned steps (one step, or a run of decode steps: :mod:`~sweepkit.serving.engine.decode_run`).

    n: steps that run.  t0: the plan's start, s.  dt, en [K]: each step's seconds and dynamic joules.
    E [K, S]: tokens each row emits in each step.  alloc [K, S]: KV units each row holds after each step.
    ends [K]: each step's end, s.  fin [K]: rows finishing in each step.  fin_at [S]: the step a row
    finishes in.  kv_delta [K]: KV units held in each step less those in the first.  frac: KV use at the
    plan's start (a fraction).  rows: rows running.  dec [K]: decode rows of each step.  promoted: prompts
    the plan's first step completes (a prefill step planned with its run).
    """

    n: jax.Array
    t0: jax.Array
    dt: jax.Array
    en: jax.Array
    E: jax.Array
    alloc: jax.Array
    ends: jax.Array
    fin: jax.Array
    fin_at: jax.Array
    kv_delta: jax.Array
    frac: jax.Array
    rows: jax.Array
    dec: jax.Array
    promoted: jax.Array


@_pytree
class Stats:
    """An instance's accumulators: dynamic joules, busy seconds, steps, decode rows summed over steps, prompt
    tokens computed, preemptions, recomputed tokens, swapped bytes each way and swap joules, prefix-hit tokens
    and prompt tokens at first admission, time integrals of KV use (fraction x s) and of running rows
    (rows x s), and the KV peak (fraction)."""

    energy_j: jax.Array
    busy_s: jax.Array
    steps: jax.Array
    decode_rows: jax.Array
    prefill_tokens: jax.Array
    preemptions: jax.Array
    recompute_tokens: jax.Array
    swap_out_bytes: jax.Array
    swap_in_bytes: jax.Array
    swap_j: jax.Array
    hit_tokens: jax.Array
    first_prompt_tokens: jax.Array
    kv_area: jax.Array
    kv_peak: jax.Array
    batch_area: jax.Array


STAT_NAMES = tuple(f.name for f in dataclasses.fields(Stats))
"""The fields of :class:`Stats`, in order."""


@_pytree
class Arrival:
    """The earliest pending arrival (:func:`~sweepkit.serving.engine.loop.next_arrival`): its time ``t_s``,
    whether it is a first turn (``first``; session ``a0``), the releasing session ``b``, whether it is a KV
    hand-off (``hand``) and the handing-off session ``h``; its ``session``, request ``rid``, the session's
    ``home`` instance and the request's hand-off instances (``xfer_from``, ``xfer_to``)."""

    t_s: jax.Array
    first: jax.Array
    a0: jax.Array
    b: jax.Array
    hand: jax.Array
    h: jax.Array
    session: jax.Array
    rid: jax.Array
    home: jax.Array
    xfer_from: jax.Array
    xfer_to: jax.Array


@_pytree
class Inst:
    """One instance's arrays at its boundary.

    rows: its :class:`Rows` [S].  queue: the boundary's window of its FIFO
    ring (``slots`` entries before the head, ``admits`` from it), starting at ring position ``qbase``.
    head, tail: the ring's.  owed: swap seconds owed to the next step.  busy_until_s: the step's end.
    awake: whether it has a step.  plan: its :class:`Plan`.  stats: its :class:`Stats`.  c_in, c_refs,
    c_last_s: prefix-cache arrays (its own [M], or every instance's flat from offset ``c_off``).
    c_units, c_pinned: the cache's running totals (KV units cached, pinned).
    """

    rows: Rows
    queue: jax.Array
    qbase: jax.Array
    head: jax.Array
    tail: jax.Array
    owed: jax.Array
    busy_until_s: jax.Array
    awake: jax.Array
    plan: Plan
    stats: Stats
    c_in: jax.Array
    c_refs: jax.Array
    c_last_s: jax.Array
    c_units: jax.Array
    c_pinned: jax.Array
    c_off: jax.Array


@_pytree
class Shared:
    """What a boundary reads of the lane, not of its instance: per request [N] first token, tokens emitted
    and last-token time (before a preemption), arrival, whether the prefill pool computed its prompt,
    whether it was handed over and waits for room (pull), its KV landing time; the measured window's start;
    every prefix node's KV units ``units_m``."""

    first_s: jax.Array
    window_from_s: jax.Array
    r_out: jax.Array
    r_last_s: jax.Array
    arrival_s: jax.Array
    prefilled: jax.Array
    handed: jax.Array
    xfer_land_s: jax.Array
    units_m: jax.Array


@_pytree
class Candidates:
    """The first A queued requests at a boundary (:func:`~sweepkit.serving.engine.schedule.candidates`), [A]
    each: in the queue (``valid``), request id, prompt tokens to compute (``target``), cached hit tokens and
    nodes hit, KV units needed, tokens emitted before, whether the prefill pool computed the prompt, whether
    its KV still waits there for room here (``awaiting``), and the KV units of its hit's segments that
    nothing pins now (``pinning``)."""

    valid: jax.Array
    rid: jax.Array
    target: jax.Array
    hit: jax.Array
    nodes: jax.Array
    need: jax.Array
    prev: jax.Array
    computed: jax.Array
    awaiting: jax.Array
    pinning: jax.Array


@_pytree
class Run:
    """A planned run of decode steps (:func:`~sweepkit.serving.engine.decode_run.decode_run`): n steps that
    may run; dt, en [K] each step's seconds and dynamic joules; E [K, S] tokens each row emits per step;
    alloc [K, S] units after each step's growth; fin [K] rows finishing per step; kv_delta [K] KV units held
    per step less those of the first; fin_at [S] the step a row finishes in (K: none); held [K] KV units the
    run's rows hold per step."""

    n: jax.Array
    dt: jax.Array
    en: jax.Array
    E: jax.Array
    alloc: jax.Array
    fin: jax.Array
    kv_delta: jax.Array
    fin_at: jax.Array
    held: jax.Array


@_pytree
class Landed:
    """What landing a plan did (:func:`~sweepkit.serving.engine.complete.complete`), per slot [S] (request id
    N: none): first tokens (at ``first_s``), finishes (at ``finish_s`` [S]), hand-offs to the decode pool,
    released next turns; the ITL histogram's bins and weights, zero-gap tokens, the window's misses."""

    first_rid: jax.Array
    first_s: jax.Array
    finish_rid: jax.Array
    finish_s: jax.Array
    next_rid: jax.Array
    hand_rid: jax.Array
    itl_bin: jax.Array
    itl_w: jax.Array
    zeros: jax.Array
    misses: jax.Array


@_pytree
class Preempted:
    """Rows preempted for recompute (:func:`~sweepkit.serving.engine.kv_phases.preempt`), [S]: request id (N:
    none), tokens emitted and last-token time when preempted."""

    pre_rid: jax.Array
    pre_out: jax.Array
    pre_last_s: jax.Array


@_pytree
class Events:
    """Everything a boundary did that the lane records: what landing its plan did (``landed``), the rows it
    preempted (``preempted``) and ``xfer_rid`` [A], the pulled hand-offs whose admission starts their KV
    transfer (N: none)."""

    landed: Landed
    preempted: Preempted
    xfer_rid: jax.Array
