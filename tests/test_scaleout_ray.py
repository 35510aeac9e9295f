"""The Ray executor against a real local Ray cluster (``ray start --head`` on 127.0.0.1, 2 CPUs).

The cluster is started by the module fixture and stopped with it (its own process group, its own temp
folder: nothing else's Ray is touched). Runs go through the real CLI in subprocesses: a decode grid and a
tiny serving grid give exactly the local executor's rows; a Ray worker killed while it runs a task is
retried and nothing is lost or duplicated; a coordinator killed mid-run leaves nothing visible and
``--resume`` finishes it with the rows of an uninterrupted run.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'sweepkit[ray]'): Ray executor untested")

from sweepkit.store import Warehouse  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "grids" / "seed.toml"
TINY = ROOT / "tests" / "grids" / "serving-tiny.toml"
RAY_BIN = Path(sys.executable).with_name("ray")
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}
"""The test cluster listens on 127.0.0.1 only; without the variable, a token another local Ray left in
~/.ray would make the head and the drivers disagree."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    """HOST:PORT of a head node with 2 CPUs, up for this module."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="skray-", dir="/tmp")
    proc = subprocess.Popen([str(RAY_BIN), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
                             "--port", str(port), "--num-cpus", "2", "--include-dashboard", "false",
                             "--disable-usage-stats", "--temp-dir", temp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=ENV)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, "ray start exited"
            time.sleep(0.5)
        yield address
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


def cli(*args, wait=True, **kw):
    cmd = [sys.executable, "-m", "sweepkit.cli", *map(str, args)]
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV, **kw)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV, **kw)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def run_id_of(stderr: str) -> str:
    return re.search(r"run (\S+): .* -> ", stderr).group(1)


def rows(root: Path, run_id: str, table: str) -> list[tuple]:
    t = Warehouse(root).query(f"select * exclude (run_id) from {table} where run_id = $r", {"r": run_id})
    nan = lambda v: "NaN" if isinstance(v, float) and v != v else v  # noqa: E731  (NaN == NaN here)
    return sorted(tuple(nan(v) for v in r.values()) for r in t.to_pylist())


@pytest.fixture(scope="module")
def local_decode(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    r = cli("run", SEED, "--warehouse", root, "--executor", "local", "--chunk-points", 1, "--limit", 1)
    return rows(root, run_id_of(r.stderr), "decode")


def test_decode_and_serving_rows_equal_the_local_executor(cluster, local_decode, tmp_path):
    r = cli("run", SEED, "--warehouse", tmp_path, "--executor", "ray", "--address", cluster, "--chunk-points", 1,
            "--limit", 1)
    assert rows(tmp_path, run_id_of(r.stderr), "decode") == local_decode and len(local_decode) == 60
    local = cli("simulate", TINY, "--warehouse", tmp_path / "l", "--executor", "local")
    remote = cli("simulate", TINY, "--warehouse", tmp_path / "r", "--executor", "ray", "--address", cluster)
    for table in ("serving", "capacity"):
        want = rows(tmp_path / "l", run_id_of(local.stderr), table)
        assert rows(tmp_path / "r", run_id_of(remote.stderr), table) == want and want


def _busy_workers() -> list[int]:
    """Pids of Ray workers running our task now (their process title is ``ray::run_one``)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title.startswith(b"ray::run_one"):
            out.append(int(pid))
    return out


def test_a_worker_killed_mid_run_is_retried_nothing_lost_or_duplicated(cluster, local_decode, tmp_path):
    coordinator = cli("run", SEED, "--warehouse", tmp_path, "--executor", "ray", "--address", cluster,
                      "--chunk-points", 1, "--limit", 1, wait=False)
    killed = None
    deadline = time.time() + 120
    while killed is None and time.time() < deadline and coordinator.poll() is None:
        busy = _busy_workers()
        if busy:
            os.kill(busy[0], signal.SIGKILL)
            killed = busy[0]
        time.sleep(0.01)
    _, err = coordinator.communicate(timeout=300)
    assert killed is not None, "no worker was seen running a task"
    assert coordinator.returncode == 0, err[-3000:]
    got = rows(tmp_path, run_id_of(err), "decode")
    assert got == local_decode                      # every point once: nothing lost, nothing twice


def test_a_killed_coordinator_leaves_nothing_and_resume_finishes(cluster, local_decode, tmp_path):
    coordinator = cli("run", SEED, "--warehouse", tmp_path, "--executor", "ray", "--address", cluster,
                      "--chunk-points", 1, "--limit", 1, wait=False)
    pending = tmp_path / "pending"
    deadline = time.time() + 120
    while time.time() < deadline and not list(pending.glob("*/decode/part-*.parquet")):
        assert coordinator.poll() is None, coordinator.stderr.read()[-3000:]
        time.sleep(0.02)
    coordinator.send_signal(signal.SIGKILL)
    coordinator.wait(timeout=30)
    (run_dir,) = [p for p in pending.iterdir() if p.is_dir()]
    wh = Warehouse(tmp_path)
    assert wh.query("select count(*) n from decode").to_pylist() == [{"n": 0}]
    assert wh.query("select count(*) n from runs").to_pylist() == [{"n": 0}]
    before = len(list(run_dir.glob("decode/part-*.parquet")))
    assert 0 < before < 60
    r = cli("run", SEED, "--warehouse", tmp_path, "--executor", "ray", "--address", cluster, "--chunk-points", 1,
            "--limit", 1, "--resume", run_dir.name)
    assert run_id_of(r.stderr) == run_dir.name
    computed = int(re.search(r"\((\d+) parts computed now\)", r.stderr).group(1))
    assert computed <= 60 - before
    assert rows(tmp_path, run_dir.name, "decode") == local_decode
    assert not run_dir.exists()
