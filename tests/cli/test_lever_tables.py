"""The lever matrix for people: per lever a workloads x metrics table, cells as the chapter prints them."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
from click.testing import CliRunner
from rich.console import Console

from sweepkit.cli import main
from sweepkit.cli.lever_tables import LEGEND, cell_text, lever_cells, reference_device, render

ROOT = Path(__file__).resolve().parents[2]


def _long(rows):
    base = dict(unit="", baseline_value=1.0, lever_value=1.0, caveats="", missing=None, draws=None,
                share_better=None, share_worse=None, share_same=None)
    return pa.Table.from_pylist([base | r for r in rows])


ROWS = [dict(device="H100", lever="mtp", workload="chat", metric="goodput", change_pct=27.4, verdict="better",
             caveats="α"),
        dict(device="H100", lever="mtp", workload="chat", metric="itl_p99", change_pct=39.0, verdict="worse",
             caveats="α"),
        dict(device="H100", lever="mtp", workload="chat", metric="ttft_p99", change_pct=1.2, verdict="same",
             caveats="α"),
        dict(device="H100", lever="disagg-2p1d", workload="long-context-rag", metric="cost_per_mtok",
             change_pct=None, verdict=None, caveats="$", missing="no capacity"),
        dict(device="B200", lever="mtp", workload="chat", metric="goodput", change_pct=50.0, verdict="better")]


def test_cells_as_the_chapter_prints_them():
    cells = lever_cells(_long(ROWS), "H100")
    assert list(cells) == ["mtp", "disagg-2p1d"]
    assert cells["mtp"]["chat"] == {"goodput": ("✓ +27% α", "better"), "itl_p99": ("✗ +39% α", "worse"),
                                    "ttft_p99": ("= +1% α", "same")}
    assert cells["disagg-2p1d"]["long-context-rag"]["cost_per_mtok"] == ("n/a: no capacity", None)
    assert cell_text(None, "", None) == "n/a: no value"


def test_one_table_per_lever_coloured_by_verdict_and_one_legend():
    buf = io.StringIO()
    shown = render(_long(ROWS), "H100", console=Console(file=buf, width=160, force_terminal=True,
                                                        color_system="truecolor"))
    text = buf.getvalue()
    assert shown == 2 and text.count("change from the baseline on H100") == 2
    assert "\x1b[32m✓ +27% α" in text and "\x1b[31m✗ +39% α" in text       # green better, red worse
    assert "+50%" not in text                                                # another device's cell
    assert LEGEND.split(".")[0] in text and text.count("✓ better, ✗ worse") == 1
    buf = io.StringIO()
    assert render(_long(ROWS), "H100", lever="mtp", console=Console(file=buf, width=160)) == 1
    assert "disagg-2p1d" not in buf.getvalue() and "\x1b[" not in buf.getvalue()   # no colour off a terminal


def test_the_reference_device_is_the_default():
    assert reference_device('[serving]\nreference_device = "B200"\n', ["B200", "H100"]) == "B200"
    assert reference_device("", ["A100", "H100"]) == "H100"
    assert reference_device("", ["B200"]) == "B200" and reference_device(None, []) is None


def test_a_lever_or_device_not_in_the_grid_is_refused_before_simulating(tmp_path):
    for args, line in ((["--lever", "magic"], "Error: --lever = 'magic' is not allowed; expected a lever of the "
                                              "grid other than its baseline: mtp"),
                       (["--device", "B200"], "Error: --device = 'B200' is not allowed; expected a device of the "
                                              "grid: H100")):
        res = CliRunner().invoke(main, ["simulate", str(ROOT / "grids/serving-small.toml"), "--warehouse",
                                        str(tmp_path / "wh"), *args])
        assert res.exit_code == 2 and res.stderr.strip().splitlines() == [line]
        assert not (tmp_path / "wh" / "parquet").exists()
