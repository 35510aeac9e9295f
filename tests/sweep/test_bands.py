"""Decode grids over acceptance models, and uncertainty bands ([bands]) evaluated in the same program."""

import numpy as np
import pyarrow as pa
import pytest

from sweepkit import evaluate
from sweepkit.errors import InputError
from sweepkit.sweep.bands import BAND_COLUMNS, design
from sweepkit.sweep.engine import grid_size, iter_decode_chunks
from sweepkit.sweep.grid import parse_grid

GRID = """name = "b"
[axes]
device = ["H100"]
draft = ["none", "mtp", "llama-3.2-1b"]
batch = [1, 64, 512]
gamma = [1, 3]
alpha = [0.6, 0.8]
decay = [1.0, 0.9]
acceptance = ["eagle-llama2-chat-70b"]
"""


def _rows(text, chunk=1 << 20):
    spec = parse_grid(text, "b.toml")
    table = pa.Table.from_batches(list(iter_decode_chunks(spec, chunk)))
    assert table.num_rows == spec.n_points == grid_size(spec.axes)
    return table


def test_acceptance_models_axis_matches_evaluate():
    rows = _rows(GRID).to_pylist()
    assert len(rows) == 3 * 3 * 2 * (2 * 2 + 1)
    assert [(r["acceptance"], r["alpha"], r["decay"]) for r in rows[:5]] == [
        ("iid", 0.6, 1.0), ("decaying", 0.6, 0.9), ("iid", 0.8, 1.0), ("decaying", 0.8, 0.9),
        ("eagle-llama2-chat-70b", 0.75, None)]
    for r in rows[::11]:
        kw = ({"acceptance": r["acceptance"]} if r["decay"] is None else {"alpha": r["alpha"], "decay": r["decay"]})
        ref = evaluate(device="H100", model="llama-3-8b", draft=r["draft"], batch=r["batch"], gamma=r["gamma"], **kw)
        for name in ("tokens_per_pass", "s_per_token_spec", "speedup"):
            assert r[name] == pytest.approx(ref[name], rel=1e-5), name
    assert all(r[c] is None for r in rows[:3] for c in BAND_COLUMNS)          # no [bands]: null


def test_tables_only_and_bad_axes():
    spec = parse_grid('name = "t"\n[axes]\nacceptance = ["deepseek-v3-mtp", "eagle-vicuna-7b"]', "t.toml")
    assert spec.n_points == 2 and spec.axes["alpha"] == ()
    with pytest.raises(InputError, match=r"t.toml: axes.acceptance = 'nope' is not allowed; expected one of"):
        parse_grid('name = "t"\n[axes]\nacceptance = ["nope"]', "t.toml")
    with pytest.raises(InputError, match=r"axes.decay = -0.5 is not allowed"):
        parse_grid('name = "t"\n[axes]\ndecay = [-0.5]', "t.toml")


def test_zero_width_bands_collapse_to_the_point():
    text = GRID + ("[bands]\ndraws = 8\nalpha = { low = 0.0, high = 0.0 }\n"
                   "flops_efficiency = { low = 1.0, high = 1.0 }\n")
    t = _rows(text)
    for m in ("tokens_per_pass", "s_per_token_spec", "speedup", "energy_per_token_spec_j"):
        for q in ("p10", "p50", "p90"):
            np.testing.assert_array_equal(t[f"{m}_{q}"].to_numpy(), t[m].to_numpy())
    share = t["share_spec_faster"].to_numpy()
    np.testing.assert_array_equal(share, (t["speedup"].to_numpy() > 1).astype(np.float32))


def test_bands_bracket_the_point_and_the_share_is_stable_between_seeds():
    shares = []
    for seed in (0, 1):
        text = GRID + (f"[bands]\ndraws = 256\nseed = {seed}\nalpha = {{ low = -0.1, high = 0.1 }}\n"
                       "bandwidth_efficiency = { low = 0.9, high = 1.1 }\n")
        t = _rows(text, 4096)
        sp = t["speedup"].to_numpy()
        lo, mid, hi = (t[f"speedup_{q}"].to_numpy() for q in ("p10", "p50", "p90"))
        assert np.all(lo <= mid) and np.all(mid <= hi)
        assert np.all(lo <= sp * (1 + 1e-6)) and np.all(sp <= hi * (1 + 1e-6))
        assert np.allclose(mid, sp, rtol=0.01)                     # symmetric draws: the median is near the point
        shares.append(t["share_spec_faster"].to_numpy())
    diff = np.abs(shares[0] - shares[1])                              # 90 cells; most differ by 0
    assert np.quantile(diff, 0.9) <= 0.02 and diff.max() <= 0.06    # +-2 points at N = 256 (one kinked cell: 5)
    assert 0.0 < shares[0].max() and shares[0].min() == 0.0          # draft none never wins


def test_design_is_low_discrepancy_and_seeded():
    a, b = design(256, 2, 0), design(256, 2, 1)
    assert a.shape == (256, 2) and not np.allclose(a, b) and np.array_equal(a, design(256, 2, 0))
    counts = np.histogram2d(a[:, 0], a[:, 1], bins=4, range=[[0, 1], [0, 1]])[0]
    assert counts.min() >= 12 and counts.max() <= 20                  # 16 per cell; i.i.d. would spread ~+-8


@pytest.mark.parametrize("bands, message", [
    ("draws = 1\nalpha = { low = 0, high = 0 }", "bands.draws = 1 is not allowed; expected an integer in [2, 4096]"),
    ("colour = { low = 0, high = 1 }", "bands.colour = "),
    ("alpha = { low = 0.1, high = -0.1 }", "bands.alpha.low = 0.1 is not allowed; expected low <= high"),
    ("tdp_w = { dist = 'beta', sd = 1 }", "bands.tdp_w.dist = 'beta' is not allowed"),
    ("tdp_w = { dist = 'normal', low = 1 }", "bands.tdp_w.low = 1 is not allowed"),
    ("draws = 16", "bands has no parameter"),
])
def test_bad_bands_give_one_line(bands, message):
    with pytest.raises(InputError) as err:
        parse_grid(GRID + "[bands]\n" + bands, "b.toml")
    assert message in str(err.value) and str(err.value).startswith("b.toml: ") and "\n" not in str(err.value)


def test_shipped_decode_grids_parse():
    from pathlib import Path

    from sweepkit.sweep.grid import load_grid
    grids = Path(__file__).resolve().parents[2] / "grids"
    specs = {p.stem: load_grid(p) for p in grids.glob("*.toml") if "[serving]" not in p.read_text()}
    assert specs["bands"].bands.draws == 256 and specs["acceptance"].n_points == 7 * 7 * 9


def test_alpha_only_bands_move_only_the_acceptance_outputs():
    t = _rows(GRID + "[bands]\ndraws = 32\nalpha = { low = -0.1, high = 0.1 }\n")
    mtp = np.asarray(t["draft"].cast(pa.string()).to_pylist()) == "mtp"
    e, lo, hi = (t[c].to_numpy()[mtp] for c in ("tokens_per_pass", "tokens_per_pass_p10", "tokens_per_pass_p90"))
    assert np.all(lo < e) and np.all(e < hi)
    spec = t["s_per_token_spec"].to_numpy()[mtp] * t["tokens_per_pass"].to_numpy()[mtp]   # time per pass: fixed
    np.testing.assert_allclose(t["s_per_token_spec_p50"].to_numpy()[mtp] * t["tokens_per_pass_p50"].to_numpy()[mtp],
                               spec, rtol=1e-4)    # medians of E and 1/E: interpolated
