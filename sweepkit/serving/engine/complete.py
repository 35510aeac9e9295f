"""The first phase of a boundary: the ended step (or run of decode steps) lands.

Tokens are counted, first tokens and inter-token gaps recorded, finished prompts become decode rows (their
prompt segments enter the prefix cache, pinned), finished rows retire (their turn's segment is cached, their KV
freed, the session's next turn released after its think time), and a disaggregated prefill instance's finished
prompts are handed over to the decode pool. In a plan of several steps a row finishes at the end of its step
and its first token comes at the end of the first step (a prefill step planned with the run after it).

References:
  Yu et al., "Orca: A Distributed Serving System for Transformer-Based Generative Models", OSDI 2022
  (iteration-level scheduling).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.serving.engine.state import DECODE, FREE, HELD, PREFILL, PREFILL_POOL, RESERVED, bin_index
from sweepkit.serving.engine.kv_phases import kv_used
from sweepkit.serving.engine.prefix import chain_nodes, insert_nodes, offset, pin_range, prompt_chains, unpin
from sweepkit.serving.engine.records import Landed


def complete(pol, req, load, iv, first_s, units_m, t, shape, window_from_s):
    """Land the ended step (or run of decode steps): tokens, first tokens, gaps, energy, promotions, prefix
    inserts, retirements. ``units_m``: every prefix node's KV units (:func:`sweepkit.serving.engine.prefix.node_units`).
    ``window_from_s``: the measured window's misses (the early stop's) and the steady set's gaps (ITL) are
    those of arrivals after it.

    Returns:
      (instance arrays, what landed).
    """
    r, plan = iv.rows, iv.plan
    N = req.prompt_tokens.shape[0]
    K = plan.dt.shape[0]
    rid = jnp.maximum(r.rid, 0)
    o = req.output_tokens[rid].astype(jnp.float64)
    on = jnp.arange(K) < plan.n
    E = jnp.where(on[:, None] & (r.phase != FREE)[None, :], plan.E, 0.0)
    got = E[0] > 0
    first = got & (r.out <= 0)
    win = (r.arr_s > window_from_s).astype(jnp.float64)      # the steady set's tokens (ITL)
    ends = plan.ends
    first_at = jnp.where(plan.n <= 1, t, ends[0])      # the first step's end (a prefill step, then a run)
    row_w = jnp.where(got & ~first, win, 0.0)
    row_bin = bin_index(ends[0] - r.last_s, shape.bins)
    stalled = ~got & (E[1] > 0)                           # decode rows that waited out the plan's prefill step
    stall_bin = bin_index(ends[1] - r.last_s, shape.bins)
    run_w = jnp.where(on & (jnp.arange(K) >= 1), jnp.sum(jnp.where(E > 0, win[None, :], 0.0), axis=1), 0.0)
    run_w = run_w - jnp.where(jnp.arange(K) == 1, jnp.sum(jnp.where(stalled, win, 0.0)), 0.0)
    zeros = jnp.sum(jnp.maximum(E - 1.0, 0.0) * win[None, :])
    eligible = (r.arr_s > window_from_s) & (r.arr_s <= load.eligible_to_s)
    ttft_miss = first & (first_at - r.arr_s > load.ttft_slo_s) & eligible
    promote = (r.phase == PREFILL) & (r.done >= r.target)
    out = r.out + jnp.sum(E, axis=0)
    last = jnp.maximum(plan.n - 1, 0)
    r = dataclasses.replace(r, out=out, last_s=jnp.where(jnp.sum(E, axis=0) > 0, t, r.last_s),
                            phase=jnp.where(promote, DECODE, r.phase),
                            alloc=jnp.where((plan.n >= 1) & (r.phase != FREE), plan.alloc[last], r.alloc))
    st = account(pol, plan, on, iv.stats)
    iv = dataclasses.replace(iv, rows=r, stats=st, plan=dataclasses.replace(plan, n=jnp.zeros_like(plan.n)))
    if shape.prefix:
        planned = (plan.promoted > 0) & (plan.n >= 2)       # a prompts' step and (some of) its run
        on = promote & (pol.prefix > 0)
        iv = jax.lax.cond(jnp.any(on), lambda v: insert_prefix(pol, req, v, on, units_m, first_at, shape, planned),
                          lambda v: v, iv)
    fin = (r.phase == DECODE) & (out >= o)
    at = plan.fin_at                   # the step a row finishes in: the run's last, or earlier in a run extended
    fin_s = jnp.where(at >= plan.n - 1, t, ends[jnp.minimum(at, K - 1)])    # past it
    first_t = jnp.where(first, first_at, first_s[rid])
    tpot = (fin_s - first_t) / jnp.maximum(o - 1.0, 1.0)
    tpot_miss = fin & (first_t - r.arr_s <= load.ttft_slo_s) & (o >= 2) & (tpot > load.tpot_slo_s) & eligible
    if shape.prefix:
        release = fin & (pol.prefix > 0)
        iv = jax.lax.cond(jnp.any(release), lambda v: emit_and_release(pol, req, v, release, units_m, fin_s, shape),
                          lambda v: v, iv)
    hand = promote & ~fin & (pol.role == PREFILL_POOL)
    hold = hand & (pol.pull > 0)          # pull: the KV stays here until it lands on the decode pool
    if shape.prefix:
        iv = unpin(iv, req, rid, hand & ~hold, t, units_m, shape)
    r = iv.rows
    k = rid // req.stride
    gone = fin | (hand & ~hold)
    rows = dataclasses.replace(r, phase=jnp.where(gone, FREE, jnp.where(hold, HELD, r.phase)),
                               rid=jnp.where(gone, -1, r.rid), alloc=jnp.where(gone, 0.0, r.alloc),
                               pins=jnp.where(gone, 0.0, r.pins))
    ev = Landed(first_rid=jnp.where(first, rid, N), finish_rid=jnp.where(fin, rid, N), finish_s=fin_s,
                hand_rid=jnp.where(hand, rid, N),
                next_rid=jnp.where(fin & (k + 1 < req.turns), rid + req.stride, N),
                first_s=first_at, itl_bin=jnp.concatenate([row_bin, stall_bin, bin_index(plan.dt, shape.bins)]),
                itl_w=jnp.concatenate([row_w, jnp.where(stalled, win, 0.0), run_w]), zeros=zeros,
                misses=(jnp.sum(ttft_miss) + jnp.sum(tpot_miss)).astype(jnp.int32))
    return dataclasses.replace(iv, rows=rows), ev


def account(pol, plan, on, st):
    """The landed steps' accumulators: joules, busy seconds, steps, decode rows, and the time integrals of KV
    use and running rows, step by step where a run's rows grow or finish (``plan.kv_delta``, ``fin``).
    KV use is a fraction, capped at the whole (the prefix cache's unpinned segments give way to growth)."""
    dt = jnp.sum(jnp.where(on, plan.dt, 0.0))
    gone = jnp.where(on, jnp.cumsum(plan.fin) - plan.fin, 0.0)     # rows finished earlier in the run
    frac = plan.frac
    step_frac = jnp.minimum(frac + plan.kv_delta / jnp.maximum(pol.kv_units, 1.0), jnp.maximum(frac, 1.0))
    return dataclasses.replace(
        st, kv_peak=jnp.maximum(st.kv_peak, jnp.max(jnp.where(on, step_frac, 0.0))),
        energy_j=st.energy_j + jnp.sum(jnp.where(on, plan.en, 0.0)), busy_s=st.busy_s + dt,
        kv_area=st.kv_area + frac * dt + jnp.sum(jnp.where(on, plan.dt * (step_frac - frac), 0.0)),
        batch_area=st.batch_area + plan.rows * dt - jnp.sum(plan.dt * gone),
        steps=st.steps + plan.n, decode_rows=st.decode_rows + jnp.sum(jnp.where(on, plan.dec, 0.0)) - jnp.sum(gone))


def insert_prefix(pol, req, iv, on, units, t, shape, planned=False):
    """Rows whose prompt completed put its chain segments in the cache, pinned, last used at ``t`` (s); their
    private KV shrinks to the uncached rest (the KV moves into the cache). All or none per boundary, as room
    allows. ``planned``: the prompts' step was planned with the decode run after it, which checked the room
    and grew the rows from the shrunk allocation (:func:`sweepkit.serving.engine.schedule.cached_prompts`)."""
    r = iv.rows
    ids, valid, _, covered, alloc, need = prompt_chains(iv.c_in, req, r, on, units, pol.block_tokens, shape,
                                                        offset(iv), pol.state_units)
    private, cache, pinned = kv_used(pol, iv, units)
    ok = (private + pinned + need <= pol.kv_units) | planned
    on = on & ok
    put = on[:, None] & valid
    iv = insert_nodes(iv, ids, put, units)
    n_valid = jnp.sum(valid, axis=-1).astype(jnp.float64)
    iv = pin_range(iv, ids, valid, r.pins, jnp.where(on, n_valid, r.pins), t, units)
    rows = dataclasses.replace(r, alloc=jnp.where(on & ~planned, alloc, r.alloc), hit=jnp.where(on, covered, r.hit),
                               pins=jnp.where(on, n_valid, r.pins))
    return dataclasses.replace(iv, rows=rows)


def emit_and_release(pol, req, iv, fin, units, fin_s, shape):
    """Finished rows cache their turn's segment (multi-turn, whole chain pinned, room allowing), then unpin;
    both last used at the row's finish, ``fin_s`` [S] (s). All or none per boundary: a run extended past a
    finish (:mod:`sweepkit.serving.engine.decode_run`) is planned only where every one fits at its own step."""
    r = iv.rows
    rid = jnp.maximum(r.rid, 0)
    ids, toks, valid = chain_nodes(req, rid, shape)
    node = shape.systems + rid
    whole = r.pins >= jnp.sum(valid, axis=-1)
    emit = fin & whole & ~iv.c_in[offset(iv) + node] & (req.turns > 1)
    need = jnp.sum(jnp.where(emit, units[node] - r.alloc, 0.0))
    private, cache, pinned = kv_used(pol, iv, units)
    emit = emit & (private + pinned + need <= pol.kv_units)
    iv = insert_nodes(iv, node[:, None], emit[:, None], units, last_s=fin_s[:, None])
    return pin_range(iv, ids, valid, jnp.zeros_like(r.pins), jnp.where(fin, r.pins, 0.0), fin_s, units, delta=-1.0)


def land(pol, req, iv, land_s, t, units_m, shape):
    """Pull hand-off: KV that has landed by ``t`` frees the prefill instance's hold (and its pinned
    segments) and turns the decode instance's reservation into a decode row.

    Args:
      land_s: [N] landing time of each request's KV transfer (inf: not started).  t: the boundary time, s.
    """
    r = iv.rows
    rid = jnp.maximum(r.rid, 0)
    arrived = land_s[rid] <= t
    free = (r.phase == HELD) & arrived
    join = (r.phase == RESERVED) & arrived
    if shape.prefix:
        iv = unpin(iv, req, rid, free, t, units_m, shape)
    rows = dataclasses.replace(r, phase=jnp.where(free, FREE, jnp.where(join, DECODE, r.phase)),
                               rid=jnp.where(free, -1, r.rid), alloc=jnp.where(free, 0.0, r.alloc),
                               pins=jnp.where(free, 0.0, r.pins))
    return dataclasses.replace(iv, rows=rows)
