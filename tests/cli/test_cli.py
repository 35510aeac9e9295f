"""The sweepkit CLI: help examples, one-line errors with exit status 2, JSON output, run reuse and --force."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweepkit.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
       "JAX_PLATFORMS": "cpu"}
TINY = 'name = "tiny"\n[axes]\ndevice = ["H100", "A100"]\nbatch = [1, 8, 64]\n'


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def wh(tmp_path_factory):
    """A warehouse holding one run of a tiny grid, made through the CLI."""
    root = tmp_path_factory.mktemp("cli")
    grid = root / "tiny.toml"
    grid.write_text(TINY)
    res = cli("run", str(grid), "--warehouse", str(root / "wh"), "--format", "json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert len(rows) == 6 and {r["device"] for r in rows} == {"H100", "A100"}
    return root


@pytest.mark.parametrize("name", sorted(COMMANDS) + [None])
def test_every_help_has_an_example(name):
    res = cli(*([name] if name else []), "--help")
    assert res.exit_code == 0
    assert any(line.strip().startswith("Example") for line in res.output.splitlines()), res.output


BAD_GRIDS = {
    "syntax": 'name = "x"\n[axes\n',
    "unknown_key": 'name = "x"\nfoo = 1\n',
    "unknown_device": 'name = "x"\n[axes]\ndevice = ["H900"]\n',
    "empty_axis": 'name = "x"\n[axes]\nbatch = []\n',
    "alpha": 'name = "x"\n[axes]\nalpha = [1.5]\n',
    "gamma": 'name = "x"\n[axes]\ngamma = [-1]\n',
}


@pytest.mark.parametrize("case", sorted(BAD_GRIDS))
def test_bad_grid_exit_2_one_line(tmp_path, case):
    grid = tmp_path / f"{case}.toml"
    grid.write_text(BAD_GRIDS[case])
    res = cli("run", str(grid), "--warehouse", str(tmp_path / "wh"))
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {grid}: "), res.stderr
    assert not (tmp_path / "wh").exists()


def test_bad_grid_real_subprocess(tmp_path):
    grid = tmp_path / "bad.toml"
    grid.write_text(BAD_GRIDS["alpha"])
    p = subprocess.run([sys.executable, "-m", "sweepkit.cli", "run", str(grid)], env=ENV, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == (f"Error: {grid}: axes.alpha = 1.5 is not allowed; expected a number in [0, 1]")


def test_a_warehouse_the_file_system_refuses_is_one_line_not_an_abort(tmp_path):
    # write_run fails before it takes the first batch, while the first chunk is computing on its thread:
    # the process must wait for that thread (exiting inside XLA aborts: rc 134) and print one line.
    wh = tmp_path / "wh"
    wh.mkdir()
    (wh / "staging").write_text("a file where the staging folder goes")
    p = subprocess.run([sys.executable, "-m", "sweepkit.cli", "run", str(ROOT / "grids/seed.toml"), "--warehouse",
                        str(wh)], env={**ENV, "SWEEPKIT_JAX_CACHE": "off"}, cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1 and p.stdout == "", p.stderr
    assert p.stderr.strip() == f"Error: {wh / 'staging'}: File exists"


def test_rerun_reuses_unless_force(wh):
    args = ("run", str(wh / "tiny.toml"), "--warehouse", str(wh / "wh"), "--format", "json")
    res = cli(*args)
    assert res.exit_code == 0 and "reusing run" in res.stderr and len(json.loads(res.stdout)) == 6
    runs = json.loads(cli("runs", "--warehouse", str(wh / "wh"), "--format", "json").stdout)
    assert len(runs) == 1 and runs[0]["row_count"] == 6
    res = cli(*args, "--force")
    assert res.exit_code == 0 and "reusing" not in res.stderr
    runs = json.loads(cli("runs", "--warehouse", str(wh / "wh"), "--format", "json").stdout)
    assert len(runs) == 2 and all(r["row_count"] == 6 for r in runs)


@pytest.mark.parametrize("args", [
    ("query", "speedup_table", "--param", "device=H100"),
    ("query", "bounds"),
    ("query",),
    ("sql", "select device, count(*) as n from decode group by device order by device"),
    ("runs",),
    ("devices",),
    ("models",),
])
def test_json_output_is_one_array_and_nothing_else(wh, args):
    extra = ["--warehouse", str(wh / "wh")] if args[0] not in ("devices", "models") else []
    res = cli(*args, *extra, "--format", "json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)                          # the whole of stdout is one JSON document
    assert isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows)


def test_other_formats(wh):
    csv = cli("query", "speedup_table", "--warehouse", str(wh / "wh"), "--format", "csv").stdout.splitlines()
    assert csv[0].startswith("device,model,draft") and len(csv) >= 7
    md = cli("sql", "select 1 as a, 'x' as b", "--warehouse", str(wh / "wh"), "--format", "markdown").stdout
    assert md.splitlines() == ["| a | b |", "|---|---|", "| 1 | x |"]
    table = cli("runs", "--warehouse", str(wh / "wh")).stdout
    assert "tiny" in table


@pytest.mark.parametrize("args, message", [
    (("query", "nope"), "query = 'nope' is not allowed"),
    (("query", "speedup_table", "--param", "colour=red"), "param = 'colour' is not allowed"),
    (("query", "speedup_table", "--param", "device"), "--param = 'device' is not allowed; expected key=value"),
    (("sql", "selec 1"), "sql: Parser Error"),
    (("sql", "select * from no_such_table"), "sql: Catalog Error"),
    (("run", "no/such/grid.toml"), "no/such/grid.toml: no such grid file"),
    (("run", str(ROOT / "grids/seed.toml"), "--chunk-points", "0"), "--chunk-points = 0 is not allowed"),
])
def test_bad_input_exit_2_one_line(wh, args, message):
    res = cli(*args, "--warehouse", str(wh / "wh"))
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr


WIDE = ('name = "wide"\n[axes]\ndevice = ["H100", "A100-40GB", "A100"]\nmodel = ["llama-3.2-3b", "llama-3-8b"]\n'
        'draft = ["none", "mtp", "llama-3.2-1b"]\ntp = [2, 1]\nweight_format = ["int8", "bf16", "fp8"]\n'
        'kv_format = ["fp8", "bf16"]\nbatch = [1, 16]\ncontext = [4096, 512]\ngamma = [1, 3]\nalpha = [0.6, 0.8]\n')


def test_headline_filters_keep_the_first_rows_of_the_full_table(tmp_path):
    """`run` narrows its headline query to the smallest model, draft, device, tp and formats while at least
    --limit + 1 rows share them; the rows it prints must be the full speedup_table's first rows, at and
    around every group boundary (a key stays filtered while limit + 1 <= the rows sharing it)."""
    grid = tmp_path / "wide.toml"
    grid.write_text(WIDE)
    wh = str(tmp_path / "wh")
    res = cli("run", str(grid), "--warehouse", wh, "--format", "json", "--limit", "0")
    assert res.exit_code == 0, res.output
    everything = json.loads(res.stdout)
    assert len(everything) == 3 * 2 * 3 * 2 * 3 * 2 * 2 * 2 * 2 * 2
    edges = [16, 96, 192, 576, 1728, 3456]          # rows sharing the first 5, 4, ... 0 keys' smallest values
    for limit in sorted({1, 50, 3461} | {e + d for e in edges for d in (-2, -1, 0)}):
        res = cli("run", str(grid), "--warehouse", wh, "--format", "json", "--limit", str(limit))
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout) == everything[:limit], limit


def test_headline_filters_follow_the_text_order_of_formats():
    from sweepkit.cli.run import headline_filters

    axes = {"model": ["m"], "draft": ["none"], "device": ["B", "A"], "tp": [2, 1],
            "weight_format": ["fp8", "fp8-x"], "kv_format": ["bf16"], "compute_format": ["bf16"],
            "context": [1], "batch": [1, 2], "gamma": [1], "alpha": [0.5, 0.7]}
    # 'fp8-x/bf16/bf16' sorts before 'fp8/bf16/bf16' ('-' < '/') although 'fp8' < 'fp8-x'
    assert headline_filters(axes, 4) == {"model": "m", "draft": "none", "device": "A", "tp": 1,
                                         "weight_format": "fp8-x", "kv_format": "bf16", "compute_format": "bf16"}
    assert headline_filters(axes, 5) == {"model": "m", "draft": "none", "device": "A", "tp": 1}
    assert headline_filters(axes, 9) == {"model": "m", "draft": "none", "device": "A"}
    assert headline_filters(axes, 17) == {"model": "m", "draft": "none"}
    assert headline_filters(axes, 0) == {}


def test_a_database_file_whose_first_commit_was_killed_reads_as_empty_and_the_next_run_heals_it(tmp_path):
    """SIGKILL inside the first commit leaves the file DuckDB created, with no tables; readers must see an
    empty warehouse (not a traceback) and the next run must create the schema and commit."""
    import duckdb

    wh = tmp_path / "wh"
    wh.mkdir()
    duckdb.connect(str(wh / "sweepkit.duckdb")).close()
    res = cli("runs", "--warehouse", str(wh), "--format", "json")
    assert res.exit_code == 0 and json.loads(res.stdout) == []
    res = cli("query", "speedup_table", "--warehouse", str(wh), "--format", "json")
    assert res.exit_code == 0 and json.loads(res.stdout) == []
    grid = tmp_path / "tiny.toml"
    grid.write_text(TINY)
    res = cli("run", str(grid), "--warehouse", str(wh), "--format", "json")
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)) == 6
    assert len(json.loads(cli("runs", "--warehouse", str(wh), "--format", "json").stdout)) == 1


@pytest.mark.parametrize("kind", ["garbage", "empty", "folder"])
def test_a_database_file_that_is_not_duckdb_is_one_line(tmp_path, kind):
    wh = tmp_path / "wh"
    wh.mkdir()
    target = wh / "sweepkit.duckdb"
    if kind == "folder":
        target.mkdir()
    else:
        target.write_bytes(b"" if kind == "empty" else os.urandom(5000))
    for args in (["runs"], ["sql", "select 1"], ["query", "speedup_table"]):
        res = subprocess.run([sys.executable, "-m", "sweepkit.cli", *args, "--warehouse", str(wh)],
                             capture_output=True, text=True, env=ENV, cwd=ROOT)
        assert res.returncode in (1, 2), (args, res.stderr)
        assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "sweepkit.duckdb" in res.stderr


def test_repeated_column_names_are_kept_apart(wh):
    for fmt, expect in (("json", '[{"x": "a", "x_2": 2}]'), ("csv", "x,x_2\na,2")):
        res = cli("sql", "select 'a' as x, 2 as x", "--warehouse", str(wh / "wh"), "--format", fmt)
        assert res.exit_code == 0 and res.stdout.strip() == expect
    res = cli("sql", "select 'a' as x, 2 as x", "--warehouse", str(wh / "wh"))
    assert res.exit_code == 0 and "x_2" in res.stdout


@pytest.mark.parametrize("args, message", [
    (["query", "speedup_table", "--param", "context=abc"], "parameters given: context='abc'"),
    (["run", "{grid}", "--limit", "99999999999999999999"], "--limit = 99999999999999999999 is not allowed"),
    (["query", "{sql}"], "is not UTF-8"),
])
def test_more_bad_input_is_one_line(wh, tmp_path, args, message):
    grid = tmp_path / "tiny.toml"
    grid.write_text(TINY)
    sql = tmp_path / "bad.sql"
    sql.write_bytes(b"-- bad: not utf-8\nselect '\xff'\n")
    args = [a.format(grid=grid, sql=sql) for a in args]
    res = cli(*args, "--warehouse", str(wh / "wh"))
    assert res.exit_code == 2 and message in res.output, res.output


def test_a_text_parameter_stays_text(wh):
    res = cli("query", "speedup_table", "--param", "run_id=123", "--warehouse", str(wh / "wh"), "--format", "json")
    assert res.exit_code == 0 and json.loads(res.stdout) == []          # no such run, not a conversion error


def test_ctrl_c_inside_a_command_is_one_line_and_status_130(monkeypatch):
    from sweepkit.cli import catalog

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(catalog, "emit", interrupted)
    res = CliRunner().invoke(main, ["devices"])
    assert res.exit_code == 130 and "interrupted" in res.output and "Traceback" not in res.output


def test_big_results_print_every_row_batch_by_batch_and_the_table_format_is_capped(wh):
    res = cli("sql", "select range as i from range(70000)", "--warehouse", str(wh / "wh"), "--format", "json")
    assert [r["i"] for r in json.loads(res.stdout)] == list(range(70000))     # more than one Arrow batch
    res = cli("sql", "select range as i from range(70000)", "--warehouse", str(wh / "wh"), "--format", "csv")
    assert res.stdout.splitlines()[-1] == "69999" and len(res.stdout.splitlines()) == 70001
    res = cli("sql", "select range as i from range(10005)", "--warehouse", str(wh / "wh"))
    assert "showing the first 10,000 of 10,005 rows" in res.output and "10004" not in res.stdout


def test_a_key_given_twice_is_refused(wh):
    res = cli("query", "speedup_table", "--param", "context=512", "--param", "context=4096",
              "--warehouse", str(wh / "wh"))
    assert res.exit_code == 2 and "each key once (context is already '512')" in res.output


def test_a_grid_file_with_a_byte_order_mark_reads_as_without(tmp_path):
    from sweepkit.sweep.grid import load_grid

    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + TINY.encode())
    from sweepkit.sweep.grid import parse_grid

    assert load_grid(path).axes == parse_grid(TINY).axes


@pytest.mark.parametrize("width", [40, 80, 120])
def test_a_narrow_terminal_never_cuts_a_number(wh, width):
    """Headers break and text wraps to fit; every number of the table appears whole in the printed text."""
    import io

    from rich.console import Console

    from sweepkit.cli.common import _cell, rich_table
    from sweepkit.store import Warehouse

    table = Warehouse(wh / "wh").query("select * from decode order by batch, device")
    t = rich_table(table, "decode", width)
    buf = io.StringIO()
    Console(file=buf, width=max(width, t.needed_width)).print(t)
    text = buf.getvalue()
    lines = [line for line in text.splitlines() if line.strip()]
    for row in table.to_pylist():
        for name, value in row.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert _cell(value) in text, (name, value)
    assert max(len(line) for line in lines) <= max(width, t.needed_width)


def test_matrix_says_why_it_has_no_rows_and_help_examples_name_no_made_up_run(wh):
    res = cli("matrix", "--run-id", "bogus", "--warehouse", str(wh / "wh"))
    assert res.exit_code == 2 and "--run-id = 'bogus' is not allowed" in res.stderr
    res = cli("matrix", "--device", "Z9", "--warehouse", str(wh / "wh"))
    assert res.exit_code == 2 and "--device = 'Z9' is not allowed" in res.stderr
    res = cli("matrix", "--warehouse", str(wh / "wh"))
    assert res.exit_code == 0 and "no serving run in this warehouse yet" in res.stderr
    assert "--drop 2026" not in cli("runs", "--help").output


def test_a_reader_that_stops_reading_is_no_error(wh):
    """`sweepkit sql ... | head -1`: the first line, then a quiet exit (no 'Broken pipe' message)."""
    p = subprocess.run(f"{sys.executable} -m sweepkit.cli sql 'select * from range(200000)' --format csv "
                       f"--warehouse {wh / 'wh'} | head -1", shell=True, env=ENV, capture_output=True, text=True,
                       timeout=120)
    assert p.stdout == "range\n" and p.stderr == "", p.stderr


def test_drop_asks_first_and_refuses_when_it_cannot_ask(wh):
    """`sweepkit drop` without --yes and no terminal to ask on: one line, exit 2, the run is kept."""
    run_id = json.loads(cli("runs", "--warehouse", str(wh / "wh"), "--format", "json").stdout)[0]["run_id"]
    res = cli("drop", run_id, "--warehouse", str(wh / "wh"))
    assert res.exit_code == 2 and "--yes not given and stdin is not a terminal" in res.stderr, res.output
    assert json.loads(cli("runs", "--warehouse", str(wh / "wh"), "--format", "json").stdout)[0]["run_id"] == run_id
