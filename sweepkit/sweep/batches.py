"""Arrow record batches from the engine's chunk outputs: one row per grid point, in grid order.

The compiled chunk returns each output in its natural shape (``[k]`` per outer point, ``[k, n_gamma]`` per
gamma, ``[k, n_gamma, n_alpha]`` per point; see ``engine.PER_OUTER`` ...). Here they are broadcast to one
value per row, into byte slabs that are recycled once the Parquet writer has let go of a batch (see
``_Slabs``): fresh buffers for every chunk page-fault in anew, and that time competes with the writer
threads for the same cores. Columns that are the same in every full chunk (gamma, alpha) are built once.
"""

from __future__ import annotations

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
    """

    MAX_KEPT = 8

    def __init__(self):
        self._slabs: list[np.ndarray] = []

    def take(self, nbytes: int) -> "_Cursor":
        i = _free_slab(self._slabs, nbytes, _FREE_REFS)
        if i >= 0:
            return _Cursor(self._slabs[i])
        slab = np.empty(nbytes, np.uint8)
        if len(self._slabs) < self.MAX_KEPT:
            self._slabs.append(slab)
        return _Cursor(slab)


def _free_slab(slabs: list[np.ndarray], nbytes: int, free_refs: int) -> int:
    """Index of the first slab of >= nbytes that nothing but ``slabs`` references (-1: none)."""
    for i, slab in enumerate(slabs):
        if slab.nbytes >= nbytes and sys.getrefcount(slab) <= free_refs:
            return i
    return -1


def _calibrate() -> int:
    """The reference count :func:`_free_slab` sees for an unreferenced slab: measured with that very code,
    not assumed (the interpreter's own references differ between Python versions, e.g. borrowed loads)."""
    slabs = [np.empty(1, np.uint8)]
    held = slabs[0][:1]                                   # one outside reference must make it busy
    free = next(n for n in range(1, 16) if _free_slab(slabs, 1, n) == 0)
    if _free_slab(slabs, 1, free - 1) == 0:
        raise RuntimeError("slab reference counting is not measurable on this interpreter")
    del held
    free_now = next(n for n in range(1, 16) if _free_slab(slabs, 1, n) == 0)
    if free_now >= free:
        raise RuntimeError("slab reference counting is not measurable on this interpreter")
    return free_now


_FREE_REFS = _calibrate()


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
        once = _Cursor(np.empty(n * 12 + 128, np.uint8))
        gamma = np.asarray(axes["gamma"], dtype=np.int32)[None, :, None]
        alpha = np.asarray(axes["alpha"], dtype=np.float64)[None, None, :]
        self._inner = {"gamma": pa.array(_broadcast(gamma, shape, np.int32, once)),
                       "alpha": pa.array(_broadcast(alpha, shape, np.float64, once))}
        widths = [4 if a in self.string_axes or a == "tp" else 8 for a in self.outer_axes]
        widths += [4] * len(self.float_outputs) + [4, 4, 1]          # floats, the two bounds, fits_in_memory
        self._row_bytes, self._columns_copied = sum(widths), len(widths)
        self._slabs = _Slabs()

    def build(self, outer_idx: np.ndarray, out: Mapping[str, np.ndarray], n_outer: int) -> pa.RecordBatch:
        """The batch of the chunk's first ``n_outer`` outer points (the rest is padding)."""
        shape = (n_outer, self.n_g, self.n_a)
        n = n_outer * self.n_g * self.n_a
        cursor = self._slabs.take(n * self._row_bytes + 64 * self._columns_copied)
        cols: dict[str, pa.Array] = {}
        for row, name in enumerate(self.outer_axes):
            i = np.asarray(outer_idx[row, :n_outer])
            if name in self.string_axes:
                cols[name] = pa.DictionaryArray.from_arrays(pa.array(_broadcast(i, shape, np.int32, cursor)),
                                                            self._dictionaries[name])
            else:
                values = self._values[name]
                cols[name] = pa.array(_broadcast(values[i], shape, values.dtype, cursor))
        for name, col in self._inner.items():
            cols[name] = col if n == len(col) else col.slice(0, n)
        for name in self.float_outputs:
            cols[name] = pa.array(_broadcast(np.asarray(out[name])[:n_outer], shape, np.float32, cursor))
        for name in ("plain_bound", "verify_bound"):
            codes = _broadcast(np.asarray(out[name])[:n_outer], shape, np.int32, cursor)
            cols[name] = pa.DictionaryArray.from_arrays(pa.array(codes), _BOUNDS)
        fits = _broadcast(np.asarray(out["fits_in_memory"])[:n_outer], shape, np.bool_, cursor)
        cols["fits_in_memory"] = pa.array(fits)                    # bit-packed: a copy, no reference kept
        return pa.RecordBatch.from_pydict({name: cols[name] for name in self.columns})
