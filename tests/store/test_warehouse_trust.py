"""The warehouse cannot be written through a read, damaged files are named, and readers never block a commit.

Real processes and real files: `sweepkit` subprocesses, Parquet files damaged on disk, a second process
holding the DuckDB file open while a run commits.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweepkit.errors import InputError
from sweepkit.store import Warehouse

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
       "JAX_PLATFORMS": "cpu"}


def sweepkit(*args: str, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweepkit.cli", *args], env=ENV, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def rows(n: int, start: int = 0) -> list[pa.RecordBatch]:
    return [pa.record_batch({"x": pa.array(range(start, start + n), pa.int64())})]


def write(wh: Warehouse, n: int, tag: str, **kw) -> str:
    return wh.write_run(kind="trace", grid_name="g", grid_toml="", grid_sha256=tag, tables={"t": rows(n)}, **kw)


def fingerprint(root: Path) -> dict[str, str]:
    """Every file under the warehouse (the commit gate aside) -> SHA-256 of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".commit-gate"}


@pytest.fixture()
def wh(tmp_path) -> Warehouse:
    wh = Warehouse(tmp_path / "wh")
    write(wh, 5, "a")
    write(wh, 7, "b")
    return wh


def one_file(wh: Warehouse, run_id: str) -> Path:
    return next((wh.root / "parquet" / "t" / f"run_id={run_id}").glob("*.parquet"))


HOSTILE = [                 # the statements that wrote or downloaded; the corpus holds many more
    "COPY (select 42 as x) TO '{victim}' (FORMAT parquet)",
    "COPY (select 42 as x) TO '{victim}' (FORMAT parquet, USE_TMP_FILE false)",
    "COPY (select 1) TO '{outside}'",
    "EXPORT DATABASE '{folder}'",
    "select 1; COPY (select 1) TO '{outside}'",
    "INSTALL httpfs",
    "EXPLAIN ANALYZE COPY (select 42 as x) TO '{victim}' (FORMAT parquet, USE_TMP_FILE false)",
]


def test_sql_is_read_only_against_hostile_statements(wh, tmp_path):
    """Each statement is refused with one line (exit 2); every warehouse file is byte-for-byte unchanged and
    nothing appears outside it."""
    run_id = wh.query("select run_id from runs order by ended_at limit 1").column(0)[0].as_py()
    victim = one_file(wh, run_id)
    before = fingerprint(wh.root)
    names = {"victim": victim, "outside": tmp_path / "out.csv", "folder": tmp_path / "dump", "db": wh.db_path}
    for statement in HOSTILE:
        res = sweepkit("sql", statement.format(**names), "--warehouse", str(wh.root))
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error: sql: "), (statement, res.stderr)
        assert "Traceback" not in res.stderr
    assert fingerprint(wh.root) == before
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "dump").exists()
    assert wh.query("select count(*) from t").column(0)[0].as_py() == 12


def test_python_api_query_is_read_only_too(wh, tmp_path):
    victim = one_file(wh, wh.query("select min(run_id) from runs").column(0)[0].as_py())
    before = fingerprint(wh.root)
    with pytest.raises(InputError, match="sql: COPY is not allowed"):
        wh.query(f"copy (select 1 as x) to '{victim}'")
    with pytest.raises(InputError, match="2 statements given"):
        wh.query("select 1; select 2")
    con = wh.connect()                        # the raw snapshot: no file outside the committed ones, no network
    try:
        for statement in (f"copy (select 1 as x) to '{tmp_path / 'x.csv'}'", "install httpfs",
                          f"attach '{wh.db_path}' as w", "set enable_external_access = true"):
            with pytest.raises(duckdb.Error, match="disabled by configuration|configuration has been locked"):
                con.execute(statement)
    finally:
        con.close()
    assert fingerprint(wh.root) == before


def test_export_refuses_targets_inside_the_warehouse_and_writes_atomically(wh, tmp_path):
    root = wh.root
    before = fingerprint(root)
    victim = next((root / "parquet").rglob("*.parquet"))
    for target in (root / "sweepkit.duckdb", victim, root / "new.csv", root / "parquet" / "x.csv"):
        res = sweepkit("export", "v_decode", "--as", "csv", "--warehouse", str(root), "--out", str(target))
        assert res.returncode == 2 and "a file outside the warehouse folder" in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    link = tmp_path / "link.parquet"
    link.symlink_to(victim)                                        # a link into the warehouse is inside too
    assert sweepkit("export", "v_decode", "--warehouse", str(root), "--out", str(link)).returncode == 2
    assert fingerprint(root) == before
    out = tmp_path / "v.parquet"
    out.write_text("an older export")
    res = sweepkit("export", "v_decode", "--warehouse", str(root), "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert pq.read_table(out).num_rows == 0 and not list(tmp_path.glob(".v.parquet.*"))


@pytest.mark.parametrize("damage", ["delete", "truncate", "other_schema"])
def test_a_damaged_file_is_named_and_other_runs_still_commit(wh, tmp_path, damage):
    first = wh.query("select min(run_id) from runs").column(0)[0].as_py()
    victim = one_file(wh, first)
    if damage == "delete":
        victim.unlink()
    elif damage == "truncate":
        victim.write_bytes(victim.read_bytes()[:-20])
    else:                                          # same size would be luck: the footer digest catches it
        pq.write_table(pa.table({"y": pa.array(["a", "b", "c", "d", "e"])}), victim)
    res = sweepkit("sql", "select count(*) from t", "--warehouse", str(wh.root))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert f"committed run {first} is damaged" in res.stderr and f"sweepkit drop {first}" in res.stderr
    assert wh.damaged().keys() == {first}
    res = sweepkit("runs", "--warehouse", str(wh.root), "--format", "json")
    assert res.returncode == 0 and f"run {first} is damaged" in res.stderr and len(json.loads(res.stdout)) == 2
    third = write(wh, 3, "c")                       # a new run commits whatever another run's files say
    assert wh.query("select count(*) from runs").column(0)[0].as_py() == 3
    with pytest.raises(duckdb.Error, match=f"run {first} is damaged"):
        wh.query("select count(*) from t")
    res = sweepkit("drop", first, "--yes", "--warehouse", str(wh.root))
    assert res.returncode == 0, res.stderr
    assert wh.query("select count(*) from t").column(0)[0].as_py() == 10 and third


def test_the_report_skips_a_damaged_section_and_says_so(tmp_path):
    root = tmp_path / "wh"
    assert sweepkit("run", str(ROOT / "grids/seed.toml"), "--warehouse", str(root), "--format", "csv",
                    timeout=300).returncode == 0
    victim = next((root / "parquet" / "decode").rglob("*.parquet"))
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    res = sweepkit("report", "--warehouse", str(root), "--out", str(tmp_path / "r"), "--no-png", "--format", "json",
                   timeout=300)
    assert res.returncode == 0, res.stderr
    assert "skipped: " in res.stderr and "sweepkit drop" in res.stderr
    html = (tmp_path / "r" / "report.html").read_text()
    assert 'data-damaged="speedup"' in html or "data-damaged=" in html
    assert json.loads(res.stdout)[0]["kind"] == "html"
    res = sweepkit("run", str(ROOT / "grids/leviathan.toml"), "--warehouse", str(root), timeout=300)
    assert res.returncode == 1 and "is committed, but its table cannot be shown" in res.stderr, res.stderr
    # the run's own note, then the one error line (progress lines aside)
    lines = [line for line in res.stderr.strip().splitlines() if " ETA " not in line]
    assert len(lines) == 2 and lines[1].startswith("Error: run ") and "sweepkit drop" in lines[1]
    assert Warehouse(root).query("select count(*) from runs").column(0)[0].as_py() == 2


BI_READER = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print("OPEN", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


def test_a_long_reader_never_blocks_a_commit_and_a_blocked_writer_waits_and_commits(wh, tmp_path):
    # sweepkit's own readers hold the DuckDB file only while copying the run records
    con = wh.connect()
    try:
        t0 = time.monotonic()
        write(wh, 4, "d", on_wait=lambda m: pytest.fail(f"waited for a sweepkit reader: {m}"))
        assert time.monotonic() - t0 < 30
        assert con.execute("select count(*) from t").fetchone()[0] == 12     # the reader's snapshot
    finally:
        con.close()
    # another client holding the file: the writer says it waits, keeps its files, and commits afterwards
    reader = subprocess.Popen([sys.executable, "-c", BI_READER, str(wh.db_path), "4"], env=ENV, text=True,
                              stdout=subprocess.PIPE)
    assert reader.stdout.readline().strip() == "OPEN"
    said: list[str] = []
    t0 = time.monotonic()
    run_id = write(wh, 6, "e", on_wait=said.append)
    waited = time.monotonic() - t0
    reader.wait(timeout=60)
    assert len(said) == 1 and said[0].startswith("waiting: ") and waited >= 2, (said, waited)
    assert wh.query("select count(*) from t where run_id = $r", {"r": run_id}).column(0)[0].as_py() == 6


def test_a_run_that_computed_before_writing_counts_its_wall_time_from_the_start(tmp_path):
    """A serving run computes its tables, then writes them: runs.wall_s and started_at count the compute."""
    wh = Warehouse(tmp_path / "wh")
    run_id = write(wh, 3, "f", since_s=time.perf_counter() - 5.0)
    row = wh.query("select wall_s, epoch(ended_at) - epoch(started_at) as span_s from runs where run_id = $r",
                   {"r": run_id}).to_pylist()[0]
    assert 5.0 <= row["wall_s"] < 60 and abs(row["span_s"] - row["wall_s"]) < 1.0
