"""Scale-out runs in parts, in this process: the same rows as a streamed run, resume, sharding, bad input.

Parts are real Parquet files in a real warehouse; the sharding tests run in subprocesses whose XLA sees four
(decode) or two (serving) host devices (``--xla_force_host_platform_device_count=N``). The Ray executor's tests
are in test_scaleout_ray.py.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweepkit.scale import run_decode
from sweepkit.scale.coordinator import start_or_resume
from sweepkit.scale.work import DecodeWork
from sweepkit.store import Warehouse
from sweepkit.sweep import engine
from sweepkit.sweep.grid import load_grid

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "grids" / "seed.toml"


def rows(wh: Warehouse, run_id: str, table: str = "decode") -> list[tuple]:
    """Every row of a run, run_id left out, sorted (row order across Parquet files is not defined)."""
    t = wh.query(f"select * exclude (run_id) from {table} where run_id = $r", {"r": run_id})
    nan = lambda v: "NaN" if isinstance(v, float) and v != v else v  # noqa: E731  (NaN == NaN here)
    return sorted(tuple(nan(v) for v in r.values()) for r in t.to_pylist())


def streamed(wh: Warehouse, spec) -> str:
    return wh.write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text, grid_sha256=spec.sha256,
                        tables={"decode": engine.iter_decode_chunks(spec, 1 << 20)})


def test_local_parts_equal_the_streamed_run_row_for_row(tmp_path):
    spec = load_grid(SEED)
    wh = Warehouse(tmp_path / "wh")
    done = []
    run_id = run_decode(spec, wh, executor="local", chunk_points=8, on_done=done.append)
    assert len(done) == DecodeWork(spec, 8).chunks.n_chunks == 7
    assert rows(wh, run_id) == rows(wh, streamed(wh, spec))
    assert len(rows(wh, run_id)) == spec.n_points
    assert not (tmp_path / "wh" / "pending" / run_id).exists()          # the pending folder is gone once committed


def test_resume_computes_only_the_missing_parts_and_nothing_shows_before(tmp_path):
    spec = load_grid(SEED)
    wh = Warehouse(tmp_path / "wh")
    work = DecodeWork(spec, 8)
    run = start_or_resume(work, wh, spec.name, spec.sha256, None)     # a coordinator that dies after 3 parts
    work.run([0, 1, 2], str(wh.root), run.run_id)
    run.unlock()
    assert wh.query("select count(*) n from runs").to_pylist() == [{"n": 0}]
    assert wh.query("select count(*) n from decode").to_pylist() == [{"n": 0}]
    done = []
    assert run_decode(spec, wh, chunk_points=8, resume=run.run_id, on_done=done.append) == run.run_id
    assert sorted(t.index for t in done) == [3, 4, 5, 6]
    assert rows(wh, run.run_id) == rows(wh, streamed(wh, spec))


def test_resume_with_another_chunk_size_is_refused_in_one_line(tmp_path):
    spec = load_grid(SEED)
    wh = Warehouse(tmp_path / "wh")
    run = start_or_resume(DecodeWork(spec, 8), wh, spec.name, spec.sha256, None)
    run.unlock()
    r = subprocess.run([sys.executable, "-m", "sweepkit.cli", "run", str(SEED), "--warehouse", str(wh.root),
                        "--resume", run.run_id, "--chunk-points", "16"], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "--chunk-points" in r.stderr
    assert "work digest" in r.stderr


@pytest.mark.parametrize("args, needle", [
    (["--resume", "nope"], "no pending run with that id"),
    (["--executor", "local", "--address", "127.0.0.1:1"], "--address"),
    (["--executor", "local", "--retries", "-1"], "--retries"),
])
def test_bad_scale_options_are_one_line_exit_2(tmp_path, args, needle):
    r = subprocess.run([sys.executable, "-m", "sweepkit.cli", "run", str(SEED), "--warehouse", str(tmp_path / "wh"),
                        *args], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr and "Traceback" not in r.stderr


SHARDED = """
import jax, pyarrow as pa
from sweepkit.sweep.chunks import DecodeChunks
from sweepkit.sweep.grid import load_grid
from sweepkit.sweep import engine
assert len(jax.devices()) == 4, jax.devices()
spec = load_grid({seed!r})
c = DecodeChunks(spec, 8)
sharded = pa.Table.from_batches([b for _, b in c.batches(range(c.n_chunks))])
one = pa.Table.from_batches([b for _, b in c.batches(range(c.n_chunks), jax.devices()[:1])])
ref = pa.Table.from_batches(list(engine.iter_decode_chunks(spec, 8)))
assert c.n_chunks == 7                                   # two sharded calls, the second one padded
assert sharded.equals(one) and sharded.equals(ref), "rows differ"
print("ok", sharded.num_rows)
"""


def test_four_host_devices_give_the_rows_of_one():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", SHARDED.format(seed=str(SEED))], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["ok", "60"]


def test_serving_parts_equal_the_streamed_simulation(tmp_path):
    """One tiny workload, two levers sharing one compiled program, one device: search + reference parts."""
    grid = ROOT / "tests" / "grids" / "serving-tiny.toml"
    out = {}
    for label, extra in (("streamed", []), ("parts", ["--executor", "local"])):
        r = subprocess.run([sys.executable, "-m", "sweepkit.cli", "simulate", str(grid), "--warehouse",
                            str(tmp_path / label), *extra], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        wh = Warehouse(tmp_path / label)
        (run_id,) = wh.query("select run_id from runs").column(0).to_pylist()
        out[label] = {t: rows(wh, run_id, t) for t in ("serving", "capacity")}
    assert out["parts"] == out["streamed"] and out["parts"]["serving"] and len(out["parts"]["capacity"]) == 2


LANES = """
import json, sys
import jax
from sweepkit.jaxcache import enable_persistent_cache
from sweepkit.serving import programs
from sweepkit.serving.grid import load_serving_grid
from sweepkit.serving.run import run_grid

enable_persistent_cache()
grid = load_serving_grid(sys.argv[1])
tables = run_grid(grid)
rows = {k: sorted(repr(tuple(r.values())) for r in t.to_pylist()) for k, t in tables.items()}
# The grid's SLOs are unattainable, so the cost model's bound ends its searches after few lanes; one call of
# both levers at four loads each, whole (no early stop), puts eight lanes on the lane threads at once.
from sweepkit.serving.config import Config
from sweepkit.serving.lanes import run_configs
lanes = run_configs(grid.workloads[0], grid.cluster, [Config("H100", lv) for lv in grid.levers],
                    [[0.5, 1.0, 2.0, 4.0]] * 2, early_stop=False)
states = [lanes.state(c, r) for c in range(2) for r in range(4)]
rows["lanes"] = [repr((s.t_s.tolist(), s.iters.tolist(), s.stats.steps.tolist())) for s in states]
print(json.dumps({"devices": len(jax.local_devices()), "lanes": programs.LANES_RUN, "rows": rows}))
"""


def test_serving_lanes_on_two_host_devices_give_the_rows_of_one():
    """serving-tiny: 2 levers x 2 loads per call, so every call has lanes for both devices."""
    out = {}
    for n in (1, 2):
        env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={n}", "JAX_PLATFORMS": "cpu"}
        r = subprocess.run([sys.executable, "-c", LANES, str(ROOT / "tests" / "grids" / "serving-tiny.toml")],
                           capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-3000:]
        out[n] = json.loads(r.stdout.splitlines()[-1])
        assert out[n]["devices"] == n
    assert out[2]["rows"] == out[1]["rows"] and out[1]["rows"]["serving"] and len(out[1]["rows"]["capacity"]) == 2
    assert set(out[1]["lanes"]) == {"0"} and set(out[2]["lanes"]) == {"0", "1"}       # both devices ran lanes
    assert sum(out[2]["lanes"].values()) == sum(out[1]["lanes"].values())
