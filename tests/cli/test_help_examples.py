"""Every command is documented in docs/cli.md (generated from --help), and every ``Example:`` line runs.

The examples run as written against a copy of the session's shared warehouse (tests/conftest.py), from the
checkout's root: ``/tmp/wh`` stands for that warehouse, other ``/tmp/...`` paths for a temporary folder,
``RUN_ID`` for the newest run's id, and commands without ``--warehouse`` read it through
``SWEEPKIT_WAREHOUSE``. ``drop`` runs last, since it removes a run.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweepkit.cli import COMMANDS, main
from sweepkit.cli.docs import cli_markdown, help_text
from sweepkit.store import Warehouse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = re.compile(r"^\s*Example:\s*(.+)$", re.MULTILINE)
ORDER = sorted(COMMANDS, key=lambda n: (n == "drop", n))


def examples(name: str | None) -> list[str]:
    """The ``Example:`` lines of one command's help (None: the group's)."""
    return EXAMPLE.findall(help_text(name))


def test_every_command_is_documented_and_the_reference_is_current():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"\n## sweepkit {name}\n" in text, f"docs/cli.md has no section for `sweepkit {name}`"
        assert examples(name), f"`sweepkit {name} --help` has no Example: line"
    assert text == cli_markdown(), "docs/cli.md is stale: python -m sweepkit.cli.docs > docs/cli.md"


@pytest.fixture(scope="module")
def scratch(full_warehouse, tmp_path_factory):
    base = tmp_path_factory.mktemp("examples")
    shutil.copytree(full_warehouse, base / "wh")
    return base


def _argv(command: str, base: Path, run_id: str) -> list[str]:
    words = shlex.split(command)
    assert words[0] == "sweepkit", command
    out = []
    for w in words[1:]:
        w = w.replace("RUN_ID", run_id)
        out.append(str(base / "wh") if w == "/tmp/wh" else re.sub(r"^/tmp/", str(base) + "/", w))
    return out


@pytest.mark.parametrize("name", [None, *ORDER], ids=lambda n: n or "sweepkit")
def test_help_example_runs_as_written(scratch, name, monkeypatch):
    monkeypatch.chdir(ROOT)
    run_id = Warehouse(scratch / "wh").query(
        "select run_id from runs order by ended_at desc limit 1").column(0)[0].as_py()
    runner = CliRunner()
    for line in examples(name):
        for command in line.split("&&"):
            argv = _argv(command.strip(), scratch, run_id)
            if argv[0] == "serve":      # a server runs until stopped: start it, ask it, stop it
                _serve_until_healthy(argv, scratch)
                continue
            res = runner.invoke(main, argv, env={"SWEEPKIT_WAREHOUSE": str(scratch / "wh")})
            assert res.exit_code == 0, f"{command.strip()} -> exit {res.exit_code}\n{res.output}"


def _serve_until_healthy(argv: list[str], scratch: Path) -> None:
    """Run ``sweepkit serve`` as written (on a free port if the written one is taken), wait for its URL, get
    /api/health, stop it with Ctrl-C."""
    import json
    import os
    import signal
    import socket
    import subprocess
    import sys
    import urllib.request

    if "--port" in argv:
        i = argv.index("--port") + 1
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", int(argv[i]))) == 0:
                argv = argv[:i] + ["0"] + argv[i + 1:]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWEEPKIT_WAREHOUSE": str(scratch / "wh")}
    proc = subprocess.Popen([sys.executable, "-m", "sweepkit.cli", *argv, "--no-warm"], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "http://" not in line:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "sweepkit serve exited before printing its URL"
        url = line[line.index("http://"):].split()[0].rsplit("/", 1)[0]
        with urllib.request.urlopen(url + "/api/health", timeout=30) as r:
            assert json.load(r)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        proc.kill()
