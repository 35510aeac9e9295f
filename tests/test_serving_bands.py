"""Uncertainty bands on a serving grid ([serving.bands]): draws as extra lanes, serving_draws, matrix shares."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from sweepkit.cli import main
from sweepkit.serving.draws import draws_of, parse_serving_bands, run_draws
from sweepkit.serving.grid import load_serving_grid
from sweepkit.store import Warehouse, run_query
from sweepkit.store.warehouse import declared_columns

GRIDS = Path(__file__).resolve().parent / "grids"
GRID = f"""name = "bands-test"
[serving]
workloads = ["tiny-ok"]
levers = ["baseline", "mtp"]
devices = ["H100"]
workloads_file = "{GRIDS / 'bands-workloads.toml'}"
cluster_file = "{GRIDS / 'tiny-cluster.toml'}"
rates_per_call = 2
tolerance = 0.1
"""
CAPACITY = [c for c in declared_columns()["capacity"] if c != "run_id"]


def _grid(tmp_path, bands: str):
    path = tmp_path / "g.toml"
    path.write_text(GRID + bands)
    return path


def _simulate(root: Path, bands: str) -> tuple[Path, Warehouse, str]:
    """`sweepkit simulate` of the test grid with ``bands`` into a new warehouse (the CLI's compile cache on)."""
    grid = _grid(root, bands)
    res = CliRunner().invoke(main, ["simulate", str(grid), "--warehouse", str(root / "wh"), "--format", "markdown"])
    assert res.exit_code == 0, res.output
    return grid, Warehouse(root / "wh"), res.stdout


@pytest.fixture(scope="module")
def zero_width(tmp_path_factory):
    bands = "[serving.bands]\ndraws = 2\nalpha = { low = 0.0, high = 0.0 }\nflops_efficiency = { low = 1, high = 1 }\n"
    grid, wh, _ = _simulate(tmp_path_factory.mktemp("zero"), bands)
    return load_serving_grid(grid), {t: wh.query(f"select * exclude (run_id) from {t}").to_pylist()
                                     for t in ("serving", "capacity", "serving_draws")}


def test_zero_width_bands_equal_the_point_exactly(zero_width):
    _, tables = zero_width
    points = {(r["device"], r["lever"], r["workload"]): r for r in tables["capacity"]}
    draws = tables["serving_draws"]
    assert len(draws) == 2 * len(points) == 4 and sorted({r["draw"] for r in draws}) == [0, 1]
    for r in draws:
        p = points[r["device"], r["lever"], r["workload"]]
        for c in CAPACITY:
            same = p[c] == r[c] or (isinstance(p[c], float) and math.isnan(p[c]) and math.isnan(r[c]))
            assert same, (c, p[c], r[c])
    assert points["H100", "mtp", "tiny-ok"]["capacity_per_s"] > points["H100", "baseline", "tiny-ok"]["capacity_per_s"]


def test_price_bands_rescale_the_cost_without_simulating(zero_width):
    grid, tables = zero_width
    bands = parse_serving_bands({"draws": 3, "price": {"low": 0.5, "high": 1.5}}, "g.toml")
    rows = run_draws(dataclasses.replace(grid, bands=bands), tables["serving"], tables["capacity"])
    factors = [d.price_factor for d in draws_of(bands)]
    assert len(rows) == 6 and len(set(factors)) == 3 and all(0.5 <= f <= 1.5 for f in factors)
    points = {r["lever"]: r for r in tables["capacity"]}
    for r in rows:
        p = points[r["lever"]]
        assert r["cost_per_mtok_usd"] == p["cost_per_mtok_usd"] * factors[r["draw"]]
        assert r["goodput_per_gpu_per_s"] == p["goodput_per_gpu_per_s"] and r["price_factor"] == factors[r["draw"]]


@pytest.fixture(scope="module")
def banded(tmp_path_factory):
    """A real banded run through `sweepkit simulate` into a real warehouse: 4 draws of alpha, HBM bandwidth
    and price."""
    bands = ("[serving.bands]\ndraws = 4\nseed = 3\nalpha = { low = -0.15, high = 0.15 }\n"
             "bandwidth_efficiency = { low = 0.8, high = 1.2 }\nprice = { low = 0.8, high = 1.2 }\n")
    _, wh, stdout = _simulate(tmp_path_factory.mktemp("banded"), bands)
    return wh, stdout


def test_matrix_shares_match_the_stored_draws(banded):
    wh, _ = banded
    draws = wh.query("select * from serving_draws").to_pylist()
    assert len(draws) == 8 and {r["draw"] for r in draws} == {0, 1, 2, 3}
    by = {(r["lever"], r["draw"]): r for r in draws}
    cells = run_query(wh, "matrix").to_pylist()
    assert len(cells) == 6
    for cell in cells:
        m = {"goodput": ("goodput_per_gpu_per_s", True), "cost_per_mtok": ("cost_per_mtok_usd", False),
             "energy_per_token": ("energy_per_token_j", False), "ttft_p99": ("ttft_p99_s_at_ref", False),
             "tpot_p99": ("tpot_p99_s_at_ref", False), "itl_p99": ("itl_p99_s_at_ref", False)}[cell["metric"]]
        change = np.array([(by["mtp", d][m[0]] - by["baseline", d][m[0]]) / by["baseline", d][m[0]] * 100
                           for d in range(4)])
        better = np.where(np.abs(change) <= 2, False, (change > 0) == m[1])
        same = np.abs(change) <= 2
        assert cell["draws"] == 4
        assert cell["share_better"] == pytest.approx(better.mean())
        assert cell["share_same"] == pytest.approx(same.mean())
        assert cell["share_better"] + cell["share_worse"] + cell["share_same"] == pytest.approx(1.0)
        assert cell["change_p50"] == pytest.approx(np.quantile(change, 0.5))
        assert cell["change_p10"] <= cell["change_p50"] <= cell["change_p90"]
        share = {"better": cell["share_better"], "worse": cell["share_worse"], "same": cell["share_same"]}
        assert cell["verdict_text"] == f"{cell['verdict']} ({round(100 * share[cell['verdict']])}%)"
    goodput = next(c for c in cells if c["metric"] == "goodput")
    assert goodput["verdict"] == "better" and goodput["change_p10"] < goodput["change_p90"]   # the draws spread


def test_simulate_prints_the_share_and_a_plain_matrix_is_unchanged(banded, tmp_path):
    _, stdout = banded
    header = stdout.splitlines()[0]
    assert "share_better" in header and "verdict_text" not in header
    assert any(v in stdout for v in ("better (", "worse (", "same ("))
    plain = Warehouse(tmp_path / "plain")         # a serving run without bands: no band columns printed
    rows = [{c: 0.0 for c in CAPACITY} | dict(device="H100", lever=lv, workload="w", draft="none", gamma=0,
                                              saturated=False, load_unit="requests/s", goodput_per_gpu_per_s=g)
            for lv, g in (("baseline", 1.0), ("fast", 1.5))]
    import pyarrow as pa
    plain.write_run(kind="serving", grid_name="p", grid_toml="", grid_sha256="1" * 64,
                    tables={"capacity": iter(pa.Table.from_pylist(rows).to_batches())})
    res = CliRunner().invoke(main, ["matrix", "--warehouse", str(plain.root), "--format", "json"])
    assert res.exit_code == 0, res.output
    cells = json.loads(res.stdout)
    assert list(cells[0]) == ["device", "lever", "workload", "metric", "unit", "baseline_value", "lever_value",
                              "change_pct", "verdict", "caveats", "missing"]    # missing: its latencies are 0
    assert {c["missing"] for c in cells if c["metric"] == "ttft_p99"} == {"no baseline value"}
    assert next(c for c in cells if c["metric"] == "goodput")["verdict"] == "better"


@pytest.mark.parametrize("bands, needle", [
    ("draws = 1\nalpha = { low = 0, high = 0 }", "serving.bands.draws = 1 is not allowed; expected an integer"),
    ("colour = { low = 0, high = 1 }", "serving.bands.colour = "),
    ("price = { low = -1, high = 1 }", "serving.bands.price.low = -1.0 is not allowed; expected low <= high and"),
    ("draws = 8", "serving.bands has no parameter"),
    ("alpha = 0.1", "serving.bands.alpha = 0.1 is not allowed"),
])
def test_bad_serving_bands_are_one_line_exit_2(tmp_path, bands, needle):
    res = CliRunner().invoke(main, ["simulate", str(_grid(tmp_path, "[serving.bands]\n" + bands)),
                                    "--warehouse", str(tmp_path / "wh")])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and needle in lines[0], res.output
    assert "g.toml" in lines[0]


def test_bands_refuse_the_scale_out_executor_in_one_line(tmp_path):
    grid = _grid(tmp_path, "[serving.bands]\ndraws = 2\nalpha = { low = 0, high = 0 }\n")
    res = CliRunner().invoke(main, ["simulate", str(grid), "--warehouse", str(tmp_path / "wh"), "--executor", "local"])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "[serving.bands] runs in one process" in lines[0], res.output


def test_report_matrix_shows_the_share_of_draws(banded):
    import re

    from sweepkit.report import charts

    wh, _ = banded
    rows = run_query(wh, "report_matrix").to_pylist()
    assert len(rows) == 6
    for r in rows:
        share = {"better": r["share_better"], "worse": r["share_worse"], "same": r["share_same"]}[r["verdict"]]
        assert r["share_agreeing"] == share and r["label"].endswith(f"({round(100 * share)}%)"), r["label"]
        assert re.fullmatch(r"[+-]\d+% \S+ \(\d+%\)", r["label"]), r["label"]
    spec = charts.lever_matrix(rows).to_dict()
    assert "share of draws agreeing" in json.dumps(spec["title"])
    assert "share_better" in json.dumps(spec)
