"""Indexed updates of the engine's state: ``a[idx] = v`` (or ``+=``, ``min=``, ``max=``) as one
dynamic-update-slice per index on XLA:CPU where :mod:`sweepkit.xla_options` compiles the engine's loop into one
function (the default), a scatter otherwise (``SWEEPKIT_XLA_OPTIONS=0``).

Why: XLA:CPU runs a ``while_loop`` op by op (a runtime dispatch per kernel, several hundred per engine
iteration) unless the whole loop can be compiled into one function, which its
small-while-loop pass does only where the loop holds no scatter or sort (``SmallWhileLoopHoistingPass``,
https://github.com/openxla/xla/blob/main/xla/service/cpu/small_while_loop_hoisting_pass.cc). The engine's
updates touch a handful of entries (a row, a request, a session), so a short loop of slice updates costs
next to nothing inside that function, as long as XLA updates the array in place: such a loop inside a
``lax.cond`` that is itself a branch of another ``lax.cond`` was found copying its whole array twice on every
trip (the disaggregated push hand-off's 256-row updates of the per-request arrays: ten times a chat lane's
CPU), so the hand-off keeps them out of nested branches (:mod:`sweepkit.serving.engine.handoff`). On other platforms
(GPU, TPU) the same calls lower to scatters.

Semantics are JAX's ``.at[idx].op(v, mode="drop")``: negative indices count from the end, an index still
out of range after that is skipped, and repeated indices apply in order (the last ``set`` wins, ``add``
sums in index order), as XLA:CPU's scatter does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from sweepkit.xla_options import loop_options_on

_COMBINE = {"set": lambda old, new: new, "add": jnp.add, "min": jnp.minimum, "max": jnp.maximum}


def set_at(a, idx, v, sliced: bool | None = None):
    """``a`` with ``a[idx] = v`` (JAX's ``a.at[idx].set(v, mode="drop")``); ``sliced``: slice updates on the
    CPU (default: :func:`sweepkit.xla_options.loop_options_on`)."""
    return _update(a, idx, v, "set", sliced)


def add_at(a, idx, v, sliced: bool | None = None):
    """``a`` with ``a[idx] += v`` (JAX's ``a.at[idx].add(v, mode="drop")``)."""
    return _update(a, idx, v, "add", sliced)


def min_at(a, idx, v, sliced: bool | None = None):
    """``a`` with ``a[idx] = min(a[idx], v)`` (JAX's ``a.at[idx].min(v, mode="drop")``)."""
    return _update(a, idx, v, "min", sliced)


def max_at(a, idx, v, sliced: bool | None = None):
    """``a`` with ``a[idx] = max(a[idx], v)`` (JAX's ``a.at[idx].max(v, mode="drop")``)."""
    return _update(a, idx, v, "max", sliced)


def _update(a, idx, v, op: str, sliced: bool | None):
    idx = idx if isinstance(idx, tuple) else (idx,)
    if not (loop_options_on() if sliced is None else sliced):
        return _scattered(a, idx, v, op)
    return lax.platform_dependent(a, idx, v, cpu=lambda a, idx, v: _sliced(a, idx, v, op),
                                  default=lambda a, idx, v: _scattered(a, idx, v, op))


def _scattered(a, idx, v, op: str):
    ref = a.at[idx]
    return {"set": ref.set, "add": ref.add, "min": ref.min, "max": ref.max}[op](v, mode="drop")


def _sliced(a, idx, v, op: str):
    """One dynamic-update-slice per index row, in order; a loop where there are several."""
    idx = jnp.broadcast_arrays(*(jnp.asarray(i, jnp.int32) for i in idx))
    lead, tail = len(idx), a.shape[len(idx):]
    flat = [i.reshape(-1) for i in idx]
    count = flat[0].shape[0]
    vals = jnp.broadcast_to(jnp.asarray(v), idx[0].shape + tail).reshape((count,) + tail).astype(a.dtype)
    combine = _COMBINE[op]

    def one(k, a):
        pos = [f[k] for f in flat]
        pos = [jnp.where(p < 0, p + n, p) for p, n in zip(pos, a.shape)]
        inside = jnp.all(jnp.stack([(p >= 0) & (p < n) for p, n in zip(pos, a.shape)]))
        start = [jnp.clip(p, 0, n - 1) for p, n in zip(pos, a.shape)] + [jnp.int32(0)] * len(tail)
        old = lax.dynamic_slice(a, start, (1,) * lead + tail)
        new = combine(old, vals[k].reshape(old.shape)).astype(a.dtype)
        return lax.dynamic_update_slice(a, jnp.where(inside, new, old), start)

    if count == 1:
        return one(0, a)
    return lax.fori_loop(0, count, one, a)


def first_true(mask, size: int, fill: int, sliced: bool | None = None):
    """Indices of the first ``size`` true entries of a vector, ``fill`` past its last true one (JAX's
    ``jnp.nonzero(mask, size=size, fill_value=fill)[0]``, a scatter); without scatters where ``sliced``
    (default: :func:`sweepkit.xla_options.loop_options_on`): entry k is the number of places whose running
    count of trues is still at most k, size x len(mask) comparisons."""
    if not (loop_options_on() if sliced is None else sliced):
        return jnp.nonzero(mask, size=size, fill_value=fill)[0]
    count = jnp.cumsum(mask.astype(jnp.int32))
    k = jnp.arange(size, dtype=jnp.int32)
    idx = jnp.sum(count[None, :] <= k[:, None], axis=1).astype(jnp.int32)
    return jnp.where(k < count[-1], idx, fill)


def rows_updated(updates, sliced: bool | None = None, tally=None, repeats: int | None = None, gathered=()):
    """Several indexed updates that share one list of positions, done in one pass over the positions that
    hold a valid index: ``updates`` is a list of ``(a, idx, v, op)`` (``a`` 1-D; op one of "set", "add",
    "min", "max"; ``idx`` [K] or [K, P], every one the same shape; out of range: skipped; ``v`` broadcast to
    ``idx``), and the result is the list of updated arrays, each as :func:`set_at` (or ``add_at``, ...) with
    the flattened ``idx`` would give it (repeated indices apply in row-major order).

    On the CPU, where the engine's loop is one function (:func:`sweepkit.xla_options.loop_options_on`), a
    ``while_loop`` visits only the rows k that hold a valid index, each found by one vector search over the K
    rows, and updates its P entries: a boundary's events touch a few of its 256 rows, so this is a few trips
    instead of K x P per array. Elsewhere, one scatter per array.

    ``tally``: sums over the valid entries of ``tally(i, old, v)`` (elementwise jnp code, a tuple of arrays
    shaped as ``i``): the first array's index ``i``, its value ``old`` there just before the entry's update
    (after the entries before it in row-major order) and the entry's value ``v``; the result is then
    ``(arrays, sums)``; ``gathered``: arrays shaped as ``idx``, read before any update, whose entries the tally
    takes as further arguments (``tally(i, old, v, *gathered)``). ``repeats``: an index may repeat only among
    the first ``repeats`` columns (default: all), every other column's valid indices being distinct from all
    other entries': an entry's ``old`` looks for earlier writes among those columns only. The old values
    come from one gather before the loop, which the loop takes as an input (so do ``gathered``): a read of an
    array beside its in-place update, not ordered before it by the data, costs XLA a copy of the whole array.
    """
    arrays, idx, vals, ops = (list(u) for u in zip(*updates))

    def scattered(arrays, idx, vals):
        return [_scattered(a, (jnp.reshape(i, (-1,)),),
                           jnp.broadcast_to(jnp.asarray(v), jnp.shape(i)).reshape(-1).astype(a.dtype), op)
                for a, i, v, op in zip(arrays, idx, vals, ops)]

    def counted(arrays, idx, vals):
        at, ok = _positions(arrays[0], idx[0])
        v, old = jnp.broadcast_to(jnp.asarray(vals[0]), at.shape).astype(arrays[0].dtype), arrays[0][at]
        R = min(at.shape[1], repeats or at.shape[1])
        flat = jnp.arange(at.shape[0] * R).reshape(-1, R)
        olds = jnp.concatenate([_before(old[:, :R], at[:, :R], flat, at[:, :R], v[:, :R], ok[:, :R], ops[0]),
                                old[:, R:]], axis=1)
        extra = [jnp.reshape(g, at.shape) for g in gathered]
        sums = tuple(jnp.sum(jnp.where(ok, g, jnp.zeros_like(g))) for g in tally(at, olds, v, *extra))
        return scattered(arrays, idx, vals), sums

    scatter_form = scattered if tally is None else counted
    if not (loop_options_on() if sliced is None else sliced):
        return scatter_form(arrays, idx, vals)
    return lax.platform_dependent(arrays, idx, vals, default=scatter_form,
                                  cpu=lambda a, i, v: _sparse_rows(a, i, v, ops, tally, repeats, gathered))


def _positions(a, idx):
    """``idx`` ([K] or [K, P]) as [K, P] positions into ``a``: (clipped to its range, valid), negative ones
    counting from the end."""
    i = jnp.asarray(idx, jnp.int32).reshape(jnp.shape(idx)[0], -1)
    i = jnp.where(i < 0, i + a.shape[0], i)
    return jnp.clip(i, 0, a.shape[0] - 1), (i >= 0) & (i < a.shape[0])


def _before(pre, at, pos, block_at, block_v, block_ok, op):
    """The value at index ``at`` just before the entry at row-major position ``pos`` of the block (the
    columns where indices may repeat): ``pre`` (the value before any update) moved by the block's valid
    entries before it at the same index (a sum for "add": exact for whole numbers). Elementwise in
    ``pre``, ``at`` and ``pos``; the block's arrays [K, R]."""
    lead = (1,) * jnp.ndim(pos)
    blk = lambda x: jnp.reshape(x, lead + block_at.shape)  # noqa: E731  the block after the entries' axes
    ix = (...,) + (None,) * 2
    flat = blk(jnp.arange(block_at.size))
    same = (flat < jnp.asarray(pos)[ix]) & blk(block_ok) & (blk(block_at) == jnp.asarray(at)[ix])
    v = blk(block_v)
    if op == "add":
        return pre + jnp.sum(jnp.where(same, v, jnp.zeros_like(v)), axis=(-2, -1))
    if op == "set":
        last = jnp.max(jnp.where(same, flat, -1), axis=(-2, -1))
        return jnp.where(last >= 0, block_v.reshape(-1)[jnp.maximum(last, 0)], pre)
    fold = jnp.max if op == "max" else jnp.min
    return _COMBINE[op](pre, fold(jnp.where(same, v, jnp.asarray(pre)[ix]), axis=(-2, -1)))


def next_true(mask, k):
    """The first index >= ``k`` where ``mask`` [K] is true, else K: the next trip of a loop over the true
    entries only (one vector search a trip)."""
    K = mask.shape[0]
    m = mask & (jnp.arange(K, dtype=jnp.int32) >= k)
    return jnp.where(jnp.any(m), jnp.argmax(m), K).astype(jnp.int32)


def _sparse_rows(arrays, idx, vals, ops, tally=None, repeats=None, gathered=()):
    """:func:`rows_updated`'s loop on the CPU: the updated arrays, and with a tally ``(arrays, sums)``."""
    shape = jnp.shape(idx[0])
    K, P = shape[0], (shape[1] if len(shape) > 1 else 1)
    at, ok = zip(*(_positions(a, i) for a, i in zip(arrays, idx)))
    vals = [jnp.broadcast_to(jnp.asarray(v), shape).reshape(K, P).astype(a.dtype) for v, a in zip(vals, arrays)]
    any_ok = jnp.any(jnp.stack([jnp.any(o, axis=1) for o in ok]), axis=0)
    R = min(P, repeats or P)
    old = None if tally is None else arrays[0][at[0]]       # [K, P]: the tally's, read before the loop
    gathered = [jnp.reshape(g, (K, P)) for g in gathered]
    shapes = () if tally is None else jax.eval_shape(tally, at[0], old, vals[0], *gathered)
    zero = tuple(jnp.zeros((), x.dtype) for x in shapes)

    def body(carry):
        k, arrs, sums = carry
        out = []
        for a, i, v, good, op in zip(arrs, at, vals, ok, ops):
            for j in range(P):
                was = lax.dynamic_slice(a, (i[k, j],), (1,))
                new = _COMBINE[op](was, v[k, j].reshape(was.shape)).astype(a.dtype)
                a = lax.dynamic_update_slice(a, jnp.where(good[k, j], new, was), (i[k, j],))
            out.append(a)
        for j in range(P if tally is not None else 0):
            was = old[k, j] if j >= R else _before(old[k, j], at[0][k, j], k * R + j, at[0][:, :R], vals[0][:, :R],
                                                   ok[0][:, :R], ops[0])
            got = tally(at[0][k, j], was, vals[0][k, j], *(g[k, j] for g in gathered))
            sums = tuple(s + jnp.where(ok[0][k, j], g, jnp.zeros_like(g)) for s, g in zip(sums, got))
        return next_true(any_ok, k + 1), out, sums

    _, arrays, sums = lax.while_loop(lambda c: c[0] < K, body, (next_true(any_ok, 0), list(arrays), zero))
    return arrays if tally is None else (arrays, sums)
