"""The warehouse, for real: Parquet files, a DuckDB file, other processes, SIGINT and SIGKILL mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweepkit.store import Warehouse
from sweepkit.store import writer as writer_mod
import sweepkit.queries
from sweepkit.store.db import schema_sql
from sweepkit.store.queries import queries_dir
from sweepkit.sweep.engine import iter_decode_chunks
from sweepkit.sweep.grid import load_grid, parse_grid

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
       "JAX_PLATFORMS": "cpu"}
SLOW_GRID = """name = "slow"
[axes]
device = ["H100", "A100"]
batch = { start = 1, stop = 1024, num = 40 }
context = { start = 128, stop = 8192, num = 25 }
alpha = { start = 0.5, stop = 0.9, num = 5 }
gamma = [1, 2, 3, 4]
"""
# A child that writes the engine's batches for SLOW_GRID (computed by the test, saved as Arrow IPC) slowly:
# tiny row groups and files, a pause per batch; it prints the rows as they are handed to the writers.
CHILD = """
import sys, time
import pyarrow as pa
import sweepkit.store.writer as w
w.ROW_GROUP_ROWS, w.FILE_ROWS = 2048, 8192
from sweepkit.store import Warehouse
from sweepkit.sweep.grid import parse_grid
spec = parse_grid(open(sys.argv[2]).read(), sys.argv[2])
def slow():
    with pa.ipc.open_file(sys.argv[2] + ".arrow") as f:
        for i in range(f.num_record_batches):
            time.sleep(float(sys.argv[3]))
            yield f.get_batch(i)
run_id = Warehouse(sys.argv[1]).write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text,
    grid_sha256=spec.sha256, tables={"decode": slow()}, on_rows=lambda n: print(n, flush=True))
print("DONE", run_id, flush=True)
"""
SEED = (ROOT / "grids/seed.toml").read_text()


@cache
def engine_batches(text: str, chunk: int) -> tuple[pa.RecordBatch, ...]:
    """The real engine's output for a grid, computed once per test session (compiles are the slow part)."""
    return tuple(iter_decode_chunks(parse_grid(text, "t.toml"), chunk))


def write(wh: Warehouse, text: str, chunk: int = 4096, **kw) -> tuple[str, object]:
    spec = parse_grid(text, "t.toml")
    run_id = wh.write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text, grid_sha256=spec.sha256,
                          tables={"decode": iter(engine_batches(text, chunk))}, **kw)
    return run_id, spec


def slow_grid(tmp_path: Path) -> Path:
    """SLOW_GRID's file, with the real engine's batches beside it (``.arrow``) for CHILD."""
    grid = tmp_path / "slow.toml"
    grid.write_text(SLOW_GRID)
    batches = engine_batches(SLOW_GRID, 1024)
    with pa.ipc.new_file(str(grid) + ".arrow", batches[0].schema) as f:
        for b in batches:
            f.write_batch(b)
    return grid


def staged(root: Path) -> list[Path]:
    """What is in the staging folder, apart from the commit gate."""
    return [p for p in (Path(root) / "staging").iterdir() if p.name != ".commit-gate"]


def count(wh: Warehouse) -> int:
    return wh.query("select count(*) as n from decode").column("n")[0].as_py()


def test_schema_is_idempotent_and_queries_are_packaged():
    """schema.sql runs twice on one database without error (every commit applies it), and the report folder
    is the sweepkit.queries package's own folder holding the documented reports."""
    con = duckdb.connect()
    con.execute(schema_sql())
    con.execute(schema_sql())
    assert {"runs", "run_files", "warehouse_meta", "contract_decode"} <= {
        r[0] for r in con.execute("select table_name from duckdb_tables()").fetchall()}
    assert queries_dir() == Path(sweepkit.queries.__file__).parent
    assert {"speedup_table", "matrix", "break_even"} <= {p.stem for p in queries_dir().glob("*.sql")}


def test_contract_matches_engine_and_every_column_has_a_comment():
    con = duckdb.connect()
    con.execute(schema_sql())
    cols = con.execute("select table_name, column_name, comment from duckdb_columns() "
                       "where table_name in ('runs', 'run_files', 'contract_decode')").fetchall()
    assert cols and all(c[2] for c in cols), [c for c in cols if not c[2]]
    declared = [c[1] for c in cols if c[0] == "contract_decode"]
    batch = engine_batches(SEED, 4096)[0]
    assert sorted(["run_id", *batch.schema.names]) == sorted(declared)
    wh_types = dict(con.execute("select column_name, data_type from duckdb_columns() "
                                "where table_name = 'contract_decode'").fetchall())
    con.register("b", pa.Table.from_batches([batch]))
    got = dict(con.execute("select column_name, column_type from (describe b)").fetchall())
    got = {k: ("VARCHAR" if v.startswith("ENUM") else v) for k, v in got.items()}
    assert {k: wh_types[k] for k in got} == got


def test_write_run_layout_views_and_reuse(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    assert wh.committed_run("decode", "0" * 64) is None and count(wh) == 0   # no file yet: empty views
    seen = []
    run_id, spec = write(wh, SEED, on_rows=seen.append)
    assert sum(seen) == spec.n_points == count(wh) == 60
    runs = wh.query("select * from runs").to_pylist()
    assert len(runs) == 1 and runs[0]["row_count"] == 60 and runs[0]["status"] == "committed"
    assert wh.committed_run("decode", spec.sha256) == run_id
    assert wh.committed_run("decode", "f" * 64) is None
    part = wh.root / "parquet/decode" / f"run_id={run_id}"
    files = sorted(part.glob("part-*.parquet"))
    assert files and not (wh.root / "staging" / run_id).exists()
    # Dictionary encoding on the string columns only.
    meta = pq.ParquetFile(files[0]).metadata
    rg = meta.row_group(0)
    for i in range(rg.num_columns):
        col = rg.column(i)
        dict_encoded = any("DICTIONARY" in e for e in col.encodings)
        is_str = meta.schema.column(i).physical_type == "BYTE_ARRAY"
        assert dict_encoded == is_str, (col.path_in_schema, col.encodings)
    # BI tools: the persisted views work from a plain read-only DuckDB connection, and Parquet reads directly.
    con = duckdb.connect(str(wh.db_path), read_only=True)
    assert con.execute("select count(*) from decode").fetchall() == [(60,)]
    con.close()
    direct = duckdb.sql(f"select count(*) from read_parquet('{wh.root}/parquet/decode/*/*.parquet', "
                        "hive_partitioning = true)").fetchall()
    assert direct == [(60,)]
    # A second run is another partition; both visible.
    run2, spec2 = write(wh, (ROOT / "grids/leviathan.toml").read_text())          # another shape: a compile
    assert count(wh) == 60 + spec2.n_points
    got = wh.query("select run_id, count(*) n from decode group by run_id order by run_id").to_pylist()
    assert got == [{"run_id": run_id, "n": 60}, {"run_id": run2, "n": 16}]


def test_streaming_many_row_groups_and_files(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_mod, "ROW_GROUP_ROWS", 20)
    monkeypatch.setattr(writer_mod, "FILE_ROWS", 20)      # every flush (>= 20 rows) closes a file: >= 2 files
                                                            # however the two writer threads share the batches
    wh = Warehouse(tmp_path)
    seen = []
    run_id, spec = write(wh, SEED, chunk=15, on_rows=seen.append)          # batches of 15, 15, 15, 15 rows
    assert count(wh) == spec.n_points == sum(seen) == 60 and len(seen) == 4
    files = wh.query("select path, row_count from run_files").to_pylist()
    assert len(files) >= 2 and sum(f["row_count"] for f in files) == 60
    for f in files:
        md = pq.ParquetFile(wh.root / f["path"]).metadata
        assert md.num_rows == f["row_count"]
        assert all(md.row_group(i).num_rows >= 20 for i in range(md.num_row_groups - 1))
    # Every grid point exactly once.
    assert wh.query("select count(*) n from (select distinct device, context, batch from decode)"
                    ).column("n")[0].as_py() == 60


def test_failure_mid_stream_commits_nothing(tmp_path):
    wh = Warehouse(tmp_path)
    spec = parse_grid(SEED, "seed.toml")

    def broken():
        for i, b in enumerate(engine_batches(SEED, 16)):
            if i == 2:
                raise RuntimeError("engine blew up")
            yield b

    with pytest.raises(RuntimeError, match="blew up"):
        wh.write_run(kind="decode", grid_name="f", grid_toml=spec.toml_text, grid_sha256=spec.sha256,
                     tables={"decode": broken()})
    assert count(wh) == 0 and not staged(tmp_path)


def test_bad_columns_and_names_refused(tmp_path):
    wh = Warehouse(tmp_path)
    with pytest.raises(ValueError, match="contract_decode"):
        wh.write_run(kind="decode", grid_name="x", grid_toml="", grid_sha256="0",
                     tables={"decode": iter([pa.record_batch({"device": ["H100"]})])})
    with pytest.raises(ValueError, match="kind"):
        wh.write_run(kind="prefill", grid_name="x", grid_toml="", grid_sha256="0", tables={})
    with pytest.raises(ValueError, match="table"):
        wh.write_run(kind="decode", grid_name="x", grid_toml="", grid_sha256="0", tables={"Runs; drop": iter([])})


def test_undeclared_table_gets_a_view(tmp_path):
    wh = Warehouse(tmp_path)
    assert "probe_metrics" not in {r[0] for r in wh.connect().execute("show tables").fetchall()}
    batch = pa.record_batch({"workload": pa.array(["chat", "rag"]).dictionary_encode(), "goodput": [1.5, 2.0]})
    run_id = wh.write_run(kind="serving", grid_name="s", grid_toml="", grid_sha256="s",
                          tables={"probe_metrics": [batch]})
    assert wh.query("select * from probe_metrics order by workload").to_pylist() == [
        {"run_id": run_id, "workload": "chat", "goodput": 1.5}, {"run_id": run_id, "workload": "rag", "goodput": 2.0}]
    assert count(wh) == 0                                   # decode: the empty contract view


def test_orphans_invisible_then_cleaned_and_moved_warehouse(tmp_path):
    wh = Warehouse(tmp_path / "a")
    write(wh, SEED)
    # What a writer killed between rename and commit leaves: a partition with no runs row, no live lock.
    orphan = wh.root / "parquet/decode/run_id=20000101T000000000Z-dead00"
    orphan.mkdir()
    pq.write_table(pa.table({"device": ["H100"]}), orphan / "part-0-0000.parquet")
    (wh.root / "staging/20000101T000000000Z-dead01/decode").mkdir(parents=True)
    assert count(wh) == 60
    removed = wh.clean_stale()
    assert orphan in removed and not orphan.exists() and not staged(wh.root)
    # Moved folder: connect() rebuilds the views from run_files relative paths.
    os.rename(wh.root, tmp_path / "b")
    assert count(Warehouse(tmp_path / "b")) == 60


def _wait_rows(proc, rows_needed: int, timeout_s: float = 60) -> int:
    seen, t0 = 0, time.monotonic()
    while seen < rows_needed:
        line = proc.stdout.readline()
        assert line, f"child ended early: {proc.stderr.read()}"
        assert time.monotonic() - t0 < timeout_s
        if line.startswith("DONE"):
            pytest.fail("child finished before the kill; make the grid slower")
        seen += int(line)
    return seen


def test_sigkilled_run_leaves_nothing_and_rerun_works(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    grid = slow_grid(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(wh.root), str(grid), "0.02"], env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_rows(proc, 12 * 1024)
        mid_write = list((wh.root / "staging").glob("*/decode/*.parquet"))
        assert mid_write, "the kill must land mid-write (Parquet files already in staging)"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert count(wh) == 0 and wh.query("select count(*) n from runs").column("n")[0].as_py() == 0
    assert staged(wh.root)                                     # the dead writer's files, cleaned next
    run_id, spec = write(wh, SEED)
    assert count(wh) == 60 and not staged(wh.root)
    assert [p.name for p in (wh.root / "parquet/decode").iterdir()] == [f"run_id={run_id}"]


def test_sigint_to_cli_run_exits_130_and_commits_nothing(tmp_path):
    grid = tmp_path / "slow.toml"
    grid.write_text(SLOW_GRID.replace("num = 25", "num = 500"))              # 800,000 points: seconds of work
    wh = tmp_path / "wh"
    proc = subprocess.Popen([sys.executable, "-m", "sweepkit.cli", "run", str(grid), "--warehouse", str(wh),
                             "--chunk-points", "256"], env=ENV, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        t0 = time.monotonic()
        while not list((wh / "staging").glob("*/decode")):
            assert proc.poll() is None and time.monotonic() - t0 < 60, proc.stderr.read()
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted: nothing was committed" in err and "Traceback" not in err
    assert count(Warehouse(wh)) == 0 and staged(wh) == []


READER = """
import os, sys, time
from sweepkit.store import Warehouse
wh, seen, t_end = Warehouse(sys.argv[1]), set(), time.monotonic() + 120
while time.monotonic() < t_end and not os.path.exists(sys.argv[2]):
    seen.add(wh.query("select count(*) n from decode").column("n")[0].as_py())
    time.sleep(0.03)
print(sorted(seen), flush=True)
"""


def test_two_readers_query_while_a_run_writes(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    write(wh, SEED)
    grid = slow_grid(tmp_path)
    n_slow = load_grid(grid).n_points
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(wh.root), str(grid), "0.02"], env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stop = tmp_path / "stop"
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(wh.root), str(stop)], env=ENV, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    out, err = proc.communicate(timeout=120)
    time.sleep(0.5)                                            # let the readers see the committed run
    stop.touch()
    assert proc.returncode == 0, err
    assert "DONE" in out
    for r in readers:
        r_out, r_err = r.communicate(timeout=120)
        assert r.returncode == 0, r_err
        seen = eval(r_out)                                     # our own child's list of ints
        assert set(seen) == {60, 60 + n_slow}                 # before and after; never a partial run
    assert count(wh) == 60 + n_slow


def test_a_commit_recreates_only_its_views_and_the_feed_only_when_its_definition_changes(tmp_path):
    wh = Warehouse(tmp_path)
    run1, _ = write(wh, SEED)
    con = duckdb.connect(str(wh.db_path), read_only=True)
    sql1 = dict(con.execute("select view_name, sql from duckdb_views() where not internal").fetchall())
    digest = con.execute("select value from warehouse_meta where key = 'feed_sha256'").fetchone()[0]
    con.close()
    assert {"decode", "serving", "capacity", "trace_steps", "v_decode", "v_matrix"} <= set(sql1)
    run2, spec2 = write(wh, (ROOT / "grids/leviathan.toml").read_text())
    con = duckdb.connect(str(wh.db_path), read_only=True)
    sql2 = dict(con.execute("select view_name, sql from duckdb_views() where not internal").fetchall())
    # decode now lists both runs' files; the feed view over it was left alone and sees both runs
    assert sql2["decode"] != sql1["decode"] and sql2["v_decode"] == sql1["v_decode"]
    assert sql2["serving"] == sql1["serving"]
    assert con.execute("select count(distinct run_id), count(*) from v_decode").fetchone() == (2, 60 + spec2.n_points)
    comments = con.execute("select count(*) from duckdb_columns() where table_name = 'decode' "
                           "and comment is not null and comment <> ''").fetchone()[0]
    assert comments == len(con.execute("select * from decode limit 0").description)   # comments redone
    con.close()
    # a changed feed definition (another sweepkit version) is recreated at the next commit
    con = duckdb.connect(str(wh.db_path))
    con.execute("update warehouse_meta set value = 'stale' where key = 'feed_sha256'")
    con.execute("create or replace view v_decode as select 1 as stale")
    con.close()
    write(wh, SEED, chunk=15)
    con = duckdb.connect(str(wh.db_path), read_only=True)
    assert con.execute("select value from warehouse_meta where key = 'feed_sha256'").fetchone()[0] == digest
    assert con.execute("select count(distinct run_id) from v_decode").fetchone()[0] == 3
    con.close()


@pytest.mark.parametrize("mapped", [False, True], ids=["np.empty slabs", "mapped slabs"])
def test_recycled_row_buffers_never_leak_into_written_rows(tmp_path, monkeypatch, mapped):
    """Batches written through the warehouse reuse the builder's byte slabs once the writers let go of them;
    the committed rows must equal the engine's output computed with every batch kept alive (no reuse).
    Both kinds of slab: ``np.empty`` and the populated anonymous mappings big batches get."""
    from sweepkit.sweep import batches as batches_mod

    if mapped:
        monkeypatch.setattr(batches_mod, "_MAP_MIN_BYTES", 0)

    taken = []
    original = batches_mod._Slabs.take

    def take(self, nbytes):
        cursor = original(self, nbytes)
        taken.append(cursor.slab.ctypes.data)                     # the slab's memory, not the lease object
        return cursor

    monkeypatch.setattr(batches_mod._Slabs, "take", take)
    monkeypatch.setattr(writer_mod, "ROW_GROUP_ROWS", 4)         # each 4-row batch is encoded, then dropped
    spec = parse_grid('name = "recycle"\n[axes]\ndevice = ["H100", "A100"]\nmodel = ["llama-3-8b"]\n'
                      'draft = ["mtp"]\nbatch = [1, 2, 4, 8, 16, 32]\ncontext = [128, 4096]\n'
                      'gamma = [1, 3]\nalpha = [0.5, 0.8]\n', "t.toml")
    kept = pa.Table.from_batches(list(iter_decode_chunks(spec, 1)))          # 24 batches of one outer point
    wh = Warehouse(tmp_path)
    run_id = wh.write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text, grid_sha256=spec.sha256,
                          tables={"decode": iter_decode_chunks(spec, 1)})
    keys = ["device", "model", "draft", "tp", "batch", "context", "gamma", "alpha"]
    got = wh.query("select * exclude (run_id) from decode where run_id = $r", {"r": run_id})
    assert got.num_rows == kept.num_rows == spec.n_points
    written = taken[24:]                                         # the warehouse run's 24 batches
    assert len(written) == 24 and len(set(written)) < 24          # slabs were reused
    def rows(t):          # dictionary columns decoded, sorted by the grid axes
        t = pa.table({c: t.column(c).cast(pa.string()) if pa.types.is_dictionary(t.column(c).type)
                      else t.column(c) for c in t.column_names})
        return t.sort_by([(k, "ascending") for k in keys])
    a, b = rows(got), rows(kept)
    for name in b.column_names:
        assert a.column(name).to_pylist() == b.column(name).to_pylist(), name


def test_a_commit_in_a_moved_warehouse_repoints_every_view(tmp_path):
    import shutil

    def rows(n):
        return [pa.record_batch({"x": pa.array(range(n), pa.int64())})]

    a = Warehouse(tmp_path / "a")
    a.write_run(kind="trace", grid_name="g", grid_toml="", grid_sha256="s1", tables={"t1": rows(5), "t2": rows(30)})
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    b = Warehouse(tmp_path / "b")
    b.write_run(kind="trace", grid_name="g", grid_toml="", grid_sha256="s2", tables={"t1": rows(7)})   # t1 only
    shutil.rmtree(tmp_path / "a")
    assert b.query("select count(*) n from t2").column("n")[0].as_py() == 30          # t2 re-pointed too
    assert b.query("select count(*) n from t1").column("n")[0].as_py() == 12
    con = duckdb.connect(str(b.db_path), read_only=True)          # the persisted views, as a BI tool sees them
    assert con.execute("select count(*) from t2").fetchone() == (30,)
    con.close()


def test_drop_runs_removes_a_run_from_every_view_and_repairs_a_deleted_file(tmp_path):
    from sweepkit.errors import InputError

    """A committed run whose Parquet file was deleted by hand breaks its table's queries (one line naming the
    run and the way out); dropping that run repairs the warehouse and leaves the other runs intact."""
    from click.testing import CliRunner

    from sweepkit.cli import main
    from sweepkit.store.drop import drop_runs

    wh = Warehouse(tmp_path / "wh")
    keep, _ = write(wh, SEED, chunk=7)
    gone, _ = write(wh, SEED, chunk=5)
    files = sorted((wh.root / "parquet" / "decode" / f"run_id={gone}").glob("*.parquet"))
    files[0].unlink()
    res = CliRunner().invoke(main, ["sql", "select count(*) from decode", "--warehouse", str(wh.root)])
    assert res.exit_code == 2 and f"sweepkit drop {gone}" in res.output
    assert drop_runs(wh, [gone]) == {gone: len(files)}
    assert wh.query("select distinct run_id from decode").column(0).to_pylist() == [keep]
    assert wh.query("select count(*) from runs").column(0)[0].as_py() == 1
    assert not (wh.root / "parquet" / "decode" / f"run_id={gone}").exists()
    with pytest.raises(InputError, match=f"run_id = '{gone}' is not allowed"):
        drop_runs(wh, [gone])
    drop_runs(wh, [keep])                                   # the last run: the view falls back to its contract
    assert wh.query("select count(*) from decode").column(0)[0].as_py() == 0
    assert wh.query("select count(*) from v_decode").column(0)[0].as_py() == 0
    res = CliRunner().invoke(main, ["drop", "nope", "--yes", "--warehouse", str(wh.root)])
    assert res.exit_code == 2 and "run_id = 'nope' is not allowed" in res.output
