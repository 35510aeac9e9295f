"""Every report in queries/ on a small real warehouse (grids/seed.toml and grids/leviathan.toml via the engine)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sweepkit import evaluate
from sweepkit.errors import InputError
from sweepkit.store import Warehouse, list_queries, load_query, run_query
from sweepkit.sweep.engine import iter_decode_chunks
from sweepkit.sweep.grid import load_grid, parse_grid

ROOT = Path(__file__).resolve().parents[2]
MINE = ("speedup_table", "break_even", "optimal_gamma", "bounds", "leviathan_table1")
# The chapter's six rows (seed chapter 10 / results.md sec. 25): device, batch at context 512 ->
# ms/token plain, ms/token speculative, verify bound, speed-up.
SEED_ROWS = {
    ("H100", 1): (6.126, 3.076, "memory", 1.99), ("H100", 32): (0.216, 0.107, "memory", 2.02),
    ("H100", 128): (0.073, 0.053, "power", 1.37), ("H100", 512): (0.037, 0.048, "compute", 0.77),
    ("A100", 1): (9.743, 4.927, "memory", 1.98), ("A100", 128): (0.117, 0.153, "compute", 0.76),
}
# Leviathan et al. 2023 (arXiv 2211.17192 v2) Table 1, c = c_hat = 0: (alpha, gamma) -> (operations, speed).
TABLE1 = {(0.6, 2): (1.53, 1.96), (0.7, 3): (1.58, 2.53), (0.8, 2): (1.23, 2.44), (0.8, 5): (1.63, 3.69),
          (0.9, 2): (1.11, 2.71), (0.9, 10): (1.60, 6.86)}


BANDS_GRID = """name = "bands"
[axes]
device = ["H100"]
draft = ["mtp"]
batch = [1, 64, 128, 256, 384, 512]
gamma = [1, 3, 5]
alpha = [0.7]
acceptance = ["eagle-llama2-chat-70b"]
[bands]
draws = 64
alpha = { low = -0.1, high = 0.1 }
bandwidth_efficiency = { dist = "normal", sd = 0.05 }
"""


@pytest.fixture(scope="module")
def wh(tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    spec = parse_grid(BANDS_GRID, "bands.toml")
    ids = {"bands": wh.write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text,
                                 grid_sha256=spec.sha256, tables={"decode": iter_decode_chunks(spec, 1 << 14)})}
    for name in ("acceptance", "leviathan", "seed"):        # seed last: it is "latest"
        spec = load_grid(ROOT / f"grids/{name}.toml")
        ids[name] = wh.write_run(kind="decode", grid_name=spec.name, grid_toml=spec.toml_text,
                                 grid_sha256=spec.sha256, tables={"decode": iter_decode_chunks(spec, 64)})
    wh.ids = ids
    return wh


def test_headers_are_complete():
    names = {q.name for q in list_queries()}
    assert set(MINE) <= names
    for name in MINE:
        q = load_query(name)
        assert q.purpose and q.grain.startswith("one row per") and q.columns, name
        used = set(re.findall(r"\$(\w+)", "\n".join(l for l in q.sql.splitlines() if not l.lstrip().startswith("--"))))
        assert used == {p.name for p in q.params}, name     # every declared parameter used, none undeclared
        assert q.sql.rstrip().splitlines()[-2].startswith("select * from final") or \
            q.sql.rstrip().splitlines()[-1].startswith("select * from final"), name


@pytest.mark.parametrize("name", MINE)
def test_query_returns_its_documented_columns(wh, name):
    params = {"run_id": wh.ids["leviathan"]} if name in ("optimal_gamma", "leviathan_table1") else {}
    table = run_query(wh, name, params)
    assert table.column_names == [c for c, _ in load_query(name).columns]
    assert table.num_rows > 0


def test_speedup_table_has_the_seed_rows(wh):
    rows = run_query(wh, "speedup_table", {"context": 512}).to_pylist()
    assert len(rows) == 20 and {r["gamma"] for r in rows} == {3} and {r["alpha"] for r in rows} == {0.7}
    got = {(r["device"], r["batch"]): (r["ms_per_token_plain"], r["ms_per_token_spec"], r["verify_bound"],
                                       r["speedup"]) for r in rows}
    for key, want in SEED_ROWS.items():
        assert got[key] == want, key
        ref = evaluate(device=key[0], model="llama-3-8b", draft="mtp", batch=key[1], context=512)
        assert got[key][0] == pytest.approx(ref["s_per_token_plain"] * 1e3, abs=6e-4)
        assert got[key][1] == pytest.approx(ref["s_per_token_spec"] * 1e3, abs=6e-4)
    assert len(run_query(wh, "speedup_table").to_pylist()) == 60            # latest = the seed run


def test_break_even_matches_the_points(wh):
    decode = wh.query("select device, context, batch, speedup from decode where run_id = $r",
                      {"r": wh.ids["seed"]}).to_pylist()
    for row in run_query(wh, "break_even").to_pylist():
        losing = [p["batch"] for p in decode if p["device"] == row["device"] and p["context"] == row["context"]
                  and p["speedup"] < 1]
        assert row["break_even_batch"] == (min(losing) if losing else None)
        assert row["batches_swept"] == 10
    h100 = [r for r in run_query(wh, "break_even").to_pylist() if r["device"] == "H100" and r["context"] == 512]
    assert h100[0]["break_even_batch"] in (256, 512) and h100[0]["speedup_at_break_even"] <= 1


def test_optimal_gamma_is_the_argmax(wh):
    rows = run_query(wh, "optimal_gamma", {"run_id": wh.ids["leviathan"]}).to_pylist()
    decode = wh.query("select alpha, gamma, speedup from decode where run_id = $r",
                      {"r": wh.ids["leviathan"]}).to_pylist()
    assert len(rows) == 4 and all(r["gammas_swept"] == 4 for r in rows)
    for r in rows:
        cell = [p for p in decode if p["alpha"] == r["alpha"]]
        assert r["best_gamma"] == max(cell, key=lambda p: (p["speedup"], -p["gamma"]))["gamma"]


def test_bounds_shares_sum_to_100(wh):
    rows = run_query(wh, "bounds").to_pylist()
    for device in ("H100", "A100"):
        mine = [r for r in rows if r["device"] == device]
        assert sum(r["n_points"] for r in mine) == 30
        assert sum(r["share_pct"] for r in mine) == pytest.approx(100, abs=0.2)
    assert {r["bound"] for r in rows} == {"memory", "power", "compute"}
    plain = run_query(wh, "bounds", {"pass": "plain"}).to_pylist()
    assert sum(r["n_points"] for r in plain) == 60


def test_leviathan_table1_closed_forms(wh):
    rows = run_query(wh, "leviathan_table1").to_pylist()                    # latest run of grid "leviathan"
    assert {(r["alpha"], r["gamma"]) for r in rows} == set(TABLE1)
    for r in rows:
        ops, speed = TABLE1[(r["alpha"], r["gamma"])]
        assert round(r["speed_c0"], 2) == speed == r["paper_speed"]
        assert round(r["operations_c0"], 2) == ops == r["paper_operations"]
        assert 0 < r["c_measured"] < 0.2
        assert r["speedup_measured"] < r["speed_c0"]                        # the hardware charges the draft
        assert r["speed_thm38"] == pytest.approx(r["speed_c0"] / (r["gamma"] * r["c_measured"] + 1), rel=1e-3)
    assert len(run_query(wh, "leviathan_table1", {"paper_rows_only": "false"}).to_pylist()) == 16


def test_bad_names_and_params(wh):
    with pytest.raises(InputError, match="query = 'nope' is not allowed"):
        run_query(wh, "nope")
    with pytest.raises(InputError, match="param = 'colour' is not allowed; expected one of run_id"):
        run_query(wh, "speedup_table", {"colour": "red"})
    assert run_query(wh, "speedup_table", {"run_id": "no-such-run"}).num_rows == 0


def test_typed_parameters_are_not_parsed_again(wh):
    """parse_text=False keeps text as text: a value that looks like a number is compared as a string."""
    assert run_query(wh, "speedup_table", {"device": "5090"}, parse_text=False).num_rows == 0
    assert run_query(wh, "speedup_table", {"device": "H100"}, parse_text=False).num_rows > 0
    assert run_query(wh, "speedup_table", {"context": "512"}).num_rows > 0          # parsed: 512, an integer


def test_optimal_gamma_and_break_even_for_every_acceptance_model(wh):
    # grids/acceptance.toml: 2 alphas x 3 decays + 3 named tables, gamma 1..7, batch 1..512.
    run = {"run_id": wh.ids["acceptance"]}
    decode = wh.query("select acceptance, alpha, decay, gamma, batch, speedup, tokens_per_pass from decode "
                      "where run_id = $r", {"r": wh.ids["acceptance"]}).to_pylist()
    key = lambda p: (p["acceptance"], p["alpha"], p["decay"])                  # noqa: E731
    best = run_query(wh, "optimal_gamma", run).to_pylist()
    assert {key(r) for r in best} == {key(p) for p in decode} and len({key(r) for r in best}) == 9
    for r in best:
        cell = [p for p in decode if key(p) == key(r) and p["batch"] == r["batch"]]
        assert r["best_gamma"] == max(cell, key=lambda p: (p["speedup"], -p["gamma"]))["gamma"]
    for r in run_query(wh, "break_even", {"run_id": wh.ids["acceptance"]} | {"fits_only": "false"}).to_pylist():
        losing = [p["batch"] for p in decode if key(p) == key(r) and p["gamma"] == r["gamma"] and p["speedup"] < 1]
        assert r["break_even_batch"] == (min(losing) if losing else None) and r["batches_swept"] == 7
    # Decay 1 is the i.i.d. model; a decaying model accepts less, and so gives fewer tokens per pass.
    e = {(key(p), p["gamma"]): p["tokens_per_pass"] for p in decode if p["batch"] == 1}
    assert e[(("iid", 0.8, 1.0), 3)] == pytest.approx((1 - 0.8 ** 4) / 0.2, rel=1e-6)
    assert e[(("decaying", 0.8, 0.9), 3)] == pytest.approx(1 + 0.8 + 0.8 * 0.72 + 0.8 * 0.72 * 0.648, rel=1e-6)
    assert e[(("eagle-llama2-chat-70b", 0.75, None), 5)] == pytest.approx(2.957, abs=1e-3)


def test_bands_through_the_warehouse(wh):
    run = {"run_id": wh.ids["bands"]}
    for r in run_query(wh, "optimal_gamma", run).to_pylist():
        assert r["best_speedup_p10"] <= r["best_speedup"] <= r["best_speedup_p90"] and 0 <= r["share_spec_faster"] <= 1
    rows = run_query(wh, "break_even", {**run, "fits_only": "false"}).to_pylist()
    assert any(r["break_even_batch"] is not None for r in rows)
    for r in rows:
        be, lo, hi = r["break_even_batch"], r["break_even_batch_p10"], r["break_even_batch_p90"]
        assert lo is not None or be is None
        assert be is None or (lo <= be and (hi is None or be <= hi))
    plain = run_query(wh, "optimal_gamma", {"run_id": wh.ids["leviathan"]}).to_pylist()
    assert all(r["best_speedup_p10"] is None and r["share_spec_faster"] is None for r in plain)
