"""The HTML report: built from real runs in a real warehouse, self-contained, rendered by headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
import vl_convert as vlc
from click.testing import CliRunner

from sweepkit.cli import main
from sweepkit.report import charts
from support.browser import find_chromium, inspect_page
from sweepkit.report.build import SECTIONS, build_report
from sweepkit.store import Warehouse

ROOT = Path(__file__).resolve().parents[2]


def _invoke(*args: str) -> str:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="module")
def full(full_warehouse):
    """The shared warehouse (tests/conftest.py): seed decode run, trace, validation, serving simulation."""
    return Warehouse(full_warehouse), True


@pytest.fixture(scope="module")
def built(full, tmp_path_factory):
    wh, serving = full
    out = tmp_path_factory.mktemp("report-out")
    t0 = time.perf_counter()
    result = build_report(wh, out)
    result["wall_s"] = time.perf_counter() - t0
    return result, serving


def test_report_builds_in_under_a_minute_and_is_self_contained(built):
    result, serving = built
    assert result["wall_s"] < 60.0, result["wall_s"]
    html = Path(result["html"]).read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]+src=", html), "scripts must be inlined"
    assert not re.search(r"<link[^>]+href=", html), "no external stylesheets"
    specs = json.loads(re.search(r"id='sweepkit-specs'>(.*?)</script>", html, re.S).group(1).replace("<\\/", "</"))
    expected = {"speedup", "regime", "alpha_gamma", "trace", "plan"} | ({"matrix", "best", "explorer"} if serving else set())
    assert {k.removeprefix("chart-") for k in specs} >= expected
    for spec in specs.values():
        assert "url" not in json.dumps(spec.get("data", {})), "data must be inlined"
    for png in result["pngs"]:
        assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(result["pngs"]) == len(result["charts"])
    if not serving:
        assert set(result["empty"]) == {"matrix", "best", "explorer", "validation"}
        assert "sweepkit simulate grids/serving-seed.toml" in html


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed (CI installs it: .ci/run)")
def test_report_renders_in_headless_chromium(built, tmp_path):
    result, _ = built
    shot = tmp_path / "report.png"
    page = inspect_page(result["html"], shot)
    assert page.errors == [], page.errors
    assert page.rendered == str(len(result["charts"]))
    assert sorted(c["id"] for c in page.charts) == sorted(result["charts"])
    for chart in page.charts:   # the best-lever chart has one bar and one label per workload x device
        assert chart["area"] > 10_000 and chart["marks"] > (1 if chart["id"] == "chart-best" else 20), chart
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    if os.environ.get("SWEEPKIT_WRITE_SCREENSHOT"):
        shutil.copy(shot, ROOT / "docs" / "report.png")


def test_empty_warehouse_gives_panels_not_errors(tmp_path):
    result = build_report(Warehouse(tmp_path / "empty"), tmp_path / "out", png=False)
    assert result["charts"] == [] and set(result["empty"]) == {s.id for s in SECTIONS}
    html = Path(result["html"]).read_text(encoding="utf-8")
    assert "sweepkit run grids/seed.toml" in html and "sweepkit trace" in html


def _matrix_rows() -> list[dict]:
    rows = []
    for i, (lever, workload, metric) in enumerate((lv, w, m) for lv in ("mtp", "draft-llama-3.2-1b")
                                                  for w in ("chat", "voice") for m in charts.METRICS):
        change = (-1) ** i * (i * 7 % 60)
        verdict = "same" if abs(change) < 2 else ("better" if (change > 0) == (metric == "goodput") else "worse")
        rows.append(dict(device="H100", lever=lever, workload=workload, metric=metric, baseline_value=2.0,
                         lever_value=2.0 * (1 + change / 100), change_pct=float(change), verdict=verdict,
                         caveats="α", mark="✓", label=f"{change:+d}% α"))
    return rows


def test_serving_charts_compile_against_the_documented_matrix_columns():
    """The matrix and explorer charts render from rows shaped like v_matrix / report_explorer.sql."""
    rows = _matrix_rows()
    assert "<svg" in vlc.vegalite_to_svg(charts.lever_matrix(rows).to_dict())
    points = {}
    for r in rows:
        points.setdefault((r["device"], r["lever"], r["workload"]),
                          dict(device=r["device"], lever=r["lever"], workload=r["workload"]))[r["metric"]] = \
            r["lever_value"]
    svg = vlc.vegalite_to_svg(charts.explorer(list(points.values())).to_dict())
    assert "Explorer: goodput against tpot_p99" in svg


def test_cli_report(full, tmp_path):
    wh, _ = full
    out = _invoke("report", "--warehouse", str(wh.root), "--out", str(tmp_path / "r"), "--no-png",
                  "--format", "json")
    rows = json.loads(out)
    assert rows[0]["kind"] == "html" and Path(rows[0]["path"]).is_file()


def test_speedup_chart_shades_the_bands_when_the_rows_have_them():
    from sweepkit.report import charts
    row = dict(device="H100", model="llama-3-8b", draft="mtp", context=512, batch=1, gamma=3, alpha=0.75,
               acceptance="eagle-llama2-chat-70b", ms_per_token_plain=6.1, ms_per_token_spec=3.0, speedup=2.0,
               verify_bound="memory", fits_in_memory=True, speedup_p10=None, speedup_p90=None)
    plain = charts.speedup_vs_batch([row]).to_dict()
    banded = charts.speedup_vs_batch([{**row, "speedup_p10": 1.8, "speedup_p90": 2.2}]).to_dict()
    marks = lambda spec: [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]  # noqa: E731
                          for layer in spec["layer"] if "mark" in layer]
    assert "area" in marks(banded) and "area" not in marks(plain)
    assert "eagle-llama2-chat-70b" in plain["title"] and "band p10-p90" in banded["title"]


def test_lever_rows_follow_the_families_and_the_best_lever_chart_renders():
    assert charts.lever_order(["mtp", "zz-mine", "paged", "decode-priority", "disagg-1p1d", "fp8-all"]) == \
        ["decode-priority", "paged", "disagg-1p1d", "fp8-all", "mtp", "zz-mine"]
    rows = [dict(workload="chat", device="H100", lever="mtp", goodput_per_gpu_per_s=1.8, cost_per_mtok_usd=1.45,
                 energy_per_token_j=1.06, baseline_goodput_per_gpu_per_s=1.42, gain_x=1.8 / 1.42, levers_compared=2)]
    svg = vlc.vegalite_to_svg(charts.best_lever(rows).to_dict())
    assert "Best lever per workload and device" in svg and "mtp" in svg
