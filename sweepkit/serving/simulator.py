"""One serving instance as a ``jax.lax.while_loop``: iteration-level continuous batching, prefill priority.

Written for ONE instance at ONE load (no Python branching on traced values); :func:`simulate_batched` runs
a ``vmap`` of its step over instances x loads x (device, lever) configurations in one loop.

Scheduler (seed-system.md sec. 1, colocated prefill-priority instance, whole-sequence KV reservation):

* Waiting requests are served first-come first-served. At a step boundary the instance admits, in arrival
  order, the longest prefix of the queue that fits: a row under the batch cap, the whole sequence
  (prompt + output tokens) in unreserved KV, the prompt within the prefill token budget (the first request
  always fits the budget). A request whose sequence exceeds the whole KV capacity is rejected (a miss).
* If any request is admitted the step is a **prefill step** over the whole prompts (running rows wait); it
  emits every admitted request's first token at its end.
* Otherwise, with rows running, a **decode step** over all rows: one target pass, or gamma sequential draft
  passes + one verify pass of gamma + 1 positions per row. Row r needs P_r passes for its remaining
  output - 1 tokens (:func:`sweepkit.serving.requests.verify_passes`); a pass's tokens arrive together.
* Otherwise the instance idles until the next arrival. A finished turn releases its session's next turn
  think x Exp(1) later (closed loop).

Stepping over stretches: while the batch does not change, up to K decode steps are priced at once (a vmap
over their contexts, a cumulative sum of their times); the run stops at the first step that finishes a row
or, when the queue is empty, before the first step starting at or after the next arrival (a blocked queue
cannot admit an arrival, so it does not cut). Within a run the priced context grows by each row's mean
tokens per pass. Bookkeeping iterations (time does not move) retire more than F finished rows, move released
turns into the FIFO in arrival order, and count first-turn arrivals beyond W.

ITL: the first token of a pass gets the gap since the row's previous token, the others 0. Rows sharing a
last-token time form a cohort (all rows after a decode run; the rows of each prefill step since), so a run
adds one histogram entry per cohort plus one per later step, weighted by the rows in the ITL window.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.serving.costs import decode_step_cost, prefill_step_cost
from sweepkit.serving.state import END_FREE, Hardware, Load, Requests, SimShape, State, bin_index, init_state


MISS_SHARE = 0.1
"""Share of the window that may miss its SLOs (1 - capacity.SLO_ATTAINMENT)."""


def _merge(x_key, y_key, fields_x, fields_y, k: int):
    """Stable merge of two sorted candidate lists by key (finite keys); the first ``k`` of each field, merged."""
    n = x_key.shape[0]
    ar = jnp.arange(n)
    rx = ar + jnp.sum(y_key[None, :] < x_key[:, None], axis=1)
    ry = ar + jnp.sum(x_key[None, :] <= y_key[:, None], axis=1)
    onehot = jnp.concatenate([rx, ry])[None, :] == jnp.arange(k)[:, None]
    return [jnp.sum(jnp.where(onehot, jnp.concatenate([a.astype(x_key.dtype), b.astype(x_key.dtype)])[None, :], 0.0),
                    axis=1) for a, b in zip(fields_x, fields_y)]


def step(hw: Hardware, req: Requests, load: Load, s: State, shape: SimShape) -> State:
    """One iteration: retire/bookkeeping, then a prefill step, a run of decode steps or an idle jump."""
    S, A, K, F, W, H = shape.slots, shape.admits, shape.steps, shape.retire, shape.scan, shape.cohorts
    N = req.prompt_tokens.shape[0]
    f = s.t_s.dtype
    inf = jnp.asarray(jnp.inf, f)
    t = s.t_s
    live = ~s.done
    nb = s.buf_arr_s.shape[0]
    slot_ids = jnp.arange(S, dtype=jnp.int32)

    # ---- 1. retire up to F finished rows at t; release their sessions' next turns
    pending = live & (s.slot_end <= s.passes)
    ridx, prev = [], jnp.asarray(-1, jnp.int32)
    for _ in range(F):
        prev = jnp.min(jnp.where(pending & (slot_ids > prev), slot_ids, S))
        ridx.append(prev)
    ridx = jnp.stack(ridx)
    has = ridx < S
    ridx = jnp.minimum(ridx, S - 1)
    n_ret = jnp.sum(has).astype(jnp.int32)
    more_pending = jnp.sum(pending) > n_ret
    r_rid = jnp.maximum(s.slot_rid[ridx], 0)
    r_out = req.output_tokens[r_rid].astype(f)
    r_prompt = req.prompt_tokens[r_rid].astype(f)
    r_p = req.passes[r_rid].astype(f)
    r_win = s.slot_win[ridx]
    finish_s = s.finish_s.at[jnp.where(has, r_rid, N)].set(t, mode="drop")
    r_arr, r_first = s.slot_arr_s[ridx], s.slot_first_s[ridx]
    tpot = (t - r_first) / jnp.maximum(r_out - 1.0, 1.0)
    tpot_miss = has & (r_first - r_arr <= load.ttft_slo_s) & (r_out >= 2) & (tpot > load.tpot_slo_s) \
        & (r_arr <= load.eligible_to_s)
    hasf = has.astype(f)
    zeros = s.zeros + jnp.sum(hasf * r_win * (r_out - 1.0 - r_p))
    kv_used = s.kv_used - jnp.sum(hasf * (r_prompt + r_out))
    sum_prompt = s.sum_prompt - jnp.sum(hasf * r_prompt)
    sum_rate = s.sum_rate - jnp.sum(hasf * (r_out - 1.0) / jnp.maximum(r_p, 1.0))
    sum_emit = s.sum_emit - jnp.sum(hasf * (r_out - 1.0))
    coh_n = s.coh_n.at[s.coh_h].add(-jnp.sum(hasf * r_win))
    gone = jnp.where(has, ridx, S)
    slot_rid = s.slot_rid.at[gone].set(-1, mode="drop")
    slot_end = s.slot_end.at[gone].set(END_FREE, mode="drop")
    free_stack = s.free_stack.at[jnp.where(has, s.n_free + jnp.arange(F), S)].set(ridx, mode="drop")
    n_free = s.n_free + n_ret
    nxt = jnp.where(has, req.next_id[r_rid], -1)
    nxt_c = jnp.maximum(nxt, 0)
    rel = t + req.think_s[nxt_c]
    bslot = jnp.where(nxt >= 0, nxt_c % nb, nb)
    buf_arr = s.buf_arr_s.at[bslot].set(rel, mode="drop")
    buf_rid = s.buf_rid.at[bslot].set(nxt_c, mode="drop")
    arrival_s = s.arrival_s.at[jnp.where(nxt >= 0, nxt_c, N)].set(rel, mode="drop")
    rel_elig = s.rel_elig + jnp.sum((nxt >= 0) & (rel <= load.eligible_to_s + 1e-9)).astype(jnp.int32)

    # ---- 2. move the earliest arrived released turn into the FIFO
    bi = jnp.argmin(buf_arr)
    bmin = buf_arr[bi]
    mv = live & (bmin <= t)
    rslot = jnp.where(mv, s.tail % nb, nb)
    ring_rid = s.ring_rid.at[rslot].set(buf_rid[bi], mode="drop")
    ring_arr = s.ring_arr_s.at[rslot].set(bmin, mode="drop")
    tail = s.tail + mv.astype(jnp.int32)
    buf_arr = buf_arr.at[jnp.where(mv, bi, nb)].set(inf, mode="drop")
    bmin2 = jnp.min(buf_arr)
    more_buf = bmin2 <= t

    # ---- 3. count first-turn arrivals
    window = jax.lax.dynamic_slice(load.arrival0_s, (s.a0,), (W,))
    n_new = jnp.sum(window <= t).astype(jnp.int32)
    a0 = s.a0 + jnp.where(live, n_new, 0)
    # first turns waiting longer than the TTFT SLO are sure misses (counted towards early stopping only)
    n_late = jnp.sum(jax.lax.dynamic_slice(load.arrival0_s, (s.late,), (W,)) < t - load.ttft_slo_s)
    late = s.late + jnp.where(live, n_late, 0).astype(jnp.int32)
    go = live & ~more_pending & ~more_buf & (n_new < W)

    # ---- 4. admission candidates in arrival order (first turns merged with released turns)
    ar = jnp.arange(A, dtype=jnp.int32)
    c0 = s.p0 + ar
    key0 = jnp.where(c0 < a0, jax.lax.dynamic_slice(load.arrival0_s, (s.p0,), (A,)), inf)
    if shape.multi_turn:
        ci = (s.head + ar) % nb
        keyr = jnp.where(ar < tail - s.head, ring_arr[ci], inf)
        big = jnp.asarray(1e300, f)  # finite stand-in for inf: the merge permutes by a one-hot matmul
        k0, kr = jnp.minimum(key0, big), jnp.minimum(keyr, big)
        ckey, crid_f, csrc = _merge(k0, kr, [k0, c0, jnp.zeros((A,))], [kr, ring_rid[ci], jnp.ones((A,))], A)
        ckey = jnp.where(ckey >= big, inf, ckey)
        crid = jnp.round(crid_f).astype(jnp.int32)
        from_ring = csrc > 0.5
    else:
        ckey, crid, from_ring = key0, c0, jnp.zeros((A,), bool)
    crid = jnp.clip(crid, 0, N - 1)
    cvalid = jnp.isfinite(ckey)
    cp = req.prompt_tokens[crid].astype(f)
    co = req.output_tokens[crid].astype(f)
    cP = req.passes[crid]
    resv = cp + co
    n_active = (S - n_free).astype(f)
    reject = cvalid & (resv > hw.kv_capacity_tokens)
    keep = cvalid & ~reject
    cum_p = jnp.cumsum(jnp.where(keep, cp, 0.0))
    cum_r = jnp.cumsum(jnp.where(keep, resv, 0.0))
    cum_n = jnp.cumsum(keep.astype(f))
    fits = ((cum_p <= hw.prefill_token_budget) | (cum_p - cp <= 0.0)) \
        & (kv_used + cum_r <= hw.kv_capacity_tokens) & (n_active + cum_n <= jnp.minimum(hw.batch_cap, S))
    take = go & jnp.cumprod((cvalid & (reject | fits)).astype(jnp.int32)).astype(bool)
    admit = take & keep
    do_prefill = jnp.any(take)
    t_pf, e_pf = prefill_step_cost(hw, cp, admit.astype(f))

    # ---- 5. a run of decode steps over the running rows
    m = jnp.min(slot_end) - s.passes - 1
    ctx0 = sum_prompt + sum_emit
    j = jnp.arange(K, dtype=f)
    ends = ctx0 + jnp.asarray([0.0, K - 1.0], f) * sum_rate
    dt_e, e_e = jax.vmap(lambda c: decode_step_cost(hw, c, n_active, shape.gamma_max))(ends)
    frac = j / max(K - 1, 1)
    dt_j = dt_e[0] + frac * (dt_e[1] - dt_e[0])  # linear in the context between the run's end points
    e_j = e_e[0] + frac * (e_e[1] - e_e[0])
    start_j = t + jnp.cumsum(dt_j) - dt_j
    n_wait = (a0 - s.p0 + tail - s.head).astype(f)
    next_arrival = jnp.minimum(load.arrival0_s[a0], bmin2)
    cut = jnp.where(n_wait > 0, inf, next_arrival)
    run = (j <= m) & ((start_j < cut) | (j == 0))
    n_run = jnp.sum(run).astype(jnp.int32)
    t_dec = jnp.sum(jnp.where(run, dt_j, 0.0))
    e_dec = jnp.sum(jnp.where(run, e_j, 0.0))
    do_decode = go & ~do_prefill & (n_active > 0)
    do_idle = go & ~do_prefill & ~do_decode

    dt = jnp.where(do_prefill, t_pf, jnp.where(do_decode, t_dec, 0.0))
    t_new = jnp.where(do_idle & jnp.isfinite(next_arrival), next_arrival, t + dt)
    e = jnp.where(do_prefill, e_pf, jnp.where(do_decode, e_dec, 0.0))
    ran = jnp.where(do_decode, n_run, 0)
    sum_emit = sum_emit + ran.astype(f) * sum_rate

    # ---- Little's law: integral over (t, t_new] of requests in the system
    w_new = jax.lax.dynamic_slice(load.arrival0_s, (a0,), (W,))
    arr_in = (w_new <= t_new)
    # a released turn counts from its arrival: the part before it joined the FIFO is added when it moves
    area = s.area + jnp.where(go, (n_active + n_wait) * (t_new - t) + jnp.sum(jnp.where(arr_in, t_new - w_new, 0.0)),
                              0.0) + jnp.where(mv, t - bmin, 0.0)

    # ---- ITL: one entry per cohort for the run's first step, then dt_j per later step; cohorts collapse
    first_gap = t + dt_j[0] - s.coh_t
    hist = s.hist.at[bin_index(first_gap, shape.bins)].add(jnp.where(do_decode, coh_n, 0.0))
    n_win = jnp.sum(coh_n)
    hist = hist.at[bin_index(dt_j, shape.bins)].add(jnp.where(do_decode & run & (j > 0), n_win, 0.0))
    h = s.coh_h
    hh = jnp.arange(H)
    coh_n = jnp.where(do_decode, jnp.where(hh == h, n_win, 0.0), coh_n)
    coh_t = jnp.where(do_decode & (hh == h), t_new, s.coh_t)

    # ---- prefill: admitted requests pop free slots, emit their first token, form a new cohort
    arank = jnp.cumsum(admit.astype(jnp.int32)) - 1
    dest = jnp.where(admit, free_stack[jnp.clip(n_free - 1 - arank, 0, S - 1)], S)
    n_adm = jnp.sum(admit).astype(jnp.int32)
    n_free = n_free - n_adm
    arr_c = jnp.where(cvalid, ckey, 0.0)
    win_c = ((arr_c >= load.itl_from_s) & (arr_c <= load.itl_to_s)).astype(f)
    passes = s.passes + ran
    slot_rid = slot_rid.at[dest].set(crid, mode="drop")
    slot_end = slot_end.at[dest].set(passes + cP, mode="drop")
    slot_win = s.slot_win.at[dest].set(win_c, mode="drop")
    slot_arr = s.slot_arr_s.at[dest].set(arr_c, mode="drop")
    slot_first = s.slot_first_s.at[dest].set(t_new, mode="drop")
    admf = admit.astype(f)
    sum_prompt = sum_prompt + jnp.sum(admf * cp)
    sum_rate = sum_rate + jnp.sum(admf * (co - 1.0) / jnp.maximum(cP, 1).astype(f))
    first_s = s.first_s.at[jnp.where(admit, crid, N)].set(t_new, mode="drop")
    ttft_miss = admit & (t_new - arr_c > load.ttft_slo_s) & (arr_c <= load.eligible_to_s)
    rej_miss = take & reject & (arr_c <= load.eligible_to_s)
    p0 = s.p0 + jnp.sum(take & ~from_ring).astype(jnp.int32)
    head = s.head + jnp.sum(take & from_ring).astype(jnp.int32)
    kv_used = kv_used + jnp.sum(admf * resv)
    new_win = jnp.sum(admf * win_c)
    nh = (h + 1) % H
    target = jnp.where(coh_n[nh] > 0, h, nh)  # ring of cohorts full: merge into the newest
    coh_t = jnp.where(do_prefill & (hh == target) & (target == nh), t_new, coh_t)
    coh_n = coh_n + jnp.where(do_prefill & (hh == target), new_win, 0.0)
    coh_h = jnp.where(do_prefill, target, h)

    misses = s.misses + (jnp.sum(tpot_miss) + jnp.sum(ttft_miss) + jnp.sum(rej_miss)).astype(jnp.int32)
    remaining = jnp.isfinite(load.arrival0_s[a0]) | (p0 < a0) | (head < tail) | jnp.isfinite(bmin2) \
        | (n_free < S)
    truncated = s.truncated | (live & (s.iters + 1 >= shape.max_iters))
    done = s.done | (live & ~remaining) | truncated
    decoded = do_decode.astype(f)
    return State(
        t_s=jnp.where(live, t_new, t), done=done, iters=s.iters + live.astype(jnp.int32), passes=passes,
        slot_rid=slot_rid, slot_end=slot_end, slot_win=slot_win, slot_arr_s=slot_arr, slot_first_s=slot_first,
        free_stack=free_stack, n_free=n_free,
        sum_prompt=sum_prompt, sum_rate=sum_rate, sum_emit=sum_emit, a0=a0, p0=p0, late=late, rel_elig=rel_elig, buf_rid=buf_rid,
        buf_arr_s=buf_arr, ring_rid=ring_rid, ring_arr_s=ring_arr, head=head, tail=tail, coh_t=coh_t,
        coh_n=coh_n, coh_h=coh_h, arrival_s=arrival_s, first_s=first_s, finish_s=finish_s, kv_used=kv_used,
        kv_peak=jnp.maximum(s.kv_peak, kv_used), busy_s=s.busy_s + dt,
        energy_j=s.energy_j + e - hw.device.idle_w * hw.tp * dt,
        decode_steps=s.decode_steps + ran.astype(f), row_passes=s.row_passes + ran.astype(f) * n_active,
        prefill_steps=s.prefill_steps + (do_prefill & jnp.any(admit)).astype(f),
        batch_time=s.batch_time + decoded * n_active * t_dec, area=area, hist=hist, zeros=zeros,
        misses=misses, truncated=truncated, stopped=s.stopped,
    )


def simulate_instance(hw: Hardware, req: Requests, load: Load, shape: SimShape) -> State:
    """Run one instance until every request routed to it has finished (or its load has surely failed).

    Args:
      hw: the (device, lever) configuration.  req: the requests routed to this instance.
      load: first-turn arrivals at this load, ITL window, SLOs, early-stop limit.  shape: static sizes.

    Returns:
      The final :class:`State` (``energy_j`` holds the dynamic energy; add idle power x horizon).
    """
    state = init_state(req, load, shape)
    return jax.lax.while_loop(lambda s: ~s.done, lambda s: _stop(step(hw, req, load, s, shape), load, ()), state)


def simulate_batched(vmapped, hw: Hardware, req: Requests, load: Load, shape: SimShape) -> State:
    """Many instances in lock-step: ``vmapped(f, with_state)`` maps a one-instance function over batch axes.

    The loop runs while any instance is live; :func:`step` leaves a finished instance unchanged, so no
    per-iteration select over whole states is needed. The last batch axis is the cluster's instances (early
    stopping sums over it).
    """
    state = vmapped(lambda h, r, l: init_state(r, l, shape))(hw, req, load)
    body = vmapped(lambda h, r, l, st: step(h, r, l, st, shape), with_state=True)
    return jax.lax.while_loop(lambda st: jnp.any(~st.done), lambda st: _stop(body(hw, req, load, st), load, -1),
                              state)


def _stop(s: State, load: Load, axis) -> State:
    """Early stop of a cluster (its instances on ``axis``) whose attainment is surely below 1 - MISS_SHARE.

    Sure misses: the misses counted so far plus the first turns waiting longer than the TTFT SLO. The window
    holds at most E - drop_n requests, E the requests arriving by ``eligible_to_s``; E <= every request
    (``miss_limit`` = drop_n + 10% of the rest) until every instance is past ``eligible_to_s``, when E is known.
    """
    sure = jnp.sum(s.misses + jnp.maximum(s.late - s.p0, 0), axis=axis, keepdims=True).astype(load.drop_n.dtype)
    known = jnp.all((s.t_s > load.eligible_to_s) | (s.done & ~s.stopped), axis=axis, keepdims=True)
    elig = jnp.sum(load.first_turns + s.rel_elig, axis=axis, keepdims=True)
    drop = jnp.max(load.drop_n, axis=axis, keepdims=True)
    limit = jnp.where(known, drop + MISS_SHARE * (elig - drop), jnp.max(load.miss_limit, axis=axis, keepdims=True))
    stop = ~s.done & (sure > limit)
    return dataclasses.replace(s, done=s.done | stop, stopped=s.stopped | stop)
