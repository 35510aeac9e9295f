"""Arrow record batches from the engine's chunk outputs: one row per grid point, in grid order.

The compiled chunk returns each output in its natural shape (``[k]`` per outer point, ``[k, n_gamma]`` per
gamma, ``[k, n_gamma, n_alpha]`` per point; see ``engine.PER_OUTER`` ...). Here they are broadcast to one
value per row, into byte slabs that are recycled once the Parquet writer has let go of a batch (see
``_Slabs``): fresh buffers for every chunk page-fault in anew, and that time competes with the writer
threads for the same cores. Columns that are the same in every full chunk (gamma, alpha) are built once.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import sys
import weakref
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from sweepkit.costmodel.roofline import BOUNDS

_BOUNDS = pa.array(list(BOUNDS))


class _Slabs:
    """Row buffers recycled across chunks: one flat byte slab per batch in flight.

    Every column of a batch is a view into a *lease* of its slab: a fresh array over the slab's memory,
    made for that batch alone (``np.frombuffer(memoryview(slab))``; numpy does not collapse a view's base
    past a memoryview, so every view of the lease references the lease). Arrow's zero-copy arrays keep
    those views, and so the lease, alive until the Parquet writer has dropped the batch; a slab whose lease
    is gone (a weak reference says so) is free to refill. Its pages are already mapped, so the copies into
    it run at memory speed instead of page-faulting every chunk in anew, while the writer threads need the
    same cores.

    New slabs are mapped with their pages populated in one go (:func:`_populated`), as the run needs them (not
    up front on a helper thread, which would slow the executable's load beside it).
    """

    MAX_KEPT = 8

    def __init__(self):
        self._slabs: list[np.ndarray] = []
        self._leases: list[weakref.ref | None] = []

    def take(self, nbytes: int) -> _Cursor:
        """A cursor over a free slab of at least ``nbytes`` (a new one when none is free)."""
        for i, slab in enumerate(self._slabs):
            if slab.nbytes >= nbytes and (self._leases[i] is None or self._leases[i]() is None):
                cursor, self._leases[i] = _lease(slab)
                return cursor
        slab = _populated(nbytes)
        cursor, ref = _lease(slab)
        if len(self._slabs) < self.MAX_KEPT:              # beyond that, lent out once and not kept
            self._slabs.append(slab)
            self._leases.append(ref)
        return cursor

    def busy(self) -> list[bool]:
        """Which kept slabs are lent out now (for tests)."""
        return [lease is not None and lease() is not None for lease in self._leases]


def _lease(slab: np.ndarray) -> tuple[_Cursor, weakref.ref]:
    """A cursor over a new array on ``slab``'s memory, and a weak reference that dies with that array."""
    lease = np.frombuffer(memoryview(slab), np.uint8)
    return _Cursor(lease), weakref.ref(lease)


_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23 if sys.platform.startswith("linux") else None)
_POPULATE_STEP = 8 << 20
_MAP_MIN_BYTES = 1 << 20
"""Smaller slabs come from ``np.empty``."""


def _populated(nbytes: int) -> np.ndarray:
    """A writable byte array of ``nbytes`` whose pages are mapped now rather than on first touch.

    An anonymous mapping populated with ``madvise(MADV_POPULATE_WRITE)`` (Linux >= 5.14) in 8 MiB steps, so
    that no step holds the address space's lock for long: far cheaper than faulting the same fresh pages in
    one by one as they are first written. Where the call is
    not there (older kernels, other systems) the pages fault in on first use, as with ``np.empty``.
    """
    if _MADV_POPULATE_WRITE is None or nbytes < max(1, _MAP_MIN_BYTES) or not hasattr(mmap, "MAP_ANONYMOUS"):
        return np.empty(nbytes, np.uint8)
    region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    slab = np.frombuffer(region, np.uint8)
    madvise = _libc_madvise()
    if madvise is not None:
        for offset in range(0, nbytes, _POPULATE_STEP):
            if madvise(slab.ctypes.data + offset, min(_POPULATE_STEP, nbytes - offset), _MADV_POPULATE_WRITE):
                break                                   # not supported here: pages fault in when written
    return slab


@functools.lru_cache(maxsize=1)
def _libc_madvise():
    """libc's ``madvise`` through ctypes, which releases the GIL for the call (``mmap.madvise`` holds it,
    for the whole call, which populates a slab's pages); None where it cannot be found."""
    try:
        fn = ctypes.CDLL(None).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


class _Cursor:
    """Hands out consecutive, 64-byte aligned arrays from one slab."""

    def __init__(self, slab: np.ndarray):
        self.slab, self.offset = slab, 0

    def empty(self, n: int, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        start = -(-self.offset // 64) * 64
        end = start + n * dtype.itemsize
        if end > self.slab.nbytes:                # a sizing bug, never silently short columns
            raise RuntimeError(f"row slab of {self.slab.nbytes} bytes is too small for {end} bytes")
        self.offset = end
        return self.slab[start:end].view(dtype)


def _zero_copy(x: np.ndarray, shape: tuple[int, int, int], dtype) -> bool:
    """Whether x already holds one value per point, in the column's type and layout."""
    return x.shape == shape and x.dtype == dtype and x.flags.c_contiguous


def _broadcast(x: np.ndarray, shape: tuple[int, int, int], dtype, cursor: _Cursor) -> np.ndarray:
    """x ([k], [k, g] or [k, g, a]) -> a flat array of shape's product, repeated along the missing axes."""
    x = np.asarray(x)
    if _zero_copy(x, shape, dtype):
        return x.reshape(-1)                                  # already one value per point: zero-copy
    out = cursor.empty(shape[0] * shape[1] * shape[2], dtype)
    np.copyto(out.reshape(shape), x.reshape(x.shape + (1,) * (3 - x.ndim)), casting="unsafe")
    return out


def _index_dtype(n: int) -> np.dtype:
    """The narrowest signed integer type for the indices of a dictionary of ``n`` values (Arrow's
    dictionary indices are signed; Parquet stores them RLE/bit-packed whatever their width)."""
    for dtype in (np.int8, np.int16, np.int32):
        if n <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    return np.dtype(np.int64)


class BatchBuilder:
    """Turns chunk outputs into record batches for one grid (``axes``) and chunk size (``k`` outer points).

    Args:
      axes: axis name -> values, for the outer axes and gamma.
      models: the grid's acceptance models (the innermost axis; ``sweepkit.sweep.grid.acceptance_models``):
        each gives a row's ``alpha`` (its first position), ``decay`` (null without one) and ``acceptance``.
      outer_axes: the axes indexed per outer point, in ``outer_idx`` row order.
      string_axes: axes written as dictionary-encoded strings.
      float_outputs: float32 outputs; ``plain_bound``/``verify_bound`` become dictionary strings,
        ``fits_in_memory`` a boolean.
      null_outputs: float32 columns that are null in every row (a grid without bands).
      columns: the batch's columns, in order.
      k: outer points per full chunk.
    """

    def __init__(self, axes: Mapping[str, Sequence[Any]], models: Sequence[Any], *, outer_axes: Sequence[str],
                 string_axes: Sequence[str], float_outputs: Sequence[str], columns: Sequence[str], k: int,
                 null_outputs: Sequence[str] = ()):
        self.axes, self.outer_axes, self.string_axes = axes, tuple(outer_axes), set(string_axes)
        self.float_outputs, self.columns, self.k = tuple(float_outputs), tuple(columns), k
        self.null_outputs = tuple(null_outputs)
        self.n_g, self.n_a = len(axes["gamma"]), len(models)
        self._dictionaries = {a: pa.array([str(v) for v in axes[a]]) for a in self.string_axes}
        self._values = {a: np.asarray(axes[a], dtype=np.int32 if a == "tp" else np.int64)
                        for a in self.outer_axes if a not in self.string_axes}
        shape = (k, self.n_g, self.n_a)
        n = k * self.n_g * self.n_a
        names = list(dict.fromkeys(m.name for m in models))
        code = _index_dtype(len(names))
        once = _Cursor(_populated(n * (20 + code.itemsize) + 256))
        gamma = np.asarray(axes["gamma"], dtype=np.int32)[None, :, None]
        alpha = np.asarray([m.alphas[0] for m in models], dtype=np.float64)[None, None, :]
        decay = np.asarray([np.nan if m.decay is None else m.decay for m in models], dtype=np.float64)
        decay = _broadcast(decay[None, None, :], shape, np.float64, once)
        which = np.asarray([names.index(m.name) for m in models])[None, None, :]
        self._inner = {"gamma": pa.array(_broadcast(gamma, shape, np.int32, once)),
                       "alpha": pa.array(_broadcast(alpha, shape, np.float64, once)),
                       "decay": pa.array(decay, mask=np.isnan(decay)),
                       "acceptance": pa.DictionaryArray.from_arrays(pa.array(_broadcast(which, shape, code, once)),
                                                                    pa.array(names))}
        self._codes = {a: _index_dtype(len(axes[a])) for a in self.string_axes}
        self._codes.update(plain_bound=_index_dtype(len(_BOUNDS)), verify_bound=_index_dtype(len(_BOUNDS)))
        self._slabs = _Slabs()

    def build(self, outer_idx: np.ndarray, out: Mapping[str, np.ndarray], n_outer: int) -> pa.RecordBatch:
        """The batch of the chunk's first ``n_outer`` outer points (the rest is padding)."""
        shape = (n_outer, self.n_g, self.n_a)
        n = n_outer * self.n_g * self.n_a
        sources: list[tuple[str, np.ndarray, np.dtype]] = []        # column, per-outer/-gamma/-point values, type
        for row, name in enumerate(self.outer_axes):
            i = np.asarray(outer_idx[row, :n_outer])
            if name in self.string_axes:
                sources.append((name, i, self._codes[name]))
            else:
                sources.append((name, self._values[name][i], self._values[name].dtype))
        sources += [(name, np.asarray(out[name])[:n_outer], np.dtype(np.float32)) for name in self.float_outputs]
        sources += [(name, np.asarray(out[name])[:n_outer], self._codes[name])
                    for name in ("plain_bound", "verify_bound")]
        sources.append(("fits_in_memory", np.asarray(out["fits_in_memory"])[:n_outer], np.dtype(np.bool_)))
        copied = [n * dtype.itemsize + 64 for _, x, dtype in sources if not _zero_copy(x, shape, dtype)]
        cursor = self._slabs.take(sum(copied))         # only the columns that need a copy take room
        cols: dict[str, pa.Array] = {name: col if n == len(col) else col.slice(0, n)
                                     for name, col in self._inner.items()}
        cols.update({name: pa.nulls(n, pa.float32()) for name in self.null_outputs})
        for name, x, dtype in sources:
            flat = pa.array(_broadcast(x, shape, dtype, cursor))
            if name in self.string_axes:
                cols[name] = pa.DictionaryArray.from_arrays(flat, self._dictionaries[name])
            elif name in ("plain_bound", "verify_bound"):
                cols[name] = pa.DictionaryArray.from_arrays(flat, _BOUNDS)
            else:
                cols[name] = flat                  # fits_in_memory: bit-packed by pa.array, a copy
        return pa.RecordBatch.from_pydict({name: cols[name] for name in self.columns})
