"""Load a benchmark or data script of the repository (not a package module) by its path."""

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(relpath: str) -> ModuleType:
    """The module at ``ROOT / relpath`` (e.g. ``benchmarks/data/aic_efficiency.py``), executed once per call."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
