"""The wheel alone: build it, install it into a fresh venv outside the checkout, run it from an empty folder.

What a user gets from ``pip install sweepkit``: every SQL file, TOML catalogue and CSV the commands read
must be in the wheel (declared package data), with no symlink and no path back into a checkout. The fresh
venv sees this interpreter's site-packages after its own (a ``.pth`` line; their own ``.pth`` files, an
editable sweepkit's included, are not run), so pip resolves the wheel's dependencies against the ones
installed there instead of unpacking jax and pyarrow again, and installs the wheel's sweepkit in the venv.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GRID = """name = "wheel-check"
[axes]
device = ["H100"]
model = ["llama-3-8b"]
draft = ["mtp"]
context = [512]
batch = [1, 32]
gamma = [3]
alpha = [0.7]
"""


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout_s: float = 600) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, f"{' '.join(map(str, args))} -> exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_wheel_installs_and_runs_from_an_empty_folder(tmp_path_factory):
    base = tmp_path_factory.mktemp("wheel")
    assert ROOT not in base.parents
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SWEEPKIT_WAREHOUSE")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    dist = base / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)], base, env)
    wheels = list(dist.glob("sweepkit-*.whl"))
    assert len(wheels) == 1, wheels
    venv.EnvBuilder(with_pip=True).create(base / "venv")
    bin_ = base / "venv" / "bin"
    site = _run([str(bin_ / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], base, env)
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(site.strip()) / "dependencies.pth").write_text("".join(f"{p}\n" for p in ours), encoding="utf-8")
    _run([str(bin_ / "python"), "-m", "pip", "install", "-q", str(wheels[0])], base, env)

    empty = base / "empty"
    empty.mkdir()
    where = _run([str(bin_ / "python"), "-c", "import sweepkit; print(sweepkit.__file__)"], empty, env)
    assert str(base / "venv") in where and str(ROOT) not in where
    (empty / "tiny.toml").write_text(GRID, encoding="utf-8")
    sk = str(bin_ / "sweepkit")
    out = _run([sk, "run", "tiny.toml"], empty, env)
    assert "H100" in out and "speedup" in out, out
    out = _run([sk, "query", "break_even", "--format", "csv"], empty, env)
    assert out.splitlines()[0].startswith("device,model,draft"), out
    _run([sk, "report", "--out", "report"], empty, env)
    assert (empty / "report" / "report.html").stat().st_size > 100_000
