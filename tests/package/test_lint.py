"""The linter's rules (pyproject.toml [tool.ruff]) hold over the whole repository: `ruff check .` finds nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ruff() -> list[str] | None:
    here = Path(sys.executable).with_name("ruff")
    if here.exists():
        return [str(here)]
    found = shutil.which("ruff")
    return [found] if found else None


@pytest.mark.skipif(_ruff() is None, reason="ruff is not installed (the test extra installs it)")
def test_ruff_finds_nothing():
    res = subprocess.run([*_ruff(), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
