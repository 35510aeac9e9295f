"""Disaggregated hand-offs of the cluster engine: the FIFO KV link, transfers, and push or pull hand-off.

A prefill-pool instance that finished a prompt emits its first token and hands the request to the decode
pool: push starts the KV transfer at once (the request is routed to the least-loaded decode instance when
it lands); pull queues it on the least-loaded decode instance now, whose admission reserves its room and
starts the transfer (a full decode pool backs pressure up into prefill admission).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.serving.engine import minblocks
from sweepkit.serving.engine.decode_run import finished_by
from sweepkit.serving.engine.state import DECODE, DECODE_POOL, RESERVED, Policy, Requests, Shape, State
from sweepkit.serving.engine.updates import add_at, set_at


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
    state = pol.state_units * pol.block_tokens               # a hybrid model's linear-attention state travels too
    kv_bytes = (req.prompt_tokens[r].astype(jnp.float64) + 1.0 + state) * pol.kv_token_bytes
    start, land, free = link_transfers(t, s.link_free_s, pol.link_latency_s + kv_bytes / pol.link_bytes_per_s, on)
    ses = jnp.where(on, rid % req.stride, B)
    hand_s = set_at(s.hand_s, ses, land)
    return dataclasses.replace(
        s, hand_s=hand_s, hand_min=minblocks.lowered(hand_s, s.hand_min, ses, land), link_free_s=free,
        link_j=s.link_j + jnp.sum(jnp.where(on, kv_bytes * 8.0 * pol.link_j_per_bit, 0.0)),
        xfer_start_s=set_at(s.xfer_start_s, rid, start),
        xfer_land_s=set_at(s.xfer_land_s, rid, land),
        xfer_to=set_at(s.xfer_to, rid, dest))


def hand_off(pol: Policy, req: Requests, s: State, rid, src, t, shape: Shape) -> State:
    """Requests whose prompt prefill instance ``src`` finished at ``t`` (``rid`` [S], N: none; first token
    emitted) are handed to the decode pool. Push: their KV transfers start now and each is routed to the
    least-loaded decode instance when it lands. Pull: they join the least-loaded decode instance's queue now,
    where admission reserves their room and starts the transfer."""
    N, I, Q = shape.requests, shape.instances, shape.queue
    on = rid < N
    s = dataclasses.replace(s, r_out=set_at(s.r_out, rid, 1.0),
                            r_last_s=set_at(s.r_last_s, rid, t),
                            xfer_from=set_at(s.xfer_from, rid, src))

    # Push starts its transfers here, unconditionally (none under pull): inside a branch of the cond below,
    # itself a branch of the boundary's, XLA:CPU copied the per-request arrays on every row's update.
    s = start_transfers(pol, req, s, jnp.where(pol.pull > 0, N, rid), 0, t, shape)

    def pull(s):
        r = s.rows
        rows = jnp.sum((r.phase == DECODE) | (r.phase == RESERVED), axis=1)
        gone = finished_by(s.plan, t, jnp.arange(I) < src).astype(rows.dtype)   # as if their boundaries ran
        loads = (s.q_tail - s.q_head) + rows - gone
        dest = jnp.argmin(jnp.where((jnp.arange(I) < pol.instances) & (pol.role == DECODE_POOL), loads,
                                    jnp.iinfo(jnp.int32).max)).astype(jnp.int32)
        rank = jnp.cumsum(on.astype(jnp.int32)) - 1
        slot = jnp.where(on, (s.q_tail[dest] + rank) % Q, Q)
        queue = set_at(s.queue, (dest, slot), rid)
        busy_until, plan_n = cut_plan(s, dest, jnp.any(on), t)
        return dataclasses.replace(
            s, queue=queue, q_tail=add_at(s.q_tail, dest, jnp.sum(on).astype(jnp.int32)),
            awake=set_at(s.awake, dest, True), busy_until_s=busy_until, plan=dataclasses.replace(s.plan, n=plan_n),
            handed=set_at(s.handed, rid, True))

    return jax.lax.cond(pol.pull > 0, pull, lambda s: s, s)


def cut_plan(s: State, inst, ok, t_arr):
    """Cut instance ``inst``'s planned run of decode steps at the first step ending at or after ``t_arr``."""
    n = s.plan.n[inst]
    ends = s.plan.ends[inst]
    K = ends.shape[0]
    keep = jnp.minimum(n, 1 + jnp.sum((ends < t_arr) & (jnp.arange(K) < n))).astype(jnp.int32)
    cut = ok & (n > 1) & (keep < n)
    new_n = set_at(s.plan.n, inst, jnp.where(cut, keep, n))
    new_busy = set_at(s.busy_until_s, inst, jnp.where(cut, ends[jnp.maximum(keep - 1, 0)], s.busy_until_s[inst]))
    return new_busy, new_n
