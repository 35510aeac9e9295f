"""Committed files carry a content SHA-256: a flipped byte in a data page is found by `sweepkit verify` and by
a query over the file, a warehouse committed before checksums still opens, and every case names the fix.

Real Parquet files written by a real commit, damaged on disk one byte at a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweepkit.store import Warehouse
from sweepkit.store.integrity import NO_CHECKSUM, footer_sha256

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
       "JAX_PLATFORMS": "cpu"}
N_ROWS = 3000


def sweepkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweepkit.cli", *args], env=ENV, capture_output=True, text=True,
                          timeout=120)


def batches(n: int, seed: int) -> list[pa.RecordBatch]:
    return [pa.record_batch({"x": pa.array(range(seed, seed + n), pa.int64()),
                             "y": pa.array([((i * 7919 + seed) % 1000) / 7.0 for i in range(n)], pa.float64()),
                             "device": pa.array([("H100", "B200", "MI300X")[i % 3] for i in range(n)])})]


def write(wh: Warehouse, seed: int) -> str:
    return wh.write_run(kind="trace", grid_name="g", grid_toml="", grid_sha256=str(seed),
                        tables={"t": batches(N_ROWS, seed)})


@pytest.fixture()
def wh(tmp_path) -> Warehouse:
    wh = Warehouse(tmp_path / "wh")
    write(wh, 0)
    write(wh, 1)
    return wh


def run_file(wh: Warehouse, run_id: str) -> Path:
    return next((wh.root / "parquet" / "t" / f"run_id={run_id}").glob("*.parquet"))


def data_page_positions(path: Path, n: int) -> list[int]:
    """``n`` byte offsets inside the data pages of the file's column chunks (dictionary pages left out),
    the middle of the pages of ``n`` different chunks where the file has that many, else spread further."""
    meta = pq.ParquetFile(path).metadata
    spans = []
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            col = meta.row_group(g).column(c)
            start = col.data_page_offset
            end = (col.dictionary_page_offset or start) + col.total_compressed_size
            if end - start >= 32:
                spans.append((start, end))
    assert spans
    spans.sort(key=lambda s: s[0] - s[1])                # the largest chunks first
    out = []
    for i in range(n):
        start, end = spans[i % len(spans)]
        k = i // len(spans) + 1
        out.append(start + (end - start) * k // (n // len(spans) + 2))
    assert len(set(out)) == n
    return out


@pytest.fixture(scope="module")
def decode_warehouse(tmp_path_factory) -> Warehouse:
    """A real decode run of grids/seed.toml (60 points, ~3 s), committed once for the module."""
    root = tmp_path_factory.mktemp("decode") / "wh"
    res = sweepkit("run", str(ROOT / "grids" / "seed.toml"), "--warehouse", str(root))
    assert res.returncode == 0, res.stderr
    return Warehouse(root)


def test_nine_flipped_bytes_in_data_pages_are_each_found_by_verify_and_by_a_query(decode_warehouse):
    wh = decode_warehouse
    (run_id,) = (r.as_py() for r in wh.query("select run_id from runs").column(0))
    victim = next((wh.root / "parquet" / "decode" / f"run_id={run_id}").glob("*.parquet"))
    original = victim.read_bytes()
    footer = footer_sha256(victim)
    query = "select device, batch, speedup, s_per_token_spec from decode order by all"
    answer = wh.query(query)
    assert all(status == "ok" for *_, status in wh.verify())
    positions = data_page_positions(victim, 9)
    try:
        for pos in positions:
            damaged = bytearray(original)
            damaged[pos] ^= 0xFF
            victim.write_bytes(bytes(damaged))
            assert footer_sha256(victim) == footer           # size and footer alone would not see it
            statuses = {path: status for _run, _t, path, status in wh.verify()}
            bad = [p for p, s in statuses.items() if s.startswith("damaged: ")]
            assert bad == [str(victim.relative_to(wh.root))], (pos, statuses)
            assert "content SHA-256" in statuses[bad[0]]
            with pytest.raises(duckdb.Error, match=f"run {run_id} is damaged.*sweepkit drop {run_id}"):
                wh.query(query)
            victim.write_bytes(original)
    finally:
        victim.write_bytes(original)
    assert wh.query(query).equals(answer)


def test_verify_cli_names_the_damaged_run_and_the_fix_and_exits_1(wh):
    first, second = (r.as_py() for r in wh.query("select run_id from runs order by run_id").column(0))
    res = sweepkit("verify", "--warehouse", str(wh.root), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert [r["status"] for r in json.loads(res.stdout)] == ["ok", "ok"]
    victim = run_file(wh, second)
    data = bytearray(victim.read_bytes())
    data[data_page_positions(victim, 1)[0]] ^= 0x01
    victim.write_bytes(bytes(data))
    res = sweepkit("verify", "--warehouse", str(wh.root), "--format", "json")
    assert res.returncode == 1, res.stderr
    rows = {r["run_id"]: r["status"] for r in json.loads(res.stdout)}
    assert rows[first] == "ok" and rows[second].startswith("damaged: ")
    assert f"run {second} is damaged" in res.stderr and f"`sweepkit drop {second}`" in res.stderr
    res = sweepkit("sql", "select count(*) from t", "--warehouse", str(wh.root))
    assert res.returncode == 2 and f"sweepkit drop {second}" in res.stderr and "Traceback" not in res.stderr
    assert sweepkit("drop", second, "--yes", "--warehouse", str(wh.root)).returncode == 0
    res = sweepkit("verify", "--warehouse", str(wh.root))
    assert res.returncode == 0 and "1 of 1 files as committed" in res.stderr


def test_a_warehouse_committed_before_checksums_opens_and_says_no_checksum_recorded(wh):
    con = duckdb.connect(str(wh.db_path))
    try:                                              # as an older sweepkit left it: no content_sha256 column
        con.execute("alter table run_files drop column content_sha256")
        con.execute("delete from warehouse_meta where key = 'schema_sha256'")
    finally:
        con.close()
    assert wh.query("select count(*) from t").column(0)[0].as_py() == 2 * N_ROWS
    assert [s for *_, s in wh.verify()] == [f"ok ({NO_CHECKSUM})"] * 2
    res = sweepkit("verify", "--warehouse", str(wh.root))
    assert res.returncode == 0 and NO_CHECKSUM in res.stdout + res.stderr, res.stderr
    third = write(wh, 2)                              # the next commit adds the column; its file gets a digest
    statuses = {run: s for run, _t, _p, s in wh.verify()}
    assert statuses[third] == "ok" and sorted(statuses.values()).count(f"ok ({NO_CHECKSUM})") == 2
    assert wh.query("select count(*) from t").column(0)[0].as_py() == 3 * N_ROWS


def test_a_read_hashes_content_within_its_budget_and_checks_size_and_footer_beyond_it(wh):
    from sweepkit.store import integrity

    first = wh.query("select min(run_id) from runs").column(0)[0].as_py()
    victim = run_file(wh, first)
    data = bytearray(victim.read_bytes())
    data[data_page_positions(victim, 1)[0]] ^= 0x01
    victim.write_bytes(bytes(data))
    files = [tuple(r.values()) for r in wh.query(
        "select run_id, table_name, path, size_bytes, footer_sha256, content_sha256 from run_files "
        "order by run_id").to_pylist()]
    assert all(len(f[5]) == 64 for f in files)
    assert integrity.damaged_runs(wh.root, files).keys() == {first}
    assert integrity.damaged_runs(wh.root, files, hash_bytes=victim.stat().st_size - 1) == {}
