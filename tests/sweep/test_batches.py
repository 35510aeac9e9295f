"""Arrow batch assembly (sweepkit.sweep.batches): recycled slabs, mapped slabs, dictionary index widths."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sweepkit.acceptance import parametric
from sweepkit.sweep import batches as B


@pytest.mark.parametrize("mapped", [False, True])
def test_a_slab_is_free_only_when_no_batch_holds_its_memory(monkeypatch, mapped):
    """Every zero-copy holder of a column keeps its slab busy: numpy views of views, Arrow arrays, record
    batches, tables; the slab is free again once the last of them is gone."""
    monkeypatch.setattr(B, "_MAP_MIN_BYTES", 0 if mapped else 1 << 40)
    pool = B._Slabs()
    cursor = pool.take(4096)
    assert (pool._slabs[0].base is not None) == mapped            # a mapping is what was asked for
    view = cursor.empty(16, np.float32).reshape(4, 4)[1:].view(np.int32)   # a view of a view of the lease
    del cursor
    assert pool.busy() == [True]
    col = pa.array(view.reshape(-1))                               # zero-copy: Arrow holds the view
    del view
    assert pool.busy() == [True]
    del col
    assert pool.busy() == [False]
    cursor = pool.take(4096)
    table = pa.Table.from_batches([pa.RecordBatch.from_pydict({"x": pa.array(cursor.empty(8, np.int64))})])
    del cursor
    assert pool.busy() == [True]
    pool.take(4096)                                                # busy: a second slab is made
    assert len(pool.busy()) == 2
    del table
    assert pool.busy() == [False, False]
    pool.take(8192)                                                # too small: a third slab
    assert len(pool.busy()) == 3


def test_populated_slabs_are_zeroed_writable_and_sized():
    slab = B._populated(3 << 20)
    assert slab.nbytes == 3 << 20 and slab.flags.writeable and not slab.any()
    slab[:] = 7
    assert int(slab[-1]) == 7


def test_a_busy_slab_is_never_handed_out_again():
    pool = B._Slabs()
    first = pool.take(1 << 16)
    held = first.empty(8, np.int64)                        # a column still referenced by a batch
    held[:] = 42
    second = pool.take(1 << 16)
    second.empty(1 << 13, np.int64)[:] = 7                  # fills the whole of the second slab
    assert held.tolist() == [42] * 8
    del first, second
    assert pool.busy() == [True, False]
    del held
    assert pool.busy() == [False, False]


def test_the_pool_keeps_at_most_max_kept_slabs():
    pool = B._Slabs()
    held = [pool.take(64).empty(8, np.uint8) for _ in range(B._Slabs.MAX_KEPT + 3)]
    assert len(pool.busy()) == B._Slabs.MAX_KEPT and all(pool.busy())
    assert held[-1].ctypes.data not in {slab.ctypes.data for slab in pool._slabs}   # lent out, not kept
    del held
    assert not any(pool.busy())


@pytest.mark.parametrize("n, dtype", [(1, np.int8), (128, np.int8), (129, np.int16), (32768, np.int16),
                                      (32769, np.int32)])
def test_dictionary_indices_take_the_narrowest_signed_type(n, dtype):
    assert B._index_dtype(n) == np.dtype(dtype)


def test_a_wide_string_axis_round_trips_through_int16_indices():
    names = [f"dev-{i}" for i in range(300)]
    axes = {"device": names, "tp": [1], "gamma": [1, 2], "alpha": [0.5]}
    builder = B.BatchBuilder(axes, [parametric(0.5)], outer_axes=("device", "tp"), string_axes=("device",),
                             float_outputs=("x",),
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
