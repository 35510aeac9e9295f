"""Test-wide settings (JAX strict about rank promotion, Hypothesis sized for 2-core CI), the ``x64`` fixture
and the one shared warehouse of real runs that the report and query tests read.

Tests run in JAX's default float32 mode; float64 is on only inside an entry point that scopes it (the
serving engine, ``sweepkit.evaluate``) or a test that asks for it with ``x64``. pyproject.toml turns JAX's
dtype warnings into errors, so a float64 request outside such a scope fails the test."""

import os
from pathlib import Path

import jax
import pytest
from hypothesis import HealthCheck, settings

jax.config.update("jax_numpy_rank_promotion", "raise")

settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


@pytest.fixture
def x64():
    """float64 for this test only (``pytestmark = pytest.mark.usefixtures("x64")`` for a whole module)."""
    with jax.enable_x64(True):
        yield


ROOT = Path(__file__).resolve().parents[1]
SERVING_GRID = os.environ.get("SWEEPKIT_TEST_SERVING_GRID", "grids/serving-small.toml")
"""The serving grid the shared warehouse simulates (a smaller one may be named)."""


@pytest.fixture(scope="session")
def full_warehouse(tmp_path_factory):
    """A warehouse after `sweepkit run grids/seed.toml`, `sweepkit trace`, `sweepkit validate` and
    `sweepkit simulate <serving grid>`: one of each run kind, simulated once for the whole session.

    Tests that add runs copy it first (a moved warehouse is read through temporary views)."""
    from click.testing import CliRunner

    from sweepkit.cli import main

    root = tmp_path_factory.mktemp("full") / "wh"
    runner = CliRunner()
    for args in (["run", "grids/seed.toml"], ["trace"], ["validate"], ["simulate", SERVING_GRID]):
        res = runner.invoke(main, [*args, "--warehouse", str(root), "--format", "json"])
        assert res.exit_code == 0, (args, res.output)
    return root
