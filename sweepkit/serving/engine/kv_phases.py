"""KV memory phases of a boundary: units held, swap-in, paged growth and preemption.

Memory is counted in units (a token when reserved, a 16-token block when paged); the prefix cache's unpinned
segments count as free room. When paged rows cannot grow, the latest arrivals are preempted (LIFO), by
recompute (dropped, queued at the front) or by swap (blocks moved out over the host link, charged to the
next step, and back in, earliest arrival first, while they fit).

References:
  Kwon et al., "Efficient Memory Management for Large Language Model Serving with PagedAttention" (vLLM),
  SOSP 2023, arXiv:2309.06180 (paged KV, preemption by recompute or swap, sec. 4.5).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.serving.engine.state import DECODE, FREE, HELD, PREFILL, RESERVED, SWAPPED
from sweepkit.serving.engine.prefix import unpin
from sweepkit.serving.engine.records import Preempted
from sweepkit.serving.engine.row_order import masked_cumsum, masked_rank, ordered_cumsum
from sweepkit.serving.engine.updates import set_at


def kv_used(pol, iv, units):
    """(private units held, cache units, pinned cache units) of an instance; the cache's two are running
    totals (:func:`sweepkit.serving.engine.prefix.insert_nodes`), not sums over its segments."""
    phase = iv.rows.phase
    held = (phase == PREFILL) | (phase == DECODE) | (phase == HELD) | (phase == RESERVED)
    private = jnp.sum(jnp.where(held, iv.rows.alloc, 0.0))
    return private, iv.c_units, iv.c_pinned


def parked(rows):
    """[S] rows parked by a pull hand-off: held on a prefill instance or reserved on a decode instance."""
    return (rows.phase == HELD) | (rows.phase == RESERVED)


def parked_units(rows):
    """KV units of the parked rows (:func:`parked`)."""
    return jnp.sum(jnp.where(parked(rows), rows.alloc, 0.0))


def _swap_bytes(pol, units):
    return units * pol.block_tokens * pol.kv_token_bytes


def _swap_cost(pol, units):
    """Seconds and joules of moving ``units`` blocks over the host link (per-block latency + bytes / rate)."""
    b = _swap_bytes(pol, units)
    return units * pol.host_block_s + b / pol.host_bytes_per_s, b * 8.0 * pol.host_j_per_bit


def swap_in(pol, req, iv, t, units_m, order):
    """Swapped-out rows return, earliest arrival first, while they fit (no watermark) under the batch cap."""
    r = iv.rows
    sw = r.phase == SWAPPED
    private, cache, pinned = kv_used(pol, iv, units_m)
    n_run = jnp.sum((r.phase == PREFILL) | (r.phase == DECODE))
    order = order()
    cum_u = ordered_cumsum(r.alloc, order, sw)
    cum_n = ordered_cumsum(jnp.ones_like(r.alloc), order, sw)
    fits = sw & (private + pinned + cum_u <= pol.kv_units) & (n_run + cum_n <= pol.batch_cap)
    back = sw & (ordered_cumsum((sw & ~fits).astype(jnp.float64), order, sw) <= 0)
    units = jnp.sum(jnp.where(back, r.alloc, 0.0))
    sec, joules = _swap_cost(pol, units)
    st = iv.stats
    st = dataclasses.replace(st, swap_in_bytes=st.swap_in_bytes + _swap_bytes(pol, units), swap_j=st.swap_j + joules)
    rows = dataclasses.replace(r, phase=jnp.where(back, DECODE, r.phase))
    return dataclasses.replace(iv, rows=rows, owed=iv.owed + sec, stats=st)


def grow(pol, req, iv, units_m, order, shape):
    """Paged rows' growth for a decode or mixed step, and the rows the LIFO rule preempts when room runs out.
    In a program without paged KV (:class:`Shape` ``paged``) no row can grow: every running row keeps what it
    holds and survives.

    Returns:
      (grown allocation [S], survivors [S], preempted [S]).
    """
    r = iv.rows
    dec = r.phase == DECODE
    run = dec | (r.phase == PREFILL)
    if not shape.paged:
        return r.alloc, run, jnp.zeros_like(run)
    rid = jnp.maximum(r.rid, 0)
    p = req.prompt_tokens[rid].astype(jnp.float64)
    o = req.output_tokens[rid].astype(jnp.float64)
    pos = jnp.minimum(p + r.out + pol.inst.gamma, p + o) - r.hit
    need = jnp.where(dec & (pol.paged > 0), jnp.ceil(pos / pol.block_tokens) + pol.state_units, r.alloc)
    alloc = jnp.maximum(need, r.alloc)
    private, cache, pinned = kv_used(pol, iv, units_m)
    other = pinned + parked_units(r)      # held and reserved hand-offs are never preempted
    short = jnp.sum(jnp.where(run, alloc, 0.0)) + other > pol.kv_units
    survive = jax.lax.cond(short, lambda: run & (masked_cumsum(alloc, r.arr_s, run, order) + other <= pol.kv_units),
                           lambda: run)
    return alloc, survive, run & ~survive


def not_preempted(rows, N: int) -> Preempted:
    """The event fields of :func:`preempt` where no row is preempted (request id N: none)."""
    return Preempted(pre_rid=jnp.full_like(rows.rid, N), pre_out=rows.out, pre_last_s=rows.last_s)


def preempt(pol, req, iv, pre, t, order, units_m, shape):
    """Preempted rows: swapped out (decode rows, swap on) or dropped and queued at the front for recompute."""
    r = iv.rows
    S, N, W = r.rid.shape[0], shape.requests, iv.queue.shape[0]
    rid = jnp.maximum(r.rid, 0)
    to_swap = pre & (pol.swap > 0) & (r.phase == DECODE)
    rec = pre & ~to_swap
    n_rec = jnp.sum(rec).astype(jnp.int32)
    rank = jax.lax.cond(n_rec > 0, lambda: masked_rank(r.arr_s, rec, order), lambda: jnp.full_like(r.rid, S))
    head = iv.head - n_rec
    queue = set_at(iv.queue, jnp.where(rec, head + rank - iv.qbase, W), rid)   # the window
    units = jnp.sum(jnp.where(to_swap, r.alloc, 0.0))
    sec, joules = _swap_cost(pol, units)
    p = req.prompt_tokens[rid].astype(jnp.float64)
    st = iv.stats
    st = dataclasses.replace(st, preemptions=st.preemptions + jnp.sum(pre),
                             recompute_tokens=st.recompute_tokens + jnp.sum(jnp.where(rec, p + r.out, 0.0)),
                             swap_out_bytes=st.swap_out_bytes + _swap_bytes(pol, units), swap_j=st.swap_j + joules)
    if shape.prefix:
        iv = unpin(iv, req, rid, rec, t, units_m, shape)
    rows = dataclasses.replace(
        r, phase=jnp.where(rec, FREE, jnp.where(to_swap, SWAPPED, r.phase)), rid=jnp.where(rec, -1, r.rid),
        alloc=jnp.where(rec, 0.0, r.alloc), pins=jnp.where(rec, 0.0, r.pins))
    ev = dataclasses.replace(not_preempted(r, N), pre_rid=jnp.where(rec, rid, N))
    return dataclasses.replace(iv, rows=rows, queue=queue, head=head, owed=iv.owed + sec, stats=st), ev
