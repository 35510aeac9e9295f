"""The sweep engine: grid == loop over evaluate, float32 within 1e-5 of float64, one compile per shape."""

import itertools
import types

import numpy as np
import pyarrow as pa
import pytest

from sweepkit import evaluate
from sweepkit.sweep import engine
from sweepkit.sweep.engine import AXES, grid_size, iter_decode_chunks, mixed_radix_digits

SMALL = dict(device=("H100", "A100", "B200"), model=("llama-3-8b",), draft=("none", "mtp", "llama-3.2-1b"),
             tp=(1, 2), weight_format=("bf16", "int4"), kv_format=("bf16",), compute_format=("bf16", "fp8"),
             batch=(1, 24, 256), context=(128, 4096), gamma=(0, 1, 3, 5), alpha=(0.0, 0.55, 0.9, 1.0))
FLOATS = engine.FLOAT_OUTPUTS


def _table(axes, chunk_points):
    return pa.Table.from_batches(list(iter_decode_chunks(types.SimpleNamespace(axes=axes), chunk_points)))


def test_grid_equals_python_loop_over_evaluate_within_float32_tolerance():
    table = _table(SMALL, 500)
    assert table.num_rows == grid_size(SMALL)
    rows = table.to_pylist()
    points = list(itertools.product(*(SMALL[a] for a in AXES)))
    rng = np.random.default_rng(1)
    for i in rng.choice(len(points), size=120, replace=False):
        point = dict(zip(AXES, points[i]))
        row = rows[i]
        assert {a: row[a] for a in AXES} == point            # grid order: last axis fastest
        ref = evaluate(**point)                               # float64 reference
        for name in FLOATS:
            assert row[name] == pytest.approx(ref[name], rel=1e-5, abs=1e-30), name
        assert row["plain_bound"] == ref["plain_bound"] and row["verify_bound"] == ref["verify_bound"]
        assert row["fits_in_memory"] == ref["fits_in_memory"]


def test_chunk_size_does_not_change_rows_and_runs_are_deterministic():
    a = _table(SMALL, 10_000)
    b = _table(SMALL, 97)          # many chunks, last one padded
    c = _table(SMALL, 97)
    assert a.num_rows == b.num_rows == grid_size(SMALL)
    for name in a.column_names:
        assert a.column(name).to_pylist() == b.column(name).to_pylist() == c.column(name).to_pylist(), name


def test_compiles_once_per_chunk_shape():
    axes = {**SMALL, "batch": tuple(range(1, 200, 3))}
    before = len(engine._COMPILED)
    n_batches = sum(1 for _ in iter_decode_chunks(types.SimpleNamespace(axes=axes), 4096))
    assert n_batches > 3
    assert len(engine._COMPILED) - before == 1
    sum(1 for _ in iter_decode_chunks(types.SimpleNamespace(axes=axes), 4096))     # same shape: no new compile
    assert len(engine._COMPILED) - before == 1


def test_mixed_radix_beyond_int32():
    radices = (7, 1000, 1000, 1000, 3)
    index = 12_345_678_901
    digits = mixed_radix_digits(index, radices)
    assert np.ravel_multi_index(digits, radices) == index


def test_huge_grid_streams_without_materialising():
    # 6 x 3 x 3 x 2 x 5 x 3 x 2 x 1000 x 1000 x 8 x 21 ~ 3.3e11 points: only the first chunk is computed.
    axes = dict(device=("H100", "A100", "H200", "B200", "MI300X", "A100-40GB"),
                model=("llama-3-8b", "llama-3.2-3b", "llama-3-70b"), draft=("none", "mtp", "llama-3.2-1b"),
                tp=(1, 2), weight_format=("bf16", "fp8", "int8", "int4", "fp4"), kv_format=("bf16", "fp8", "int8"),
                compute_format=("bf16", "fp8"), batch=tuple(range(1, 1001)), context=tuple(range(1, 1001)),
                gamma=tuple(range(1, 9)), alpha=tuple(np.linspace(0, 1, 21)))
    assert grid_size(axes) > 2**31
    first = next(iter_decode_chunks(types.SimpleNamespace(axes=axes), 1 << 14))
    assert 1 << 14 <= first.num_rows < 2 << 14 and first.num_rows % (8 * 21) == 0
    assert first.column("device").to_pylist()[0] == "H100"


@pytest.mark.parametrize("n_outer,inner,chunk,multiple", [
    (79_200, 168, 1 << 20, 2), (79_200, 168, 1 << 20, 1), (10, 3, 1, 2), (7, 5, 100, 2), (1, 168, 1, 2),
    (1000, 1, 7, 3), (12, 1, 5, 2), (5, 2, 3, 4)])
def test_chunk_plan_covers_the_grid_in_big_enough_balanced_chunks(n_outer, inner, chunk, multiple):
    k, n_chunks = engine.chunk_plan(n_outer, inner, chunk, multiple)
    assert n_chunks == -(-n_outer // k)                          # whole grid, last chunk padded
    assert (n_chunks - 1) * k < n_outer <= n_chunks * k
    if n_chunks > 1:
        assert chunk <= k * inner < 2 * chunk + 2 * inner         # at least chunk points, never twice as many
    if (n_outer, multiple) == (79_200, 2):
        assert (k, n_chunks) == (6_600, 12)                      # grids/large.toml: 6 chunks per writer thread


def test_started_yields_everything_and_reraises_on_the_consumer():
    import threading

    seen_threads = []

    def gen(n, fail_at=None):
        for i in range(n):
            seen_threads.append(threading.current_thread().name)
            if i == fail_at:
                raise ValueError(f"bad item {i}")
            yield i

    assert list(engine.started(gen(4))) == [0, 1, 2, 3]
    assert seen_threads[0] == "sweepkit-first-chunk" and set(seen_threads[1:]) == {threading.current_thread().name}
    assert list(engine.started(gen(0))) == []
    with pytest.raises(ValueError, match="bad item 0"):
        list(engine.started(gen(3, fail_at=0)))
    with pytest.raises(ValueError, match="bad item 2"):
        list(engine.started(gen(3, fail_at=2)))
