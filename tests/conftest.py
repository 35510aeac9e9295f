"""Test-wide settings (JAX strict about rank promotion, Hypothesis sized for 2-core CI), the ``x64`` fixture
and the one shared warehouse of real runs that the report and query tests read.

Tests run in JAX's default float32 mode; float64 is on only inside an entry point that scopes it (the
serving engine, ``sweepkit.evaluate``) or a test that asks for it with ``x64``. pyproject.toml turns JAX's
dtype warnings into errors, so a float64 request outside such a scope fails the test.

Compiled programs are kept in sweepkit's compilation cache (``$SWEEPKIT_JAX_CACHE``, as the CLI keeps them), so
a program that several tests, test processes or pytest-xdist workers build is compiled once. ``make test``
runs two xdist workers; each test file runs whole on one worker (its module fixtures built once), and the
files that read the shared warehouse run together on one worker, so it is simulated once."""

import functools
import os
from pathlib import Path

import jax
import pytest
from hypothesis import HealthCheck, settings

from sweepkit.jaxcache import enable_persistent_cache

jax.config.update("jax_numpy_rank_promotion", "raise")
enable_persistent_cache()

settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's work units (``make test`` runs two workers): each test file runs whole on one worker, so
    its module fixtures are built once, and the files that read :func:`full_warehouse` run together on one
    worker, so it is simulated once. A worker that finishes its units takes the next: the :data:`LONGEST` first,
    then the others, most tests first, so that no long unit is left for the end while the other worker idles."""
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "full_warehouse" if _reads_full_warehouse(config.rootpath / path) else path

        def _assign_work_unit(self, node) -> None:
            for unit in reversed(LONGEST):
                if unit in self.workqueue:
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return ByFile(config, log)


LONGEST = ("tests/test_serving_updates.py", "full_warehouse", "tests/validation/test_validation.py",
           "tests/cli/test_bad_input_corpus.py", "tests/test_serving_cli.py", "tests/test_engine_scaling.py")
"""The work units that take longest (``--durations``), handed out first."""


@functools.cache
def _reads_full_warehouse(path: Path) -> bool:
    return path.name != "conftest.py" and path.is_file() and "full_warehouse" in path.read_text(encoding="utf-8")


MAPS_LIMIT = 25_000
"""Memory mappings past which compiled programs are dropped after a test. XLA:CPU maps each compiled kernel's
JIT code on its own (a serving-engine program: ~1,600 mappings); a process may hold 65,530 (Linux's default
``vm.max_map_count``), and past it the next compile or cache load aborts the process. One pytest process runs
every test, so the programs that earlier tests compiled are released here once they hold this many."""


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    """After each test, drop every compiled program (JAX's caches, the serving and sweep engines' own) when the
    process holds more than :data:`MAPS_LIMIT` memory mappings; later tests load them again from the caches
    on disk."""
    yield
    maps = Path("/proc/self/maps")
    if not maps.exists() or maps.read_text().count("\n") <= MAPS_LIMIT:
        return
    import gc

    from sweepkit.serving import programs
    from sweepkit.sweep import engine

    with programs._LOCK:
        programs._COMPILED.clear()
    engine._COMPILED.clear()
    jax.clear_caches()
    gc.collect()


@pytest.fixture
def x64():
    """float64 for this test only (``pytestmark = pytest.mark.usefixtures("x64")`` for a whole module)."""
    with jax.enable_x64(True):
        yield


ROOT = Path(__file__).resolve().parents[1]
SERVING_GRID = os.environ.get("SWEEPKIT_TEST_SERVING_GRID", "grids/serving-small.toml")
"""The serving grid the shared warehouse simulates (a smaller one may be named)."""


PLAN = ["plan", "--model", "llama-3.2-1b", "--workload", "realtime-voice", "--device", "H100", "--gpus", "1",
        *[x for f in ("tp=1", "kv=paged", "weight_format=bf16", "kv_format=bf16", "spec=none", "batching=chunked",
                      "batch_cap=64", "token_budget=2048") for x in ("--fix", f)], "--max-simulated", "1"]
"""The plan run of the shared warehouse: the `sweepkit plan --help` example's one configuration."""


@pytest.fixture(scope="session")
def full_warehouse(tmp_path_factory):
    """A warehouse after `sweepkit run grids/seed.toml`, `sweepkit trace`, `sweepkit validate --no-serving`,
    `sweepkit simulate <serving grid>` and a one-configuration `sweepkit plan`: one of each run kind,
    simulated once for the whole session.

    Tests that add runs copy it first (a moved warehouse is read through temporary views)."""
    from click.testing import CliRunner

    from sweepkit.cli import main

    root = tmp_path_factory.mktemp("full") / "wh"
    runner = CliRunner()
    for args in (["run", "grids/seed.toml"], ["trace"], ["validate", "--no-serving"], ["simulate", SERVING_GRID], PLAN):
        res = runner.invoke(main, [*args, "--warehouse", str(root), "--format", "json"])
        assert res.exit_code == 0, (args, res.output)
    return root

