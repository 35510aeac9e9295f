"""The package's shape: layers import downwards only, no symlink, every data file declared package data.

Layers, lowest first: the shared basics (errors, inputs, checks, catalogue, speculative maths, acceptance,
the compile cache) -> costmodel -> {sweep, serving, trace, validation, evaluate} -> store -> report -> cli.
A module may import its own layer or lower ones, never a higher one (imports inside functions count too).
"""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "sweepkit"

LAYERS = {
    "errors": 0, "inputs": 0, "checks": 0, "catalogue": 0, "speculative": 0, "acceptance": 0, "jaxcache": 0,
    "xla_options": 0,
    "costmodel": 1,
    "sweep": 2, "serving": 2, "trace": 2, "validation": 2, "evaluate": 2,
    "store": 3, "queries": 3, "plan": 3, "report": 4, "scale": 4, "serve": 4, "cli": 5,
}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "sweepkit" or len(parts) < 2:
        return None
    return LAYERS.get(parts[1], 0)          # sweepkit.__version__ and the like: the package itself


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names if node.module == "sweepkit"]
    return out


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    here = _layer("sweepkit." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))
    upward = [m for m in _imports(path) if (_layer(m) or 0) > here]
    assert not upward, f"{path.relative_to(PACKAGE)} (layer {here}) imports higher layers: {upward}"


def test_every_top_level_module_has_a_layer():
    names = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())}
    assert names <= set(LAYERS), f"modules without a layer: {sorted(names - set(LAYERS))}"


def test_no_symlinks_in_the_package():
    links = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*") if p.is_symlink()]
    assert not links, f"symlinks under sweepkit/: {links}"


SETUPTOOLS = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_folders() -> dict[str, Path]:
    """Each package of the project and its folder: those under sweepkit/, and those pyproject maps elsewhere
    (the report SQL in the top-level queries/ folder ships as sweepkit.queries)."""
    folders = {".".join(("sweepkit",) + p.parent.relative_to(PACKAGE).parts): p.parent for p in PACKAGE.rglob("__init__.py")}
    for name, where in SETUPTOOLS.get("package-dir", {}).items():
        folders[name] = PACKAGE.parent / where
    return folders


def test_every_package_is_listed():
    """pyproject lists the packages by hand (a mapped folder rules out discovery): a package folder missing from
    the list would be left out of the wheel, a listed one without a folder would fail the build."""
    assert sorted(SETUPTOOLS["packages"]) == sorted(_package_folders())


def test_the_queries_folder_ships_as_sweepkit_queries():
    import sweepkit.queries

    assert Path(sweepkit.queries.__file__).resolve().parent == (PACKAGE.parent / "queries").resolve()
    assert not (PACKAGE / "queries").exists(), "sweepkit/queries/ would shadow the mapped top-level queries/ folder"


def test_every_data_file_is_declared_package_data():
    """A file in a package's folder that is not Python must match a ``[tool.setuptools.package-data]`` pattern of
    its own package, or a wheel would silently leave it out."""
    declared = SETUPTOOLS["package-data"]
    owner = {folder: package for package, folder in _package_folders().items()}
    missing = []
    for folder in owner:
        for path in folder.rglob("*"):
            if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            package = owner.get(path.parent)       # a file in a folder that is no package is never shipped
            if package is None or not any(fnmatch.fnmatch(path.name, pat) for pat in declared.get(package, [])):
                missing.append(str(path.relative_to(PACKAGE.parent)))
    assert not missing, f"not declared as package data in pyproject.toml: {missing}"
