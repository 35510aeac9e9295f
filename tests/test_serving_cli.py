"""Serving warehouse/SQL/CLI wiring: matrix verdicts and caveats, explorer, and one-line errors (exit 2)."""

import json

import pyarrow as pa
import pytest
from click.testing import CliRunner

from sweepkit.cli import main
from sweepkit.store import Warehouse, run_query
from sweepkit.store.warehouse import declared_columns

CAP_COLS = declared_columns()["capacity"]


def _cap_row(device, lever, workload, cap, goodput, cost, energy, ttft, tpot, itl, draft="none", saturated=False):
    row = {c: 0.0 for c in CAP_COLS if c != "run_id"}
    row.update(device=device, lever=lever, workload=workload, draft=draft, gamma=0 if draft == "none" else 3,
               alpha=0.0 if draft == "none" else 0.7, saturated=saturated, load_unit="sessions/s",
               capacity_per_s=cap, goodput_per_gpu_per_s=goodput, cost_per_mtok_usd=cost, energy_per_token_j=energy,
               ttft_p99_s_at_ref=ttft, tpot_p99_s_at_ref=tpot, itl_p99_s_at_ref=itl)
    return row


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    root = tmp_path_factory.mktemp("wh")
    rows = [
        _cap_row("H100", "baseline", "voice", 0.44, 0.32, 54.2, 15.8, 0.2138, 0.0275, 0.0185),
        _cap_row("H100", "mtp", "voice", 1.06, 0.78, 22.2, 9.15, 0.2245, 0.0151, 0.0196, draft="mtp"),
        _cap_row("H100", "baseline", "chat", 3.875, 1.42, 1.84, 1.153, 0.3555, 0.0333, 0.2172),
        _cap_row("H100", "mtp", "chat", 4.9, 1.80, 1.45, 1.06, 0.3580, 0.0163, 0.1238, draft="mtp"),
    ]
    schema = pa.Table.from_pylist(rows).schema
    wh = Warehouse(root)
    s_cols = [c for c in declared_columns()["serving"] if c != "run_id"]
    text_cols = {"device", "lever", "workload", "draft", "load_unit", "purpose"}
    int_cols = {"gamma", "requests", "window_requests", "completed"}
    s_row = {c: ("x" if c in text_cols else 0 if c in int_cols else False if c == "stopped_early" else 0.0)
             for c in s_cols}
    wh.write_run(kind="serving", grid_name="t", grid_toml="", grid_sha256="0" * 64,
                 tables={"serving": iter(pa.Table.from_pylist([s_row]).to_batches()),
                         "capacity": iter(pa.Table.from_pylist(rows, schema=schema).to_batches())})
    return wh


def test_matrix_verdicts_and_caveats(warehouse):
    t = run_query(warehouse, "matrix").to_pylist()
    cells = {(r["workload"], r["metric"]): r for r in t}
    assert len(t) == 12 and {r["lever"] for r in t} == {"mtp"}
    g = cells[("voice", "goodput")]
    assert g["change_pct"] == pytest.approx((0.78 - 0.32) / 0.32 * 100)
    assert g["verdict"] == "better" and g["caveats"] == "Eα"
    assert cells[("voice", "cost_per_mtok")]["caveats"] == "E$α"
    assert cells[("voice", "ttft_p99")]["verdict"] == "worse" and cells[("voice", "ttft_p99")]["caveats"] == "α"
    assert cells[("chat", "ttft_p99")]["verdict"] == "same"          # +0.7% is within +-2%
    assert cells[("chat", "tpot_p99")]["verdict"] == "better"
    assert cells[("chat", "goodput")]["caveats"] == "α"               # capacity did not double


def test_explorer_returns_two_chosen_metrics(warehouse):
    t = run_query(warehouse, "explorer", {"x": "goodput", "y": "itl_p99"}).to_pylist()
    assert len(t) == 4
    assert {r["x_metric"] for r in t} == {"goodput"} and {r["y_metric"] for r in t} == {"itl_p99"}


def test_matrix_command_prints_json(warehouse):
    res = CliRunner().invoke(main, ["matrix", "--warehouse", str(warehouse.root), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)) == 12


@pytest.mark.parametrize("body, needle", [
    ('[serving]\nworkloads = ["chat"]\nlevers = ["baseline", "turbo"]\n', "levers = 'turbo'"),
    ('[serving]\nworkloads = ["chatt"]\nlevers = ["baseline"]\n', "workloads = 'chatt'"),
    ('[serving]\nworkloads = ["chat"]\nlevers = ["baseline"]\nrates_per_call = 0\n', "rates_per_call"),
    ('[serving]\nworkloads = ["chat"]\nlevers = ["baseline"]\nworkloads_file = "nope.toml"\n', "no such file"),
    ('[serving]\nworkloads = ["chat"]\nlevers = ["baseline"]\nlevers_file = "bad.toml"\n', "alpha = 2"),
    ('[serving]\nworkloads = ["chat"]\nlevers = ["baseline"]\ncluster_file = "badc.toml"\n', "tp = 0"),
    ('[serving\n', "not valid TOML"),
    ('[serving]\nworkloads = ["chat", "chat"]\nlevers = ["baseline"]\n', "workloads lists 'chat' twice"),
])
def test_bad_grid_files_are_one_line_exit_2(tmp_path, body, needle):
    (tmp_path / "bad.toml").write_text('[levers.x]\ndraft = "mtp"\ngamma = 3\nalpha = 2\n')
    (tmp_path / "badc.toml").write_text('[cluster]\nmodel = "llama-3-70b"\ninstances = 2\ntp = 0\ndevices = ["H100"]\n')
    g = tmp_path / "g.toml"
    g.write_text(body)
    res = CliRunner().invoke(main, ["simulate", str(g), "--warehouse", str(tmp_path / "wh")])
    assert res.exit_code == 2, res.output
    lines = [l for l in res.output.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and needle in lines[0], res.output


def test_sigint_mid_simulation_exits_130_and_commits_nothing(tmp_path):
    """Ctrl-C while `sweepkit simulate` runs (capacity searches on worker threads): exit 130, one line, no run."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "JAX_PLATFORMS": "cpu", "SWEEPKIT_JAX_CACHE": "off"}
    wh = tmp_path / "wh"
    grid = root / "tests/grids/serving-small.toml"
    proc = subprocess.Popen([sys.executable, "-m", "sweepkit.cli", "simulate", str(grid), "--warehouse", str(wh),
                             "--force"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=tmp_path)
    try:
        first = proc.stderr.readline()            # the first progress line: mid-simulation, handler installed
        assert first.startswith("simulating serving-small") and proc.poll() is None, first + proc.communicate()[1]
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        err = first + err
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted: nothing was committed" in err and "Traceback" not in err, err
    assert time.monotonic() - t0 < 60
    assert Warehouse(wh).query("select count(*) n from runs").column("n")[0].as_py() == 0


def test_pareto_fronts_and_best_lever(warehouse):
    """chat: MTP beats the baseline on goodput and cost but not on TTFT p99 (0.3580 vs 0.3555 s)."""
    rows = run_query(warehouse, "pareto").to_pylist()
    on = {(r["workload"], r["lever"], r["front"]): r["on_front"] for r in rows}
    assert on[("chat", "mtp", "all")] and on[("chat", "baseline", "all")]
    assert on[("chat", "mtp", "cost_per_mtok x goodput")] and not on[("chat", "baseline", "cost_per_mtok x goodput")]
    assert on[("chat", "baseline", "itl_p99 x ttft_p99")]   # best TTFT: nothing dominates it
    fronts = {r["front"] for r in rows}
    assert len(fronts) == 16 and "all" in fronts          # 15 metric pairs + all six
    keys = [(r["workload"], r["device"], r["lever"], r["front"]) for r in rows]
    assert len(keys) == len(set(keys))
    best = {(r["workload"], r["device"]): r for r in run_query(warehouse, "best_lever").to_pylist()}
    assert best[("chat", "H100")]["lever"] == "mtp" and best[("voice", "H100")]["lever"] == "mtp"
    assert best[("chat", "H100")]["gain_x"] == pytest.approx(1.80 / 1.42)
