"""Row order and counter-based draws shared by the boundary phases.

Every ordered sum of a boundary (swap-in, paged growth, chunk budgets, preemption) walks the rows in arrival
order, ties by slot; one sort per boundary serves them all, because an order over all rows is the order over
any subset of them. :func:`uniform` gives the acceptance draws of a (request, token position), so the same
request sees the same draws whatever else runs beside it (common random numbers).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from sweepkit.serving.engine.updates import next_true, set_at
from sweepkit.xla_options import loop_options_on


def uniform(seed, rid, position):
    """u in (0, 1) from a counter-based hash of (seed, request, token position) (murmur3 finaliser)."""
    x = (seed.astype(jnp.uint64) * jnp.uint64(0x9E3779B97F4A7C15)
         ^ rid.astype(jnp.uint64) * jnp.uint64(0xBF58476D1CE4E5B9)
         ^ position.astype(jnp.uint64) * jnp.uint64(0x94D049BB133111EB))
    for shift, mul in ((33, 0xFF51AFD7ED558CCD), (33, 0xC4CEB9FE1A85EC53)):
        x = (x ^ (x >> jnp.uint64(shift))) * jnp.uint64(mul)
    x = x ^ (x >> jnp.uint64(33))
    return ((x >> jnp.uint64(11)).astype(jnp.float64) + 0.5) / float(1 << 53)


def arrival_order(arr_s, sliced: bool | None = None):
    """(order, inverse) of the rows by arrival time, ties by slot: one sort per boundary, shared by every
    ordered sum of the boundary (an order over all rows is the order over any subset of them). ``sliced``
    (default: :func:`sweepkit.xla_options.loop_options_on`): ranks by counting on the CPU, no sort."""
    S = arr_s.shape[0]
    rows = jnp.arange(S, dtype=jnp.int32)
    if not (loop_options_on() if sliced is None else sliced):
        order = jnp.argsort(arr_s, stable=True)
        return order, jnp.zeros((S,), jnp.int32).at[order].set(rows)

    def by_counting(a):
        inverse = _ranks(a)
        return set_at(jnp.zeros((S,), jnp.int32), inverse, rows, sliced=True), inverse

    def by_sorting(a):
        order = jnp.argsort(a, stable=True).astype(jnp.int32)
        return order, set_at(jnp.zeros((S,), jnp.int32), order, rows, sliced=False)
    return lax.platform_dependent(arr_s, cpu=by_counting, default=by_sorting)


def _ranks(arr_s):
    """Each row's place in arrival order, ties by slot, by counting the rows before it: no sort, so XLA:CPU
    can compile the engine's loop into one function (:mod:`sweepkit.serving.engine.updates`); S^2 comparisons."""
    rows = jnp.arange(arr_s.shape[0])
    earlier = arr_s[None, :] < arr_s[:, None]
    tie = (arr_s[None, :] == arr_s[:, None]) & (rows[None, :] < rows[:, None])
    return jnp.sum(earlier | tie, axis=1).astype(jnp.int32)


def ordered_cumsum(values, order, mask):
    """Inclusive cumulative sum of ``values`` over masked rows in arrival order, [S]."""
    cum = jnp.cumsum(jnp.where(mask, values, 0.0)[order[0]])
    return cum[order[1]]


FEW_ROWS = 8
"""Up to this many masked rows, an ordered sum counts the rows before each masked row instead of ordering all
rows (O(m S) against O(S^2) for the order by counting): the cheaper of the two at few masked rows."""


def masked_cumsum(values, arr_s, mask, order):
    """:func:`ordered_cumsum` of ``values`` over the ``mask`` rows in arrival order (``arr_s`` [S], ties by
    slot); ``order``: a callable giving :func:`arrival_order`, called only where more than :data:`FEW_ROWS`
    rows are masked. Entries outside the mask are meaningless, as there. Exact where the values are whole
    numbers (token and block counts: any order of their sum gives the same float)."""
    S = mask.shape[0]
    rows = jnp.arange(S, dtype=jnp.int32)
    v = jnp.where(mask, values, 0.0)             # as ordered_cumsum: floats

    def one(c):
        i, cum = c
        before = (arr_s < arr_s[i]) | ((arr_s == arr_s[i]) & (rows <= i))
        return next_true(mask, i + 1), jnp.where(rows == i, jnp.sum(jnp.where(before, v, 0.0)), cum)

    def few():
        return lax.while_loop(lambda c: c[0] < S, one, (next_true(mask, 0), jnp.zeros_like(v)))[1]

    return lax.cond(jnp.sum(mask) <= FEW_ROWS, few, lambda: ordered_cumsum(values, order(), mask))


def masked_rank(arr_s, mask, order):
    """Rank of each masked row in arrival order (ties by slot), [S] (unmasked rows: S), through
    :func:`masked_cumsum` (few masked rows: no order of all rows)."""
    S = mask.shape[0]
    rank = masked_cumsum(mask.astype(jnp.int32), arr_s, mask, order) - 1
    return jnp.where(mask, rank, S).astype(jnp.int32)
