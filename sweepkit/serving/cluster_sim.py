"""The cluster engine: every instance of one configuration at one load, advanced as one state.

Each iteration of a ``jax.lax.while_loop`` (one lane; lanes are ``vmap``-ped over loads x configurations):

1. **route** - the earliest pending arrival (a first turn, or a later turn released by its session) at or
   before the current time goes to the least-loaded instance at that moment (queued + swapped + decoding
   rows; ties to the lowest index), or with the session router to the instance of its session's first turn.
   A request that could never fit an empty instance's KV is rejected (a miss), and so are its later turns;
2. **boundaries** - every awake instance whose step has ended runs its boundary
   (:func:`sweepkit.serving.phases.boundary`): the ended step lands, the next one is formed and priced;
3. **advance** - time moves to the next arrival or the next step end, whichever is first.

Arrivals act only at step boundaries; an idle instance wakes at once. Common random numbers: the sessions
and their unit-rate start times are drawn once per workload, a load rescales the start times, and
acceptance draws depend only on (request, token position).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.serving.cluster_state import DECODE, DECODE_POOL, LEAST_LOADED, PREFILL_POOL, RESERVED, SWAPPED, Load, Policy, \
    Requests, Shape, State, init_state
from sweepkit.serving.phases import boundary, no_events

MISS_SHARE = 0.1
"""Share of the window that may miss its SLOs (1 - the SLO attainment target)."""

_INST = ("busy_until_s", "awake", "queue", "q_head", "q_tail", "swap_owed_s", "plan", "c_in", "c_refs", "c_last_s")
_VIEW = ("busy_until_s", "awake", "queue", "head", "tail", "owed", "plan", "c_in", "c_refs", "c_last_s")


def _next_arrival(s: State, load: Load):
    """(time, is a first turn, its session if first, the releasing session if not, is a KV hand-off, the
    handing-off session) of the earliest arrival: a first turn, a released turn, or (disaggregated) a
    request whose KV has landed on the decode pool."""
    B = s.buf_s.shape[0]
    a0 = jnp.minimum(s.a0, B - 1)
    t_first = jnp.where(s.a0 < B, load.arrival0_s[a0], jnp.inf)
    b = jnp.argmin(s.buf_s).astype(jnp.int32)
    h = jnp.argmin(s.hand_s).astype(jnp.int32)
    first = t_first <= s.buf_s[b]
    t_new = jnp.minimum(t_first, s.buf_s[b])
    hand = s.hand_s[h] < t_new
    return jnp.minimum(t_new, s.hand_s[h]), first & ~hand, a0, b, hand, h


def _fits_empty(pol: Policy, req: Requests, rid, inst):
    """Whether a request could ever run: its whole sequence fits an empty decode (or colocated) instance, and
    (disaggregated) its prompt fits an empty prefill instance ``inst`` (paged: blocks plus the watermark)."""
    p = req.prompt_tokens[rid].astype(jnp.float64)
    o = req.output_tokens[rid].astype(jnp.float64)
    paged = pol.paged > 0
    whole = jnp.where(paged, jnp.ceil((p + o) / pol.block_tokens) + pol.watermark_units, p + o)
    prompt = jnp.where(paged, jnp.ceil(p / pol.block_tokens) + pol.prefill_watermark_units, p)
    return (whole <= pol.kv_units) & ((pol.role[inst] != PREFILL_POOL) | (prompt <= pol.prefill_kv_units))


def route(pol: Policy, req: Requests, load: Load, s: State, shape: Shape, do, t_arr, first, a0, b, hand, h) -> State:
    """Route the pending arrival at ``t_arr`` where ``do``: the first turn of session a0, session b's next
    turn, or (``hand``) session h's request whose KV landed, to the least-loaded instance of its pool."""
    B, N, I = shape.sessions, shape.requests, shape.instances
    session = jnp.where(hand, h, jnp.where(first, a0, b))
    rid = jnp.where(first, 0, s.next_turn[session]) * B + session
    r = s.rows
    loads = (s.q_tail - s.q_head) + jnp.sum((r.phase == DECODE) | (r.phase == SWAPPED) | (r.phase == RESERVED), axis=1)
    pool = jnp.where(hand, pol.role == DECODE_POOL, pol.role != DECODE_POOL)
    loads = jnp.where((jnp.arange(I) < pol.instances) & pool, loads, jnp.iinfo(jnp.int32).max)
    least = jnp.argmin(loads).astype(jnp.int32)
    home = jnp.where(first | (s.home[session] < 0), least, s.home[session])
    pulled = hand & (pol.pull > 0)        # its room is reserved on xfer_to: wake it, enqueue nothing
    inst = jnp.where(pulled, s.xfer_to[rid], jnp.where((pol.router == LEAST_LOADED) | hand, least, home))
    reject = do & ~hand & ~_fits_empty(pol, req, rid, inst)
    ok = do & ~reject
    enq = ok & ~pulled
    onehot = (jnp.arange(I) == inst) & ok
    wake = onehot | ((jnp.arange(I) == s.xfer_from[rid]) & ok & pulled)
    queue = s.queue.at[jnp.where(enq, inst, I), s.q_tail[inst] % N].set(rid, mode="drop")
    busy_until, plan_n = _cut(s, inst, ok, t_arr)
    miss = reject & (t_arr <= load.eligible_to_s)
    new = do & ~hand
    at_rid = jnp.where(new, rid, N)
    s = dataclasses.replace(
        s, a0=s.a0 + (new & first).astype(jnp.int32),
        buf_s=s.buf_s.at[jnp.where(new & ~first, b, B)].set(jnp.inf, mode="drop"),
        home=s.home.at[jnp.where(new, session, B)].set(home, mode="drop"), queue=queue,
        q_tail=s.q_tail + (onehot & enq).astype(jnp.int32), awake=s.awake | wake, busy_until_s=busy_until,
        plan=dict(s.plan, n=plan_n),
        arrival_s=s.arrival_s.at[at_rid].set(t_arr, mode="drop"),
        rejected=s.rejected.at[at_rid].set(reject, mode="drop"), misses=s.misses + miss.astype(jnp.int32),
        in_system=s.in_system + (ok & ~hand).astype(s.in_system.dtype))
    landed = do & hand
    at_land = jnp.where(landed, rid, N)
    return dataclasses.replace(s, hand_s=s.hand_s.at[jnp.where(landed, h, B)].set(jnp.inf, mode="drop"),
                               prefilled=s.prefilled.at[at_land].set(True, mode="drop"),
                               handed=s.handed.at[at_land].set(False, mode="drop"))


def _cut(s: State, inst, ok, t_arr):
    """Cut instance ``inst``'s planned run of decode steps at the first step ending at or after ``t_arr``."""
    n = s.plan["n"][inst]
    ends = s.plan["t0"][inst] + jnp.cumsum(s.plan["dt"][inst])
    K = ends.shape[0]
    keep = jnp.minimum(n, 1 + jnp.sum((ends < t_arr) & (jnp.arange(K) < n))).astype(jnp.int32)
    cut = ok & (n > 1) & (keep < n)
    new_n = s.plan["n"].at[inst].set(jnp.where(cut, keep, n))
    new_busy = s.busy_until_s.at[inst].set(jnp.where(cut, ends[jnp.maximum(keep - 1, 0)], s.busy_until_s[inst]))
    return new_busy, new_n


def _view(s: State) -> dict:
    iv = {v: getattr(s, k) for k, v in zip(_INST, _VIEW)}
    return dict(iv, rows=s.rows, stats=s.stats)


def boundaries(pol: Policy, req: Requests, load: Load, s: State, shape: Shape) -> State:
    """Run the boundary of the first awake instance whose step has ended; scatter what it did to requests.

    One instance per iteration (boundaries at the same instant run in successive iterations without time
    moving), so an iteration's cost does not grow with the cluster's size.
    """
    t, N, B = s.t_s, shape.requests, shape.sessions
    due = ~s.done & s.awake & (s.busy_until_s <= t)
    any_due = jnp.any(due)
    i = jnp.argmax(due).astype(jnp.int32)
    shared = dict(first_s=s.first_s, r_out=s.r_out, r_last_s=s.r_last_s, arrival_s=s.arrival_s,
                  prefilled=s.prefilled, handed=s.handed, xfer_land_s=s.xfer_land_s)
    old = jax.tree_util.tree_map(lambda a: a[i], _view(s))
    pol_i = instance_policy(pol, i, shape)
    new, ev = jax.lax.cond(any_due, lambda v: boundary(pol_i, req, load, v, shared, t, shape),
                           lambda v: (v, no_events(shape.slots, N, shape.bins, shape.admits)), old)
    iv = jax.tree_util.tree_map(lambda a, n, o: a.at[i].set(jnp.where(any_due, n, o)), _view(s), new, old)
    drop = lambda x: jnp.where(any_due, x, N)  # noqa: E731
    nxt = drop(ev["next_rid"])
    ses = jnp.where(nxt < N, nxt % B, B)
    pre = drop(ev["pre_rid"])
    fin = drop(ev["finish_rid"])
    rel_s = t + req.think_s[jnp.minimum(nxt, N - 1)]
    s = dataclasses.replace(
        s, rows=iv["rows"], stats=iv["stats"], **{k: iv[v] for k, v in zip(_INST, _VIEW)},
        first_s=s.first_s.at[drop(ev["first_rid"])].set(t, mode="drop"),
        finish_s=s.finish_s.at[fin].set(t, mode="drop"),
        buf_s=s.buf_s.at[ses].set(rel_s, mode="drop"), next_turn=s.next_turn.at[ses].set(nxt // B, mode="drop"),
        r_out=s.r_out.at[pre].set(ev["pre_out"], mode="drop"),
        prefilled=s.prefilled.at[pre].set(False, mode="drop"),   # recomputed where it is preempted
        r_last_s=s.r_last_s.at[pre].set(ev["pre_last_s"], mode="drop"),
        hist=s.hist.at[ev["itl_bin"]].add(jnp.where(any_due, ev["itl_w"], 0.0)),
        zeros=s.zeros + jnp.where(any_due, ev["zeros"], 0.0),
        misses=s.misses + jnp.where(any_due, ev["misses"], 0).astype(jnp.int32),
        in_system=s.in_system - jnp.sum(fin < N))
    hand, xfer = drop(ev["hand_rid"]), drop(ev["xfer_rid"])     # after the instance arrays are written back
    s = jax.lax.cond(jnp.any(hand < N), lambda s: hand_off(pol, req, s, hand, i, t, shape), lambda s: s, s)
    return jax.lax.cond(jnp.any(xfer < N), lambda s: start_transfers(pol, req, s, xfer, i, t, shape), lambda s: s, s)


def instance_policy(pol: Policy, i, shape: Shape) -> Policy:
    """Instance ``i``'s policy: a prefill-pool instance prices its own replica and holds its own KV; the
    decode pool caches no prefixes (its prompts arrive computed)."""
    role = pol.role[i]
    pre = role == PREFILL_POOL
    pick = lambda a, b: jnp.where(pre, a, b)  # noqa: E731
    return dataclasses.replace(pol, inst=jax.tree_util.tree_map(pick, pol.prefill_inst, pol.inst),
                               kv_units=pick(pol.prefill_kv_units, pol.kv_units),
                               watermark_units=pick(pol.prefill_watermark_units, pol.watermark_units),
                               prefix=jnp.where(role == DECODE_POOL, 0.0, pol.prefix), role=role)


def link_transfers(t, free_s, dur_s, on):
    """The FIFO KV link: transfers ``on`` [S], all ready at ``t``, go in slot order after the link is free.

    start_k = max(t, free) + sum_{j<k} dur_j; land_k = start_k + dur_k (an M/D/1 server when ready times are
    Poisson and durations equal).

    Returns:
      (start [S], land [S], the link's next free time).
    """
    d = jnp.where(on, dur_s, 0.0)
    start0 = jnp.maximum(t, free_s)
    land = start0 + jnp.cumsum(d)
    return land - d, land, jnp.where(jnp.any(on), start0 + jnp.sum(d), free_s)


def start_transfers(pol: Policy, req: Requests, s: State, rid, dest, t, shape: Shape) -> State:
    """KV transfers of requests ``rid`` [A or S] (N: none) start at ``t`` in slot order on the FIFO link, to
    decode instance ``dest``; each lands at its session's hand-off time (prompt + first token, target + draft)."""
    N, B = shape.requests, shape.sessions
    on = rid < N
    r = jnp.minimum(rid, N - 1)
    kv_bytes = (req.prompt_tokens[r].astype(jnp.float64) + 1.0) * pol.kv_token_bytes
    start, land, free = link_transfers(t, s.link_free_s, pol.link_latency_s + kv_bytes / pol.link_bytes_per_s, on)
    ses = jnp.where(on, rid % B, B)
    return dataclasses.replace(
        s, hand_s=s.hand_s.at[ses].set(land, mode="drop"), link_free_s=free,
        link_j=s.link_j + jnp.sum(jnp.where(on, kv_bytes * 8.0 * pol.link_j_per_bit, 0.0)),
        xfer_start_s=s.xfer_start_s.at[rid].set(start, mode="drop"),
        xfer_land_s=s.xfer_land_s.at[rid].set(land, mode="drop"),
        xfer_to=s.xfer_to.at[rid].set(dest, mode="drop"))


def hand_off(pol: Policy, req: Requests, s: State, rid, src, t, shape: Shape) -> State:
    """Requests whose prompt prefill instance ``src`` finished at ``t`` (``rid`` [S], N: none; first token
    emitted) are handed to the decode pool. Push: their KV transfers start now and each is routed to the
    least-loaded decode instance when it lands. Pull: they join the least-loaded decode instance's queue now,
    where admission reserves their room and starts the transfer."""
    N, I = shape.requests, shape.instances
    on = rid < N
    s = dataclasses.replace(s, r_out=s.r_out.at[rid].set(1.0, mode="drop"),
                            r_last_s=s.r_last_s.at[rid].set(t, mode="drop"),
                            xfer_from=s.xfer_from.at[rid].set(src, mode="drop"))

    def push(s):
        return start_transfers(pol, req, s, rid, 0, t, shape)

    def pull(s):
        r = s.rows
        loads = (s.q_tail - s.q_head) + jnp.sum((r.phase == DECODE) | (r.phase == RESERVED), axis=1)
        dest = jnp.argmin(jnp.where((jnp.arange(I) < pol.instances) & (pol.role == DECODE_POOL), loads,
                                    jnp.iinfo(jnp.int32).max)).astype(jnp.int32)
        rank = jnp.cumsum(on.astype(jnp.int32)) - 1
        slot = jnp.where(on, (s.q_tail[dest] + rank) % N, N)
        queue = s.queue.at[dest, slot].set(rid, mode="drop")
        busy_until, plan_n = _cut(s, dest, jnp.any(on), t)
        return dataclasses.replace(
            s, queue=queue, q_tail=s.q_tail.at[dest].add(jnp.sum(on).astype(jnp.int32)),
            awake=s.awake.at[dest].set(True), busy_until_s=busy_until, plan=dict(s.plan, n=plan_n),
            handed=s.handed.at[rid].set(True, mode="drop"))

    return jax.lax.cond(pol.pull > 0, pull, push, s)


def step(pol: Policy, req: Requests, load: Load, s: State, shape: Shape) -> State:
    """One iteration: route the arrival due now, run due boundaries, advance time, check the stop rules."""
    live = ~s.done
    t = s.t_s
    t_arr, first, a0, b, hand, h = _next_arrival(s, load)
    s = route(pol, req, load, s, shape, live & (t_arr <= t), t_arr, first, a0, b, hand, h)
    s = boundaries(pol, req, load, s, shape)
    t_arr = _next_arrival(s, load)[0]
    t_inst = jnp.min(jnp.where(s.awake, s.busy_until_s, jnp.inf))
    t_new = jnp.where(live, jnp.maximum(jnp.minimum(t_arr, t_inst), t), t)
    finished = live & ~jnp.isfinite(t_new)
    late = jnp.sum((s.arrival_s < t - load.ttft_slo_s) & ~jnp.isfinite(s.first_s) & ~s.rejected
                   & (s.arrival_s <= load.eligible_to_s))
    stop = live & ~finished & ((s.misses + late).astype(jnp.float64) > load.miss_limit)
    trunc = live & (s.iters + 1 >= shape.max_iters)
    return dataclasses.replace(
        s, t_s=jnp.where(finished, t, t_new), iters=s.iters + live.astype(jnp.int32),
        little_area=s.little_area + jnp.where(finished, 0.0, s.in_system * (t_new - t)),
        done=s.done | finished | stop | trunc, stopped=s.stopped | stop, truncated=s.truncated | trunc)


def simulate(pol: Policy, req: Requests, load: Load, shape: Shape) -> State:
    """Run one lane until every request has finished or been rejected (or the load has surely failed).

    Args:
      pol: the configuration.  req: the run's requests.  load: arrivals, window, SLOs, early-stop limit.
      shape: static sizes.

    Returns:
      The final :class:`State` (``stats["energy_j"]`` is dynamic energy; add idle power x horizon).
    """
    s0 = init_state(load, shape)
    return jax.lax.while_loop(lambda s: ~s.done, lambda s: step(pol, req, load, s, shape), s0)
