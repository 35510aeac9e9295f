"""A blocked minimum over a per-session array: the earliest pending time in O(sqrt(B)) per query and update.

The cluster engine asks every iteration for the earliest released turn (``State.buf_s``) and the earliest KV
landing (``State.hand_s``), arrays of one entry per session. A plain ``argmin`` reads all B entries, several
times per iteration; here the array is cut into blocks of b ~ sqrt(B)
entries whose minima are kept beside it, so a query reads B / b minima and one block, and a point update
refreshes one block's minimum.

Updates: :func:`refresh` after one entry changed either way (a pending turn routed, its entry set to inf),
:func:`lowered` after entries were lowered (turns released or KV transfers started: the entries were inf).

Invariant: ``mins[k] = min(values[k b : (k + 1) b])`` (inf past the end); :func:`argmin` returns the first
index of the minimum, as ``jnp.argmin`` does.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from sweepkit.serving.engine.updates import min_at, set_at


def block_size(n: int) -> int:
    """Entries per block for an array of ``n``: the power of two nearest above sqrt(n), at least 8."""
    return max(8, 2 ** math.ceil(math.log2(max(math.sqrt(max(n, 1)), 1.0))))


def block_mins(values):
    """Every block's minimum, [ceil(n / b)] (a full pass: at start, or after a many-entry update)."""
    n = values.shape[0]
    b = block_size(n)
    nb = -(-n // b)
    padded = jnp.concatenate([values, jnp.full((nb * b - n,), jnp.inf, values.dtype)])
    return jnp.min(padded.reshape(nb, b), axis=1)


def _block(values, k):
    n = values.shape[0]
    b = block_size(n)
    idx = k * b + jnp.arange(b)
    return idx, jnp.where(idx < n, values[jnp.minimum(idx, n - 1)], jnp.inf)


def argmin(values, mins):
    """First index of the minimum of ``values`` (0 when every entry is inf), reading the block minima and
    one block.

    Example:
      >>> v = jnp.array([5.0, 3.0, 9.0, 3.0, 7.0, 1.0, 1.0, 8.0, 2.0])
      >>> int(argmin(v, block_mins(v)))
      5
    """
    k = jnp.argmin(mins).astype(jnp.int32)
    idx, vals = _block(values, k)
    return idx[jnp.argmin(vals)].astype(jnp.int32)


def refresh(values, mins, i):
    """``mins`` after ``values[i]`` changed (``i`` out of range: unchanged)."""
    n = values.shape[0]
    k = jnp.clip(i, 0, n - 1) // block_size(n)
    _, vals = _block(values, k)
    return set_at(mins, jnp.where((i >= 0) & (i < n), k, mins.shape[0]), jnp.min(vals))


def lowered(values, mins, idx, new):
    """``mins`` after ``values[idx] = new`` where every new value is at most the old one (``idx`` [K]; out of
    range: skipped): a scatter-min, O(K)."""
    return min_at(mins, blocks_of(values, mins, idx), new)


def blocks_of(values, mins, idx):
    """The blocks of entries ``idx`` of ``values`` (out of range: ``len(mins)``, i.e. skipped by an update)."""
    n = values.shape[0]
    return jnp.where((idx >= 0) & (idx < n), jnp.clip(idx, 0, n - 1) // block_size(n), mins.shape[0])
