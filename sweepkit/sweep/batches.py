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
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from sweepkit.costmodel.roofline import BOUNDS

_BOUNDS = pa.array(list(BOUNDS))


class _Slabs:
    """Row buffers recycled across chunks: one flat byte slab per batch in flight.

    Every column of a batch is a view into its slab, and Arrow's zero-copy arrays keep those views (and so
    the slab) referenced until the Parquet writer has dropped the batch. A slab whose only references are
    this pool's is free to refill: its pages are already mapped, so the copies into it run at memory speed
    instead of page-faulting every chunk in anew (measured in a real run: ~1.8 CPU-s of 13 M rows' Arrow
    assembly with fresh buffers, while two writer threads need the same two cores).

    New slabs are mapped with their pages populated in one go (:func:`_populated`). (Mapping the slabs a run
    holds in flight up front, on a helper thread while the executable loads, measured slower: the load
    itself took twice as long beside it.)
    """

    MAX_KEPT = 8

    def __init__(self):
        self._slabs: list[np.ndarray] = []

    def take(self, nbytes: int) -> "_Cursor":
        i = _free_slab(self._slabs, nbytes, _FREE_REFS)
        if i >= 0:
            return _Cursor(self._slabs[i])
        slab = _populated(nbytes)
        if len(self._slabs) < self.MAX_KEPT:
            self._slabs.append(slab)
        return _Cursor(slab)


_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23 if sys.platform.startswith("linux") else None)
_POPULATE_STEP = 8 << 20
_MAP_MIN_BYTES = 1 << 20
"""Smaller slabs come from ``np.empty``."""


def _populated(nbytes: int) -> np.ndarray:
    """A writable byte array of ``nbytes`` whose pages are mapped now rather than on first touch.

    An anonymous mapping populated with ``madvise(MADV_POPULATE_WRITE)`` (Linux >= 5.14) in 8 MiB steps, so
    that no step holds the address space's lock for long. On the 2-core VM, mapping 112 MB this way and
    filling it took 0.06 s; faulting the same fresh pages in by writing them, 0.34-0.40 s. Where the call is
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
    and populating 100 MB takes ~50 ms); None where it cannot be found."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


def _free_slab(slabs: list[np.ndarray], nbytes: int, free_refs: Mapping[bool, int]) -> int:
    """Index of the first slab of >= nbytes that nothing but ``slabs`` references (-1: none).

    A view of a slab references the slab array itself, both for ``np.empty`` and for a mapped slab (whose own
    ``base`` is a memoryview of the mapping); :func:`_calibrate` checks exactly that for each kind.
    ``free_refs`` is the count of an unreferenced slab, by kind (``slab.base is None``)."""
    for i, slab in enumerate(slabs):
        if slab.nbytes >= nbytes and sys.getrefcount(slab) <= free_refs[slab.base is None]:
            return i
    return -1


def _calibrate(make) -> int:
    """The reference count :func:`_free_slab` sees for an unreferenced slab made by ``make``: measured with
    that very code, not assumed (the interpreter's own references differ between Python versions)."""
    slabs = [make()]
    kind = slabs[0].base is None

    def free_at(n: int) -> bool:
        return _free_slab(slabs, 1, {kind: n}) == 0

    held = slabs[0][:1]                                   # one outside reference must make it busy
    free = next((n for n in range(1, 16) if free_at(n)), None)
    if free is None or free_at(free - 1):
        raise RuntimeError("slab reference counting is not measurable on this interpreter")
    del held
    free_now = next(n for n in range(1, 16) if free_at(n))
    if free_now >= free:
        raise RuntimeError("slab reference counting is not measurable on this interpreter")
    return free_now


def _mapped_page() -> np.ndarray:
    return np.frombuffer(mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS), np.uint8)


_FREE_REFS = {True: _calibrate(lambda: np.empty(1, np.uint8))}
if hasattr(mmap, "MAP_ANONYMOUS"):
    _FREE_REFS[False] = _calibrate(_mapped_page)


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


def _broadcast(x: np.ndarray, shape: tuple[int, int, int], dtype, cursor: "_Cursor") -> np.ndarray:
    """x ([k], [k, g] or [k, g, a]) -> a flat array of shape's product, repeated along the missing axes."""
    x = np.asarray(x)
    if x.shape == shape and x.dtype == dtype and x.flags.c_contiguous:
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
      axes: axis name -> values, for every name of ``columns`` that is an axis.
      outer_axes: the axes indexed per outer point, in ``outer_idx`` row order.
      string_axes: axes written as dictionary-encoded strings.
      float_outputs: float32 outputs; ``plain_bound``/``verify_bound`` become dictionary strings,
        ``fits_in_memory`` a boolean.
      columns: the batch's columns, in order.
      k: outer points per full chunk.
    """

    def __init__(self, axes: Mapping[str, Sequence[Any]], *, outer_axes: Sequence[str],
                 string_axes: Sequence[str], float_outputs: Sequence[str], columns: Sequence[str], k: int):
        self.axes, self.outer_axes, self.string_axes = axes, tuple(outer_axes), set(string_axes)
        self.float_outputs, self.columns, self.k = tuple(float_outputs), tuple(columns), k
        self.n_g, self.n_a = len(axes["gamma"]), len(axes["alpha"])
        self._dictionaries = {a: pa.array([str(v) for v in axes[a]]) for a in self.string_axes}
        self._values = {a: np.asarray(axes[a], dtype=np.int32 if a == "tp" else np.int64)
                        for a in self.outer_axes if a not in self.string_axes}
        shape = (k, self.n_g, self.n_a)
        n = k * self.n_g * self.n_a
        once = _Cursor(_populated(n * 12 + 128))
        gamma = np.asarray(axes["gamma"], dtype=np.int32)[None, :, None]
        alpha = np.asarray(axes["alpha"], dtype=np.float64)[None, None, :]
        self._inner = {"gamma": pa.array(_broadcast(gamma, shape, np.int32, once)),
                       "alpha": pa.array(_broadcast(alpha, shape, np.float64, once))}
        self._codes = {a: _index_dtype(len(axes[a])) for a in self.string_axes}
        self._codes.update(plain_bound=_index_dtype(len(_BOUNDS)), verify_bound=_index_dtype(len(_BOUNDS)))
        widths = [self._codes[a].itemsize if a in self.string_axes else self._values[a].itemsize
                  for a in self.outer_axes]
        widths += [4] * len(self.float_outputs) + [self._codes["plain_bound"].itemsize,
                                                   self._codes["verify_bound"].itemsize, 1]   # + fits_in_memory
        self._row_bytes, self._columns_copied = sum(widths), len(widths)
        self._slabs = _Slabs()

    def slab_bytes(self, n_outer: int) -> int:
        """Bytes of the row slab of a batch of ``n_outer`` outer points."""
        return n_outer * self.n_g * self.n_a * self._row_bytes + 64 * self._columns_copied

    def build(self, outer_idx: np.ndarray, out: Mapping[str, np.ndarray], n_outer: int) -> pa.RecordBatch:
        """The batch of the chunk's first ``n_outer`` outer points (the rest is padding)."""
        shape = (n_outer, self.n_g, self.n_a)
        n = n_outer * self.n_g * self.n_a
        cursor = self._slabs.take(self.slab_bytes(n_outer))
        cols: dict[str, pa.Array] = {}
        for row, name in enumerate(self.outer_axes):
            i = np.asarray(outer_idx[row, :n_outer])
            if name in self.string_axes:
                codes = _broadcast(i, shape, self._codes[name], cursor)
                cols[name] = pa.DictionaryArray.from_arrays(pa.array(codes), self._dictionaries[name])
            else:
                values = self._values[name]
                cols[name] = pa.array(_broadcast(values[i], shape, values.dtype, cursor))
        for name, col in self._inner.items():
            cols[name] = col if n == len(col) else col.slice(0, n)
        for name in self.float_outputs:
            cols[name] = pa.array(_broadcast(np.asarray(out[name])[:n_outer], shape, np.float32, cursor))
        for name in ("plain_bound", "verify_bound"):
            codes = _broadcast(np.asarray(out[name])[:n_outer], shape, self._codes[name], cursor)
            cols[name] = pa.DictionaryArray.from_arrays(pa.array(codes), _BOUNDS)
        fits = _broadcast(np.asarray(out["fits_in_memory"])[:n_outer], shape, np.bool_, cursor)
        cols["fits_in_memory"] = pa.array(fits)                    # bit-packed: a copy, no reference kept
        return pa.RecordBatch.from_pydict({name: cols[name] for name in self.columns})
