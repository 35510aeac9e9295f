"""`--format markdown` keeps one row per line and one cell per column whatever a value holds."""

from __future__ import annotations

import pyarrow as pa
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.cli import main
from sweepkit.cli.common import emit, markdown_cell
from sweepkit.store import Warehouse


def _cells(line: str) -> list[str]:
    """Split a Markdown table row on the pipes that are not escaped (GFM's rule), undoing the escapes."""
    assert line.startswith("| ") and line.endswith(" |")
    cells, cur, i, body = [], "", 0, line[2:-2]
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            cur += body[i + 1]
            i += 2
        elif body.startswith(" | ", i):
            cells.append(cur)
            cur, i = "", i + 3
        else:
            cur += body[i]
            i += 1
    return cells + [cur]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab|\\\n\r <>"), max_size=12), min_size=1, max_size=4))
def test_any_text_stays_in_its_row_and_its_cell(values):
    cells = [markdown_cell(v) for v in values]
    line = "| " + " | ".join(cells) + " |"
    assert "\n" not in line and "\r" not in line
    back = [c.replace("<br>", "\n") for c in _cells(line)]
    assert back == [v.replace("\r\n", "\n").replace("\r", "\n") for v in values]


def test_emit_and_the_cli_escape_newlines_and_pipes(tmp_path, capsys):
    emit(pa.table({"a|b": ["one\ntwo", "x|y"], "n": [1, 2]}), "markdown")
    out = capsys.readouterr().out.splitlines()
    assert out == ["| a\\|b | n |", "|---|---|", "| one<br>two | 1 |", "| x\\|y | 2 |"]
    wh = Warehouse(tmp_path / "wh")
    wh.write_run(kind="trace", grid_name="g", grid_toml="", grid_sha256="a",
                 tables={"t": [pa.record_batch({"x": pa.array([1], pa.int64())})]})
    res = CliRunner().invoke(main, ["sql", "select 'a' || chr(10) || 'b|c' as v, 2 as n", "--format", "markdown",
                                    "--warehouse", str(wh.root)])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[2] == "| a<br>b\\|c | 2 |"
