"""The phases of one instance's step boundary, each a pure function of the instance's arrays.

At a boundary (its step has ended, or an arrival woke it) an instance runs, in order:

1. :func:`sweepkit.serving.engine.complete.complete` - the ended step's tokens land: first tokens, inter-token gaps,
   finished prompts become decode rows (their prompt segments enter the prefix cache), finished rows retire
   (their turn's segment is cached, their KV freed, the session's next turn released after its think time);
   :func:`sweepkit.serving.engine.complete.land` - KV hand-offs that have landed free their prefill-side hold and
   turn their decode-side reservation into a decode row (pull hand-off);
2. :func:`sweepkit.serving.engine.kv_phases.swap_in` - swapped-out rows come back, earliest arrival first, while
   they fit;
3. :func:`sweepkit.serving.engine.schedule.schedule` - the batching policy forms the next step: paged rows grow
   (the latest arrivals are preempted when they cannot), queued requests are admitted in FIFO order
   (head-of-line blocking), and the step's rows, prompt chunks and emitted tokens are fixed;
   :func:`sweepkit.costmodel.steps.step_cost` prices it;
4. the prefix cache evicts (LRU, unpinned segments only) what the step's memory needs, and the step's end
   time, KV use and swap time owed are recorded.

Every function is written for ONE instance; no Python ``if`` touches a traced value. Memory is counted in
units (a token when reserved, a 16-token block when paged); the prefix cache's unpinned segments count as free
room and are evicted (LRU) only for the shortfall.

References:
  Yu et al., "Orca" (iteration-level scheduling), OSDI 2022; Kwon et al., vLLM, SOSP 2023, arXiv:2309.06180
  (paged KV, preemption by recompute or swap, sec. 4.5); Agrawal et al., "Sarathi-Serve", OSDI 2024,
  arXiv:2403.02310 (stall-free chunked batching, Alg. 3).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.serving.engine.state import RUN_STEPS, SWAPPED
from sweepkit.serving.engine.complete import complete, land
from sweepkit.serving.engine.kv_phases import kv_used, parked, swap_in
from sweepkit.serving.engine.prefix import evict, offset
from sweepkit.serving.engine.records import Events, Inst, Landed, Preempted, Shared
from sweepkit.serving.engine.row_order import arrival_order
from sweepkit.serving.engine.schedule import schedule
from sweepkit.serving.engine.updates import add_at


def no_events(S: int, N: int, bins: int, A: int) -> Events:
    """The event fields of a boundary that did nothing (request id N: none), shaped as :func:`boundary`'s."""
    none, zf = jnp.full((S,), N, jnp.int32), jnp.zeros((S,), jnp.float64)
    landed = Landed(first_rid=none, first_s=jnp.zeros((), jnp.float64), finish_rid=none, finish_s=zf,
                    next_rid=none, hand_rid=none, itl_bin=jnp.zeros((2 * S + RUN_STEPS,), jnp.int32),
                    itl_w=jnp.zeros((2 * S + RUN_STEPS,), jnp.float64), zeros=jnp.zeros((), jnp.float64),
                    misses=jnp.zeros((), jnp.int32))
    return Events(landed, Preempted(pre_rid=none, pre_out=zf, pre_last_s=zf), jnp.full((A,), N, jnp.int32))


def boundary(pol, req, load, iv: Inst, shared: Shared, t, shape) -> tuple[Inst, Events]:
    """One instance's boundary at time ``t``: complete, swap in, schedule, evict, account.

    Args:
      iv: the instance's arrays (rows, queue ring, cache, counters).  shared: per-request arrays of the lane
        and every prefix node's KV units (``units_m``), read only.  t: the boundary time, s.

    Returns:
      (the instance's arrays with ``busy_until_s`` and ``awake`` set, what the boundary did).
    """
    units_m = shared.units_m
    iv, landed = complete(pol, req, load, iv, shared.first_s, units_m, t, shape, shared.window_from_s)
    if shape.pools:
        iv = jax.lax.cond(jnp.any(parked(iv.rows)),
                          lambda v: land(pol, req, v, shared.xfer_land_s, t, units_m, shape), lambda v: v, iv)
    order = lambda: arrival_order(iv.rows.arr_s)  # noqa: E731  (sorted only where a branch needs it)
    if shape.swap:
        iv = jax.lax.cond(jnp.any(iv.rows.phase == SWAPPED), lambda v: swap_in(pol, req, v, t, units_m, order),
                          lambda v: v, iv)
    iv, pre, xfer_rid = schedule(pol, req, load, iv, shared, t, units_m, order, shape)
    private, cache, pinned = kv_used(pol, iv, units_m)
    if shape.prefix:
        # The plan read the cached flags (the segments its finishes leave), and eviction clears some in place:
        # its offset, moved by the plan's length (never negative), orders it after the plan.
        after_plan = offset(iv) + jnp.minimum(iv.plan.n, 0)
        iv, gone = evict(dataclasses.replace(iv, c_off=after_plan), units_m, private + cache - pol.kv_units)
        iv = dataclasses.replace(iv, c_units=iv.c_units - gone)
        cache = cache - gone
    plan = iv.plan
    busy = plan.n > 0
    owed = jnp.where(busy, iv.owed, 0.0)
    frac = (private + cache) / jnp.maximum(pol.kv_units, 1.0)
    dt = add_at(plan.dt, 0, owed)
    plan = dataclasses.replace(plan, dt=dt, ends=plan.t0 + jnp.cumsum(dt), frac=frac)
    st = iv.stats
    iv = dataclasses.replace(
        iv, plan=plan, busy_until_s=t + jnp.sum(jnp.where(jnp.arange(plan.dt.shape[0]) < plan.n, plan.dt, 0.0)),
        awake=busy, owed=iv.owed - owed, stats=dataclasses.replace(st, kv_peak=jnp.maximum(st.kv_peak, frac)))
    return iv, Events(landed, pre, xfer_rid)
