"""A warehouse whose Parquet lives in an object store, against a real local S3-compatible server.

The server is moto's ``ThreadedMotoServer`` on 127.0.0.1 (``pip install 'moto[server]'``, the ``test``
extra); sweepkit reaches it the way it reaches AWS, through the standard AWS_* environment variables and
pyarrow's S3FileSystem, and DuckDB reads the objects back through Arrow datasets (no httpfs).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from click.testing import CliRunner

from sweepkit.cli import main
from sweepkit.scale import run_decode
from sweepkit.scale.coordinator import start_or_resume
from sweepkit.scale.work import DecodeWork
from sweepkit.store import Warehouse
from sweepkit.sweep import engine
from sweepkit.sweep.grid import load_grid

moto_server = pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install 'moto[server]', "
                                                         "part of sweepkit's test extra): no local S3 server")

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "grids" / "seed.toml"
TINY_SERVING = ROOT / "tests" / "grids" / "serving-tiny.toml"


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on 127.0.0.1 and the AWS_* variables pointing at it (children inherit them)."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        fs = pafs.S3FileSystem(endpoint_override=f"{host}:{port}", scheme="http", access_key="testing",
                               secret_key="testing", region="us-east-1", allow_bucket_creation=True)
        yield fs
    server.stop()


@pytest.fixture
def bucket(s3):
    """A fresh bucket's name (tests share the server, never a bucket)."""
    name = f"sk-{uuid.uuid4().hex[:12]}"
    s3.create_dir(name)
    return name


def objects(fs: pafs.FileSystem, prefix: str) -> list[str]:
    return sorted(f.path for f in fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
                  if f.type == pafs.FileType.File)


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def rows(wh: Warehouse, run_id: str, table: str = "decode") -> list[tuple]:
    """Every row of a run, run_id left out, sorted (row order across Parquet files is not defined)."""
    t = wh.query(f"select * exclude (run_id) from {table} where run_id = $r", {"r": run_id})
    nan = lambda v: "NaN" if isinstance(v, float) and v != v else v  # noqa: E731
    return sorted(tuple(nan(v) for v in r.values()) for r in t.to_pylist())


def only_run(wh: Warehouse) -> str:
    (run_id,) = wh.query("select run_id from runs").column(0).to_pylist()
    return run_id


def test_run_into_s3_gives_the_rows_of_a_local_run_and_query_reads_it_back(s3, bucket, tmp_path):
    local, remote = str(tmp_path / "local"), str(tmp_path / "remote")
    uri = f"s3://{bucket}/sweeps"
    res_local = cli("run", str(SEED), "--warehouse", local, "--format", "json")
    res_remote = cli("run", str(SEED), "--warehouse", remote, "--parquet-uri", uri, "--format", "json")
    assert res_local.exit_code == 0 and res_remote.exit_code == 0, res_remote.output
    assert json.loads(res_remote.stdout) == json.loads(res_local.stdout)          # the headline table
    a, b = Warehouse(local), Warehouse(remote)
    assert rows(b, only_run(b)) == rows(a, only_run(a)) and len(rows(b, only_run(b))) == 60
    run_id = only_run(b)
    assert not (tmp_path / "remote" / "parquet").exists()                         # no Parquet in the folder
    (path,) = b.query("select path from run_files").column(0).to_pylist()
    assert path.startswith(f"{uri}/parquet/decode/run_id={run_id}/part-")
    assert objects(s3, bucket) == [path[len("s3://"):]]
    q = [cli("query", "break_even", "--warehouse", w, "--format", "json") for w in (local, remote)]
    assert q[1].exit_code == 0 and json.loads(q[1].stdout) == json.loads(q[0].stdout) != []
    # The next run needs no --parquet-uri (the warehouse keeps its location) and is reused as usual.
    assert "reusing run" in cli("run", str(SEED), "--warehouse", remote).stderr
    # The views persisted in the DuckDB file cannot read the store; they say so in one line.
    con = duckdb.connect(str(tmp_path / "remote" / "sweepkit.duckdb"), read_only=True)
    try:
        with pytest.raises(duckdb.Error, match=f"its Parquet is in {uri}, which the views stored"):
            con.sql("select count(*) from decode").fetchall()
    finally:
        con.close()
    # verify reads every object whole: a flipped byte (size and footer unchanged) is found and named.
    res = cli("verify", "--warehouse", remote, "--format", "json")
    assert res.exit_code == 0 and [r["status"] for r in json.loads(res.stdout)] == ["ok"], res.output
    key = path[len("s3://"):]
    with s3.open_input_stream(key) as fh:
        data = bytearray(fh.read())
    data[len(data) // 3] ^= 0xFF
    with s3.open_output_stream(key) as fh:
        fh.write(bytes(data))
    res = cli("verify", "--warehouse", remote, "--format", "json")
    assert res.exit_code == 1 and json.loads(res.stdout)[0]["status"].startswith("damaged: "), res.output
    assert f"`sweepkit drop {run_id}`" in res.stderr
    # Dropping the run deletes its objects.
    assert cli("drop", run_id, "--yes", "--warehouse", remote).exit_code == 0
    assert objects(s3, bucket) == [] and b.query("select count(*) n from decode").to_pylist() == [{"n": 0}]


def test_serving_parts_into_s3_commit_and_matrix_reads_them_back(s3, bucket, tmp_path):
    wh = str(tmp_path / "wh")
    res = cli("simulate", str(TINY_SERVING), "--warehouse", wh, "--parquet-uri", f"s3://{bucket}",
              "--executor", "local", "--format", "json")
    assert res.exit_code == 0, res.output
    run_id = only_run(Warehouse(wh))
    m = cli("matrix", "--warehouse", wh, "--format", "json")
    assert m.exit_code == 0, m.output
    matrix = json.loads(m.stdout)
    assert matrix == json.loads(res.stdout) and {r["device"] for r in matrix} == {"H100"}
    assert {r["lever"] for r in matrix} >= {"decode-priority"}
    keys = objects(s3, bucket)                  # copied out of pending/ into the run's prefixes, pending gone
    assert keys and all(k.startswith(f"{bucket}/parquet/") and f"/run_id={run_id}/" in k for k in keys)
    assert {k.split("/")[2] for k in keys} == {"serving", "capacity"}
    assert not (tmp_path / "wh" / "pending" / run_id).exists()


def test_a_failed_run_leaves_nothing_visible_and_nothing_in_the_store(s3, bucket, tmp_path):
    spec = load_grid(SEED)
    wh = Warehouse(tmp_path / "wh", parquet_uri=f"s3://{bucket}/w")

    def broken():
        for i, b in enumerate(engine.iter_decode_chunks(spec, 8)):
            if i == 3:
                raise RuntimeError("engine blew up")
            yield b

    with pytest.raises(RuntimeError, match="blew up"):
        wh.write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text, grid_sha256=spec.sha256,
                     tables={"decode": broken()})
    assert wh.query("select count(*) n from runs").to_pylist() == [{"n": 0}]
    assert objects(s3, bucket) == []


CHILD = """
import sys, time
import pyarrow as pa
import sweepkit.store.writer as w
w.ROW_GROUP_ROWS, w.FILE_ROWS = 4, 4
from sweepkit.store import Warehouse
def slow():
    with pa.ipc.open_file(sys.argv[3]) as f:
        for i in range(f.num_record_batches):
            time.sleep(0.3)
            yield f.get_batch(i)
run_id = Warehouse(sys.argv[1], parquet_uri=sys.argv[2]).write_run(kind="decode", grid_name="seed", grid_toml="",
    grid_sha256="x", tables={"decode": slow()}, on_rows=lambda n: print(n, flush=True))
print("DONE", run_id, flush=True)
"""


def test_a_killed_writer_leaves_nothing_visible_and_the_next_run_cleans_its_objects(s3, bucket, tmp_path):
    spec = load_grid(SEED)
    batches = list(engine.iter_decode_chunks(spec, 4))
    ipc = tmp_path / "seed.arrow"
    with pa.ipc.new_file(str(ipc), batches[0].schema) as f:
        for b in batches:
            f.write_batch(b)
    uri = f"s3://{bucket}/w"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "wh"), uri, str(ipc)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        t0 = time.monotonic()
        while not objects(s3, f"{bucket}/w/parquet"):           # files of the run landed in the store
            assert proc.poll() is None and time.monotonic() - t0 < 60, proc.stderr.read()
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert len(batches) > 3 and proc.returncode == -signal.SIGKILL
    wh = Warehouse(tmp_path / "wh", parquet_uri=uri)       # no run committed yet: the location is given again
    left = objects(s3, bucket)
    assert left and wh.query("select count(*) n from decode").to_pylist() == [{"n": 0}]
    run_id = wh.write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text, grid_sha256=spec.sha256,
                          tables={"decode": iter(batches)})
    assert len(rows(wh, run_id)) == 60
    assert objects(s3, bucket) and not set(left) & set(objects(s3, bucket))      # the dead run's are gone


def test_an_interrupted_run_in_parts_resumes_from_its_parts_in_the_store(s3, bucket, tmp_path):
    spec = load_grid(SEED)
    wh = Warehouse(tmp_path / "wh", parquet_uri=f"s3://{bucket}/w")
    work = DecodeWork(spec, 8)
    run = start_or_resume(work, wh, spec.name, spec.sha256, None)     # a coordinator that dies after 3 parts
    work.run([0, 1, 2], run.parts_root, run.run_id)
    run.unlock()
    assert len(objects(s3, f"{bucket}/w/pending/{run.run_id}")) == 3
    assert wh.query("select count(*) n from decode").to_pylist() == [{"n": 0}]
    wh.clean_stale()                                          # a pending run's parts are not stale
    assert len(objects(s3, f"{bucket}/w/pending/{run.run_id}")) == 3
    done = []
    assert run_decode(spec, Warehouse(tmp_path / "wh"), chunk_points=8, resume=run.run_id,
                      on_done=done.append) == run.run_id
    assert sorted(t.index for t in done) == [3, 4, 5, 6]
    local = Warehouse(tmp_path / "local")
    streamed = local.write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text,
                               grid_sha256=spec.sha256, tables={"decode": engine.iter_decode_chunks(spec, 1 << 20)})
    assert rows(wh, run.run_id) == rows(local, streamed)
    assert objects(s3, f"{bucket}/w/pending") == [] and len(objects(s3, f"{bucket}/w/parquet")) == 7


@pytest.mark.parametrize("uri, message", [
    ("http://host/x", "--parquet-uri = 'http://host/x' is not allowed; expected s3://bucket[/prefix]"),
    ("s3://", "--parquet-uri = 's3://' is not allowed"),
    ("s3://Upper_Case/x", "--parquet-uri = 's3://Upper_Case/x' is not allowed"),
    ("s3://bkt/../x", "--parquet-uri = 's3://bkt/../x' is not allowed"),
    ("s3://bkt//x", "--parquet-uri = 's3://bkt//x' is not allowed"),
    ("/shared/folder", "put the whole warehouse there with --warehouse"),
    ("s3://no-such-bucket-here/x", "bucket 'no-such-bucket-here' does not exist at http://127.0.0.1:"),
])
def test_bad_uris_are_one_line_exit_2(s3, tmp_path, uri, message):
    res = cli("run", str(SEED), "--warehouse", str(tmp_path / "wh"), "--parquet-uri", uri)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr
    assert not (tmp_path / "wh" / "sweepkit.duckdb").exists()


def test_another_location_than_the_committed_runs_is_refused_in_a_subprocess(s3, bucket, tmp_path):
    wh = str(tmp_path / "wh")
    assert cli("run", str(SEED), "--warehouse", wh).exit_code == 0              # local Parquet first
    r = subprocess.run([sys.executable, "-m", "sweepkit.cli", "run", str(SEED), "--warehouse", wh, "--force",
                        "--parquet-uri", f"s3://{bucket}/x"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"keep their Parquet in its folder {wh}/parquet" in r.stderr and objects(s3, bucket) == []
