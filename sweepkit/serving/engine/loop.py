"""The cluster engine: every instance of one configuration at one load, advanced as one state.

Each iteration of a ``jax.lax.while_loop`` (one lane, one call; lanes run side by side on a thread pool):

1. **route** - the earliest pending arrival (a first turn, or a later turn released by its session) at or
   before the current time goes to the least-loaded instance at that moment (queued + swapped + decoding
   rows; ties to the lowest index), or with the session router to the instance of its session's first turn.
   A request that could never fit an empty instance's KV is rejected (a miss), and so are its later turns;
2. **boundaries** - every awake instance whose step has ended runs its boundary
   (:func:`sweepkit.serving.engine.phases.boundary`): the ended step lands, the next one is formed and priced;
3. **advance** - time moves to the next arrival or the next step end, whichever is first.

An iteration's cost does not grow with the run's requests: the earliest pending arrival comes from blocked
minima (:mod:`sweepkit.serving.engine.minblocks`), a boundary sees a window of its instance's queue, and the
requests already past their TTFT SLO (the early stop) are counted every :data:`LATE_EVERY` iterations.
Arrivals act only at step boundaries; an idle instance wakes at once. Common random numbers: the sessions
and their unit-rate start times are drawn once per workload, a load rescales the start times, and
acceptance draws depend only on (request, token position).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.serving.engine.state import DECODE, DECODE_POOL, DECODE_PRIORITY, LEAST_OUTSTANDING, PREFILL, PREFILL_POOL, RESERVED, SESSION, \
    SWAPPED, Load, Policy, Requests, Shape, State, init_state
from sweepkit.serving.engine import minblocks
from sweepkit.serving.engine.decode_run import finished_by, promoted_by
from sweepkit.serving.engine.handoff import cut_plan, hand_off, start_transfers
from sweepkit.serving.engine.phases import boundary, no_events
from sweepkit.serving.engine.prefix import node_units
from sweepkit.serving.engine.records import Arrival, Events, Inst, Shared
from sweepkit.serving.engine.updates import add_at, rows_updated, set_at

MISS_SHARE = 0.1
"""Share of the window that may miss its SLOs (1 - the SLO attainment target)."""

_INST = (("busy_until_s", "busy_until_s"), ("awake", "awake"), ("q_head", "head"), ("q_tail", "tail"),
         ("swap_owed_s", "owed"), ("plan", "plan"), ("c_units", "c_units"), ("c_pinned", "c_pinned"),
         ("rows", "rows"), ("stats", "stats"))
"""The per-instance fields of :class:`State` ([I] leading) and their names in an instance's view (:class:`Inst`)."""
_CACHE = ("c_in", "c_refs", "c_last_s")
"""The prefix cache's arrays [I, M]. In a program with disaggregated pools a boundary takes them whole, flat,
from its instance's offset: XLA updates them in place, where a slice of the instance's M segments and its
write-back are three passes over them each way at every boundary. In a program without pools XLA was found to copy them
whole nine times (chat's prefix-cache program), which costs more than the slice: there a boundary takes its
instance's slice (docs/performance.md)."""


def next_arrival(req: Requests, s: State, load: Load) -> Arrival:
    """The earliest pending arrival: a first turn, a released turn, or (disaggregated) a request whose KV has
    landed on the decode pool: its time ``t_s``, whether it is a first turn (``first``; session ``a0``), the
    releasing session ``b``, whether it is a KV hand-off (``hand``) and the handing-off session ``h``; and
    what :func:`route` reads of the state for it: its ``session``, request ``rid``, the session's ``home``
    instance and the request's KV hand-off instances (``xfer_from``, ``xfer_to``). Read here, at the end of
    the iteration before, they are carried as scalars: read in :func:`route` beside the in-place updates of
    those arrays later in the iteration, XLA copies whole arrays every iteration."""
    B = s.buf_s.shape[0]
    a0 = jnp.minimum(s.a0, B - 1)
    t_first = jnp.where(s.a0 < B, load.arrival0_s[a0], jnp.inf)
    b = minblocks.argmin(s.buf_s, s.buf_min)
    h = minblocks.argmin(s.hand_s, s.hand_min)
    first = t_first <= s.buf_s[b]
    t_new = jnp.minimum(t_first, s.buf_s[b])
    hand = s.hand_s[h] < t_new
    first = first & ~hand
    session = jnp.where(hand, h, jnp.where(first, a0, b))
    rid = jnp.where(first, 0, s.next_turn[session]) * req.stride + session
    return Arrival(t_s=jnp.minimum(t_new, s.hand_s[h]), first=first, a0=a0, b=b, hand=hand, h=h, session=session,
                   rid=rid, home=s.home[session], xfer_from=s.xfer_from[rid], xfer_to=s.xfer_to[rid])


def _fits_empty(pol: Policy, req: Requests, rid, inst):
    """Whether a request could ever run: its whole sequence fits an empty decode (or colocated) instance, and
    (disaggregated) its prompt fits an empty prefill instance ``inst`` (paged: blocks plus the watermark)."""
    p = req.prompt_tokens[rid].astype(jnp.float64)
    o = req.output_tokens[rid].astype(jnp.float64)
    paged = pol.paged > 0
    whole = jnp.where(paged, jnp.ceil((p + o) / pol.block_tokens) + pol.watermark_units, p + o) + pol.state_units
    prompt = jnp.where(paged, jnp.ceil(p / pol.block_tokens) + pol.prefill_watermark_units, p) + pol.state_units
    return (whole <= pol.kv_units) & ((pol.role[inst] != PREFILL_POOL) | (prompt <= pol.prefill_kv_units))


def route(pol: Policy, req: Requests, load: Load, s: State, shape: Shape, do, nxt: Arrival) -> State:
    """Route the pending arrival ``nxt`` (:func:`next_arrival`) where ``do``: the first turn of session a0,
    session b's next turn, or (``hand``) session h's request whose KV landed, to the least-loaded instance of
    its pool (its load: queued + decoding, swapped and reserved rows; under LEAST_OUTSTANDING its prefilling
    rows too)."""
    B, N, I, Q = shape.sessions, shape.requests, shape.instances, shape.queue
    t_arr, first, b, hand, h = nxt.t_s, nxt.first, nxt.b, nxt.hand, nxt.h
    session, rid = nxt.session, nxt.rid
    r = s.rows
    held = (r.phase == DECODE) | (r.phase == SWAPPED) | (r.phase == RESERVED)
    rows = jnp.sum(held | ((pol.router == LEAST_OUTSTANDING) & (r.phase == PREFILL)), axis=1)
    moved = promoted_by(s.plan, t_arr) - finished_by(s.plan, t_arr, jnp.zeros((I,), bool))   # plans not yet landed
    loads = (s.q_tail - s.q_head) + rows + moved.astype(rows.dtype)
    pool = jnp.where(hand, pol.role == DECODE_POOL, pol.role != DECODE_POOL)
    loads = jnp.where((jnp.arange(I) < pol.instances) & pool, loads, jnp.iinfo(jnp.int32).max)
    least = jnp.argmin(loads).astype(jnp.int32)
    home = jnp.where(first | (nxt.home < 0), least, nxt.home)
    pulled = hand & (pol.pull > 0)        # its room is reserved on xfer_to: wake it, enqueue nothing
    inst = jnp.where(pulled, nxt.xfer_to, jnp.where((pol.router != SESSION) | hand, least, home))
    reject = do & ~hand & ~_fits_empty(pol, req, rid, inst)
    ok = do & ~reject
    enq = ok & ~pulled
    onehot = (jnp.arange(I) == inst) & ok
    wake = onehot | ((jnp.arange(I) == nxt.xfer_from) & ok & pulled)
    queue = set_at(s.queue, (jnp.where(enq, inst, I), s.q_tail[inst] % Q), rid)
    # Decode priority admits nothing while a row runs, and a plan's every step runs a row: an arrival (not a
    # pulled hand-off, whose reserved row joins at the next boundary) need not cut it.
    waits = (pol.batching == DECODE_PRIORITY) & ~pulled
    busy_until, plan_n = cut_plan(s, inst, ok & ~waits, t_arr)
    new = do & ~hand
    miss = reject & in_window(load, s, t_arr)
    arrived = s.arrived + new.astype(jnp.int32)
    window_from_s = jnp.where(new & (arrived.astype(jnp.float64) == load.warmup_requests), t_arr, s.window_from_s)
    at_rid = jnp.where(new, rid, N)
    released = jnp.where(new & ~first, b, B)
    buf_s = set_at(s.buf_s, released, jnp.inf)
    s = dataclasses.replace(
        s, a0=s.a0 + (new & first).astype(jnp.int32), buf_s=buf_s,
        buf_min=minblocks.refresh(buf_s, s.buf_min, released),
        home=set_at(s.home, jnp.where(new, session, B), home), queue=queue,
        q_tail=s.q_tail + (onehot & enq).astype(jnp.int32), awake=s.awake | wake, busy_until_s=busy_until,
        plan=dataclasses.replace(s.plan, n=plan_n),
        arrival_s=set_at(s.arrival_s, at_rid, t_arr),
        rejected=set_at(s.rejected, at_rid, reject), misses=s.misses + miss.astype(jnp.int32),
        arrived=arrived, window_from_s=window_from_s,
        in_system=s.in_system + (ok & ~hand).astype(s.in_system.dtype))
    landed = do & hand
    at_land = jnp.where(landed, rid, N)
    hand_s = set_at(s.hand_s, jnp.where(landed, h, B), jnp.inf)
    return dataclasses.replace(s, hand_s=hand_s, hand_min=minblocks.refresh(hand_s, s.hand_min, jnp.where(landed, h, B)),
                               prefilled=set_at(s.prefilled, at_land, True),
                               handed=set_at(s.handed, at_land, False))


def in_window(load: Load, s: State, arrival_s):
    """Whether a request that arrived at ``arrival_s`` is surely in the measured window: after the
    ``warmup_requests``-th arrival (strictly, so ties at the cut are left out) and at or before the last
    session start. The window's misses alone decide the early stop (:func:`step`)."""
    return (arrival_s > s.window_from_s) & (arrival_s <= load.eligible_to_s)


def _run_boundary(pol_i, req, load, s: State, i, t, units_m, shape: Shape):
    """Instance ``i``'s boundary on its slice of the state (the prefix cache's arrays whole, flat, in a program
    with pools: :data:`_CACHE`); its queue is the window of ``slots`` entries before the head and ``admits``
    from it (``qbase``: the window's first ring position), so a boundary's cost does not grow with the run's
    requests."""
    W, Q = shape.slots + shape.admits, shape.queue
    qbase = s.q_head[i] - shape.slots
    qpos = (qbase + jnp.arange(W)) % Q
    shared = Shared(first_s=s.first_s, window_from_s=s.window_from_s, r_out=s.r_out, r_last_s=s.r_last_s,
                    arrival_s=s.arrival_s, prefilled=s.prefilled, handed=s.handed, xfer_land_s=s.xfer_land_s,
                    units_m=units_m)
    whole = shape.pools
    cache = {k: getattr(s, k).reshape(-1) if whole else getattr(s, k)[i] for k in _CACHE}
    old = Inst(**{v: jax.tree_util.tree_map(lambda a: a[i], getattr(s, k)) for k, v in _INST},
               queue=s.queue[i, qpos], qbase=qbase, **cache,
               c_off=i * s.c_in.shape[1] if whole else jnp.zeros((), jnp.int32))
    new, ev = boundary(pol_i, req, load, old, shared, t, shape)
    queue = set_at(s.queue, (i, qpos), new.queue)
    cache = {k: getattr(new, k).reshape(s.c_in.shape) if whole else set_at(getattr(s, k), i, getattr(new, k))
             for k in _CACHE}
    inst = {k: jax.tree_util.tree_map(lambda a, n: set_at(a, i, n), getattr(s, k), getattr(new, v)) for k, v in _INST}
    return dataclasses.replace(s, queue=queue, **cache, **inst), ev


def boundaries(pol: Policy, req: Requests, load: Load, s: State, units_m, shape: Shape) -> State:
    """Run the boundary of the first awake instance whose step has ended; scatter what it did to requests.

    One instance per iteration (boundaries at the same instant run in successive iterations without time
    moving), so an iteration's cost does not grow with the cluster's size.
    """
    t, N = s.t_s, shape.requests
    due = ~s.done & s.awake & (s.busy_until_s <= t)
    any_due = jnp.any(due)
    i = jnp.argmax(due).astype(jnp.int32)
    pol_i = instance_policy(pol, i, shape)
    s, ev = jax.lax.cond(any_due, lambda s: _run_boundary(pol_i, req, load, s, i, t, units_m, shape),
                         lambda s: (s, no_events(shape.slots, N, shape.bins, shape.admits)), s)
    s = jax.lax.cond(any_due, lambda s: _record(req, s, ev, t, shape), lambda s: s, s)
    if not shape.pools:
        return s
    drop = lambda x: jnp.where(any_due, x, N)  # noqa: E731
    hand, xfer = drop(ev.landed.hand_rid), drop(ev.xfer_rid)     # after the instance arrays are written back
    s = jax.lax.cond(jnp.any(hand < N), lambda s: hand_off(pol, req, s, hand, i, t, shape), lambda s: s, s)
    return jax.lax.cond(jnp.any(xfer < N), lambda s: start_transfers(pol, req, s, xfer, i, t, shape), lambda s: s, s)


def _record(req: Requests, s: State, ev: Events, t, shape: Shape) -> State:
    """Write what a boundary did to the per-request and per-session arrays (first tokens, finishes, released
    turns, preemptions, the ITL histogram)."""
    N, B = shape.requests, shape.sessions
    nxt = ev.landed.next_rid
    ses = jnp.where(nxt < N, nxt % req.stride, B)
    pre, fin = ev.preempted.pre_rid, ev.landed.finish_rid
    fin_s = ev.landed.finish_s                      # t, or earlier in a run extended past the finish
    rel_s = fin_s + req.think_s[jnp.minimum(nxt, N - 1)]
    first_s, finish_s, buf_s, buf_min, next_turn, r_out, prefilled, r_last_s = rows_updated([
        (s.first_s, ev.landed.first_rid, ev.landed.first_s, "set"), (s.finish_s, fin, fin_s, "set"),
        (s.buf_s, ses, rel_s, "set"),
        (s.buf_min, minblocks.blocks_of(s.buf_s, s.buf_min, ses), rel_s, "min"),   # released turns were inf
        (s.next_turn, ses, nxt // req.stride, "set"),
        (s.r_out, pre, ev.preempted.pre_out, "set"),
        (s.prefilled, pre, False, "set"),           # recomputed where it is preempted
        (s.r_last_s, pre, ev.preempted.pre_last_s, "set")])
    return dataclasses.replace(
        s, first_s=first_s, finish_s=finish_s, buf_s=buf_s, next_turn=next_turn, r_out=r_out,
        prefilled=prefilled, r_last_s=r_last_s, buf_min=buf_min,
        little_area=s.little_area - jnp.sum(jnp.where(fin < N, t - fin_s, 0.0)),
        hist=add_at(s.hist, ev.landed.itl_bin, ev.landed.itl_w),
        zeros=s.zeros + ev.landed.zeros, misses=s.misses + ev.landed.misses.astype(jnp.int32),
        in_system=s.in_system - jnp.sum(fin < N))


def instance_policy(pol: Policy, i, shape: Shape) -> Policy:
    """Instance ``i``'s policy: a prefill-pool instance prices its own replica and holds its own KV; the
    decode pool caches no prefixes (its prompts arrive computed). Without pools (:class:`Shape` ``pools``) every
    instance is colocated: the configuration's own."""
    role = pol.role[i]
    if not shape.pools:
        return dataclasses.replace(pol, role=role)
    pre = role == PREFILL_POOL
    pick = lambda a, b: jnp.where(pre, a, b)  # noqa: E731
    return dataclasses.replace(pol, inst=jax.tree_util.tree_map(pick, pol.prefill_inst, pol.inst),
                               kv_units=pick(pol.prefill_kv_units, pol.kv_units),
                               watermark_units=pick(pol.prefill_watermark_units, pol.watermark_units),
                               prefix=jnp.where(role == DECODE_POOL, 0.0, pol.prefix), role=role)


LATE_EVERY = 64
"""Iterations between counts of the window's requests that will surely miss but are not yet counted (a pass
over every request; the early stop it feeds can only come later, never change a pass into a fail)."""


def _late(req: Requests, s: State, load: Load, t):
    """The window's requests (:func:`in_window`) that will surely miss an SLO, not yet in ``s.misses``: still
    without a first token more than the TTFT SLO after arrival, or decoding so long since their first token
    that their TPOT, (finish - first) / (output - 1) with finish >= ``t``, already exceeds its SLO. Counted
    every :data:`LATE_EVERY` iterations (0 in between). A run extended past a finish (``decode_run``) holds
    rows that may have finished since it started but are not yet recorded: while one does, their finish is
    only known to be at or after the run's start."""
    def count():
        K = s.plan.dt.shape[-1]
        pending = (jnp.any((jnp.arange(K)[None, :] < s.plan.n[:, None] - 1) & (s.plan.fin > 0), axis=1)
                   | ((s.plan.promoted > 0) & (s.plan.n >= 2)))
        t_lo = jnp.minimum(t, jnp.min(jnp.where(s.awake & pending, s.plan.t0, jnp.inf)))
        win = in_window(load, s, s.arrival_s) & ~s.rejected
        started = jnp.isfinite(s.first_s)
        waiting = ~started & (s.arrival_s < t_lo - load.ttft_slo_s)
        o = req.output_tokens.astype(jnp.float64)
        slow = (started & ~jnp.isfinite(s.finish_s) & (s.first_s - s.arrival_s <= load.ttft_slo_s) & (o >= 2)
                & ((t_lo - s.first_s) / jnp.maximum(o - 1.0, 1.0) > load.tpot_slo_s))
        return jnp.sum(win & (waiting | slow)).astype(jnp.int32)
    return jax.lax.cond(s.iters % LATE_EVERY == 0, count, lambda: jnp.zeros((), jnp.int32))


def step(pol: Policy, req: Requests, load: Load, s: State, units_m, shape: Shape) -> State:
    """One iteration: route the arrival due now, run due boundaries, advance time, check the stop rules.
    ``units_m``: every prefix node's KV units (computed once per run)."""
    live = ~s.done
    t = s.t_s
    s = route(pol, req, load, s, shape, live & (s.nxt.t_s <= t), s.nxt)
    s = boundaries(pol, req, load, s, units_m, shape)
    nxt = next_arrival(req, s, load)
    t_inst = jnp.min(jnp.where(s.awake, s.busy_until_s, jnp.inf))
    t_new = jnp.where(live, jnp.maximum(jnp.minimum(nxt.t_s, t_inst), t), t)
    finished = live & ~jnp.isfinite(t_new)
    late = _late(req, s, load, t)
    stop = live & ~finished & ((s.misses + late).astype(jnp.float64) > load.miss_limit)
    trunc = live & (s.iters + 1 >= shape.max_iters)
    return dataclasses.replace(
        s, t_s=jnp.where(finished, t, t_new), iters=s.iters + live.astype(jnp.int32), nxt=nxt,
        little_area=s.little_area + jnp.where(finished, 0.0, s.in_system * (t_new - t)),
        done=s.done | finished | stop | trunc, stopped=s.stopped | stop, truncated=s.truncated | trunc)


def simulate(pol: Policy, req: Requests, load: Load, shape: Shape) -> State:
    """Run one lane until every request has finished or been rejected (or the load has surely failed).

    Args:
      pol: the configuration.  req: the run's requests.  load: arrivals, window, SLOs, early-stop limit.
      shape: static sizes.

    Returns:
      The final :class:`State` (``stats.energy_j`` is dynamic energy; add idle power x horizon).
    """
    s0 = init_state(load, shape)
    s0 = dataclasses.replace(s0, nxt=next_arrival(req, s0, load))
    units_m = node_units(req, shape, pol.block_tokens) if shape.prefix else jnp.zeros((1,))
    return jax.lax.while_loop(lambda s: ~s.done, lambda s: step(pol, req, load, s, units_m, shape), s0)
