"""Arrow batch assembly (sweepkit.sweep.batches): recycled slabs, mapped slabs, dictionary index widths."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sweepkit.sweep import batches as B


@pytest.mark.parametrize("mapped", [False, True])
def test_a_slab_is_free_only_when_nothing_but_the_pool_holds_it(monkeypatch, mapped):
    monkeypatch.setattr(B, "_MAP_MIN_BYTES", 0 if mapped else 1 << 40)
    slabs = [B._populated(4096)]
    assert (slabs[0].base is not None) == mapped          # a mapping is what was asked for
    assert B._free_slab(slabs, 1, B._FREE_REFS) == 0
    view = slabs[0][64:128].view(np.float32)
    col = pa.array(view)                                  # zero-copy: Arrow keeps the view alive
    del view
    batch = pa.RecordBatch.from_pydict({"x": col})
    del col
    assert B._free_slab(slabs, 1, B._FREE_REFS) == -1
    del batch
    assert B._free_slab(slabs, 1, B._FREE_REFS) == 0
    assert B._free_slab(slabs, 4097, B._FREE_REFS) == -1   # too small for the request


def test_populated_slabs_are_zeroed_writable_and_sized():
    slab = B._populated(3 << 20)
    assert slab.nbytes == 3 << 20 and slab.flags.writeable and not slab.any()
    slab[:] = 7
    assert int(slab[-1]) == 7


def test_a_busy_slab_is_never_handed_out_again():
    pool = B._Slabs()
    first = pool.take(1 << 16)
    held = first.empty(8, np.int64)                        # a column still referenced by a batch
    second = pool.take(1 << 16)
    assert second.slab is not first.slab
    del held, first, second
    assert B._free_slab(pool._slabs, 1 << 16, B._FREE_REFS) == 0


@pytest.mark.parametrize("n, dtype", [(1, np.int8), (128, np.int8), (129, np.int16), (32768, np.int16),
                                      (32769, np.int32)])
def test_dictionary_indices_take_the_narrowest_signed_type(n, dtype):
    assert B._index_dtype(n) == np.dtype(dtype)


def test_a_wide_string_axis_round_trips_through_int16_indices():
    names = [f"dev-{i}" for i in range(300)]
    axes = {"device": names, "tp": [1], "gamma": [1, 2], "alpha": [0.5]}
    builder = B.BatchBuilder(axes, outer_axes=("device", "tp"), string_axes=("device",), float_outputs=("x",),
                             columns=("device", "tp", "gamma", "alpha", "x", "plain_bound", "verify_bound",
                                      "fits_in_memory"), k=300)
    idx = np.stack([np.arange(300), np.zeros(300, int)])
    out = {"x": np.arange(300, dtype=np.float32), "plain_bound": np.zeros(300, np.int32),
           "verify_bound": np.ones((300, 2), np.int32), "fits_in_memory": np.ones((300, 2), bool)}
    batch = builder.build(idx, out, 300)
    assert batch.schema.field("device").type.index_type == pa.int16()
    assert batch.num_rows == 600
    assert batch.column("device").cast(pa.string()).to_pylist() == [n for n in names for _ in range(2)]
    assert batch.column("x").to_pylist() == [float(i) for i in range(300) for _ in range(2)]
    assert batch.column("verify_bound").cast(pa.string()).to_pylist()[:2] == [B._BOUNDS[1].as_py()] * 2
