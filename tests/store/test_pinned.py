"""Warehouse.pinned: every query in the block reads one snapshot (real DuckDB files, real Parquet, real commits)."""

from __future__ import annotations

import threading

import duckdb
import pyarrow as pa
import pytest

from sweepkit.errors import InputError
from sweepkit.store import Warehouse


def write(wh: Warehouse, n: int, tag: str) -> str:
    batch = pa.record_batch({"x": pa.array(range(n), pa.int64())})
    return wh.write_run(kind="trace", grid_name="g", grid_toml="", grid_sha256=tag, tables={"t": [batch]})


def count(wh: Warehouse) -> int:
    return wh.query("select count(*) from runs where status = 'committed'").column(0)[0].as_py()


@pytest.fixture()
def wh(tmp_path) -> Warehouse:
    wh = Warehouse(tmp_path / "wh")
    write(wh, 5, "a")
    return wh


def test_a_pinned_block_reads_the_commits_of_its_start_and_the_next_query_reads_the_new_one(wh):
    with wh.pinned():
        assert count(wh) == 1
        write(wh, 7, "b")                                  # a commit while the block is open
        assert count(wh) == 1                              # the block's snapshot: as at its start
        assert wh.query("select sum(x) from t").column(0)[0].as_py() == 10
    assert count(wh) == 2                                  # after the block: a snapshot of its own
    assert wh.query("select sum(x) from t").column(0)[0].as_py() == 10 + 21


def test_blocks_nest_and_the_outer_snapshot_serves_the_inner_one(wh):
    with wh.pinned():
        with wh.pinned():
            write(wh, 3, "c")
            assert count(wh) == 1
        assert count(wh) == 1                              # the inner block did not close the outer snapshot
    assert count(wh) == 2


def test_a_failed_query_leaves_the_pinned_snapshot_usable_and_read_only(wh):
    with wh.pinned():
        with pytest.raises(InputError, match="not allowed"):
            wh.query("create table y as select 1")
        with pytest.raises(duckdb.CatalogException, match="no_such_table"):
            wh.query("select * from no_such_table")
        assert count(wh) == 1


def test_another_thread_gets_its_own_snapshot(wh):
    seen = []
    with wh.pinned():
        write(wh, 2, "d")
        worker = threading.Thread(target=lambda: seen.append(count(wh)))
        worker.start()
        worker.join()
        assert count(wh) == 1                              # this thread's pinned snapshot
    assert seen == [2]                                     # the other thread read the warehouse as it is now
