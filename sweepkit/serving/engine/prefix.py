"""Prefix cache of one instance as arrays: whole prompt segments in a chain, pins, LRU eviction by threshold.

Segments (the units of reuse): node ``j < systems`` is shared system prompt j; node ``systems + r`` is what
request r (turn k of session s) adds to its session's history, its new input plus its output. The chain of
turn k is (system prompt, turn 0, ..., turn k - 1) of its session; a lookup walks it from the root and stops at
the first segment not cached, and the hit is dropped back segment by segment until it leaves the last
prompt token to compute. A row pins the chain it uses; a segment is evictable when nothing pins it.

Eviction (LRU): every use of a segment also uses its ancestors, so an ancestor is never older than its
descendants, and the set {unpinned, last use <= tau} is closed under descendants. Evicting the smallest such
set covering the shortfall is least-recently-used eviction of leaves, repeated; tau is the oldest last use
that covers it, found by taking the unpinned segments' last uses oldest first.

References:
  Kwon et al., "Efficient Memory Management for LLM Serving with PagedAttention" (vLLM), SOSP 2023,
  arXiv:2309.06180 (blocks, sec. 4); Zheng et al., "SGLang" (RadixAttention, LRU of leaves), NeurIPS 2024,
  arXiv:2312.07104 (sec. 3).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.serving.engine.updates import rows_updated

SHARED_COLUMNS = 1
"""Chain positions where several rows' chains may hold one node: the shared system prompt, position 0."""


def chain_nodes(req, rid: jax.Array, shape):
    """Node ids [T+1], tokens [T+1] and validity [T+1] of the chain of request ``rid`` (any shape of rid)."""
    B, T = req.stride, shape.turns
    k, s = rid // B, rid % B
    sys_id = req.system_id[rid]
    ids = [sys_id] + [shape.systems + j * B + s for j in range(T - 1)]
    toks = [req.system_tokens[sys_id]] + [req.segment_tokens[jnp.minimum(j * B + s, req.segment_tokens.shape[0] - 1)]
                                          for j in range(T - 1)]
    valid = [req.system_tokens[sys_id] > 0] + [j < k for j in range(T - 1)]
    return jnp.stack(ids, -1), jnp.stack(toks, -1).astype(jnp.float64), jnp.stack(valid, -1)


def lookup(c_in: jax.Array, req, rid: jax.Array, target: jax.Array, shape, off=0):
    """Cached prefix of each request: (hit tokens, chain nodes hit) with hit <= target - 1.

    Args:
      c_in: cached flags, the instance's M from ``off``.  rid: [A] request ids.  target: [A] prompt tokens to
        compute.
    """
    ids, toks, valid = chain_nodes(req, rid, shape)
    present = valid & c_in[off + ids]
    run = jnp.cumprod(present | ~valid, axis=-1).astype(bool) & valid
    cum = jnp.cumsum(jnp.where(run, toks, 0.0), axis=-1)
    use = run & (cum <= target[..., None] - 1.0)
    return jnp.sum(jnp.where(use, toks, 0.0), axis=-1), jnp.sum(use, axis=-1).astype(jnp.float64)


def unpinned_hit_units(c_refs, units, req, rid, nodes, shape, off=0):
    """[A] KV units of the first ``nodes`` chain segments of each request that nothing pins now: cached room
    that counts as free (evictable) until an admission pins it, so an admission needs it as well as its own
    blocks (a segment two requests share counts for each: conservative)."""
    ids, _, valid = chain_nodes(req, rid, shape)
    use = valid & (jnp.cumsum(valid, axis=-1) <= nodes[..., None])
    return jnp.sum(jnp.where(use & (c_refs[off + ids] <= 0), units[ids], 0.0), axis=-1)


def prompt_chains(c_in, req, rows, on, units, block_tokens, shape, off=0, state_units=0.0):
    """What inserting the chains of the ``on`` rows' completed prompts into the cache means: (node ids
    [S, T+1], their validity, the entries not cached yet, the tokens the chain covers [S], each row's
    allocation after the insert [S] (the uncached rest of its prompt), and the KV units the insert needs
    beyond those it frees: new nodes' units less the rows' shrinkage; a node two rows bring counts twice,
    so the room check is conservative). A row keeps its ``state_units`` (linear-attention state) private."""
    rid = jnp.maximum(rows.rid, 0)
    ids, toks, valid = chain_nodes(req, rid, shape)
    new = on[:, None] & valid & ~c_in[off + ids]
    covered = jnp.sum(jnp.where(valid, toks, 0.0), axis=-1)
    alloc = jnp.where(on, jnp.ceil(jnp.maximum(rows.target - covered, 0.0) / block_tokens) + state_units,
                      rows.alloc)
    need = jnp.sum(jnp.where(new, units[ids], 0.0)) - jnp.sum(rows.alloc - alloc)
    return ids, valid, new, covered, alloc, need


def node_units(req, shape, block_tokens: jax.Array) -> jax.Array:
    """KV units of every node [M]: ceil(tokens / block)."""
    toks = jnp.concatenate([req.system_tokens, req.segment_tokens]).astype(jnp.float64)
    return jnp.ceil(toks / block_tokens)


def offset(iv):
    """The instance's first segment in its cache arrays (``c_off``: where a boundary holds every instance's
    arrays, flat, in a program with pools; 0 where they hold one instance's: :data:`loop._CACHE`)."""
    return iv.c_off


def evict(iv, units, shortfall):
    """Evict the instance's least-recently-used unpinned segments covering ``shortfall`` units (none if <= 0).

    Returns:
      (the instance arrays with the evicted segments' flags cleared, units evicted).
    """
    off, M = offset(iv), units.shape[0]
    seg = lambda a: jax.lax.dynamic_slice(a, (off,), (M,))  # noqa: E731

    def evicted(v):
        c_in, gone = _evict(seg(v.c_in), seg(v.c_refs), seg(v.c_last_s), units, shortfall)
        return dataclasses.replace(v, c_in=jax.lax.dynamic_update_slice(v.c_in, c_in, (off,))), gone

    return jax.lax.cond(shortfall > 0, evicted, lambda v: (v, jnp.zeros((), units.dtype)), iv)


def _evict(c_in, c_refs, c_last_s, units, shortfall):
    """:func:`evict` where the shortfall is positive: the unpinned segments' last uses are taken oldest first,
    every segment of one last use at once (a chain used together is stamped together), until they cover the
    shortfall or none is left. Two passes over the segments a last use taken (its time, then its units);
    an eviction takes a few (a bisection of the time axis takes 24 to resolve 2^-24 of the span)."""
    last = jnp.where(c_in & (c_refs <= 0), c_last_s, jnp.inf)      # one array read by every pass
    # Whole units as integers: their sums vectorize in any order and stay exact (the cached units are at most
    # the instance's KV units, far below 2^31).
    whole = units.astype(jnp.int32)

    def short(c):
        tau, got = c
        return (got < shortfall) & (tau < jnp.inf)

    def take_next(c):
        tau, got = c
        oldest = jnp.min(jnp.where(last > tau, last, jnp.inf))
        return oldest, got + jnp.sum(jnp.where(last == oldest, whole, 0), dtype=jnp.int32)

    tau, _ = jax.lax.while_loop(short, take_next, (jnp.asarray(-jnp.inf, last.dtype), jnp.zeros((), jnp.int32)))
    gone = (last <= tau) & (last < jnp.inf)
    return c_in & ~gone, jnp.sum(jnp.where(gone, units, 0.0))


def pin_range(iv, ids, valid, lo, hi, t, units, delta=1.0):
    """Add ``delta`` pins to valid chain positions lo < position <= hi (1-based among valid) of each row, and
    stamp their last use ``t`` (s; one time, or one per row: a run's rows finish at their own steps' ends).
    A stamp is never older than the one it replaces (time only moves on), so the latest of several wins.
    The instance's pinned units ``c_pinned`` follow: a cached node's units move where its pins cross zero
    (``units``: every node's KV units)."""
    pos = jnp.cumsum(valid.astype(jnp.float64), axis=-1)
    on = valid & (pos > lo[:, None]) & (pos <= hi[:, None])
    stamp = jnp.broadcast_to(jnp.reshape(t, jnp.shape(t) + (1,) * (on.ndim - jnp.ndim(t))), on.shape)
    off = offset(iv)

    def crossed(i, refs, add, cached, u):
        return (jnp.where(cached, u * ((refs + add > 0).astype(u.dtype) - (refs > 0)), 0.0),)

    at = jnp.where(on, off + ids, iv.c_in.shape[0])
    (refs, last), (moved,) = rows_updated([(iv.c_refs, at, jnp.where(on, delta, 0.0), "add"),
                                           (iv.c_last_s, at, stamp, "max")],
                                          tally=crossed, repeats=SHARED_COLUMNS,
                                          gathered=(iv.c_in[off + ids], units[ids]))
    return dataclasses.replace(iv, c_refs=refs, c_last_s=last, c_pinned=iv.c_pinned + moved)


def pin_chains(iv, req, rid, upto, t, units, shape, delta=1.0):
    """Add ``delta`` pins to the first ``upto`` [S] chain segments of each row's request (``rid``), stamped
    last used at ``t`` (s); nothing done where no row has any (:func:`pin_range`)."""
    def pinned(v):
        ids, _, valid = chain_nodes(req, rid, shape)
        return pin_range(v, ids, valid, jnp.zeros_like(upto), upto, t, units, delta)

    return jax.lax.cond(jnp.any(upto > 0), pinned, lambda v: v, iv)


def unpin(iv, req, rid, mask, t, units, shape):
    """Release the pins the ``mask`` rows hold on their chains (``rid``: their request ids), stamped last used at
    ``t`` (s); nothing done where no such row holds a pin."""
    return pin_chains(iv, req, rid, jnp.where(mask, iv.rows.pins, 0.0), t, units, shape, -1.0)


def insert_nodes(iv, ids, on, units, last_s=None):
    """Cache the nodes of chain entries ``ids`` where ``on`` (stamped last used at ``last_s``, shaped as
    ``ids``, where given), the running totals ``c_units`` and ``c_pinned`` moved by the nodes not cached
    before (their units; pinned: those something pins), so that no boundary sums over every segment
    (:func:`sweepkit.serving.engine.kv_phases.kv_used`). The units are whole numbers: the totals stay exact."""
    off = offset(iv)

    def added(i, was, _, u, pinned):
        u = jnp.where(was, 0.0, u)
        return u, jnp.where(pinned, u, 0.0)

    at = jnp.where(on, off + ids, iv.c_in.shape[0])
    stamped = [] if last_s is None else [(iv.c_last_s, at, last_s, "set")]
    (c_in, *last), (cached, pinned) = rows_updated([(iv.c_in, at, True, "set")] + stamped, tally=added,
                                                    repeats=SHARED_COLUMNS,
                                                    gathered=(units[ids], iv.c_refs[off + ids] > 0))
    iv = dataclasses.replace(iv, c_in=c_in, c_units=iv.c_units + cached, c_pinned=iv.c_pinned + pinned)
    return iv if last_s is None else dataclasses.replace(iv, c_last_s=last[0])
