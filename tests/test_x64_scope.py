"""float64 is scoped, never process-wide: after a decode run, a serving simulation (streamed and in parts) and a
direct call of the serving engine, JAX is back in float32 mode in this thread and in a fresh one.

The serving engine needs float64 clocks (10^4 s of simulated time against 20 ms gaps) and gets them from
``jax.enable_x64`` inside its entry points; the decode grid is float32 by design. Runs are real (the CLI on
real grids into a real warehouse)."""

import threading
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from click.testing import CliRunner

from sweepkit.cli import main
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.levers import load_levers
from sweepkit.serving.workloads import load_workloads

ROOT = Path(__file__).resolve().parents[1]
GRIDS = ROOT / "tests" / "grids"
TINY = str(GRIDS / "serving-tiny.toml")


def x64_on() -> bool:
    """The x64 flag in this thread or process-wide (a fresh thread sees only the global value)."""
    seen = []
    t = threading.Thread(target=lambda: seen.append(bool(jax.config.jax_enable_x64)))
    t.start()
    t.join()
    return bool(jax.config.jax_enable_x64) or seen[0]


@pytest.mark.parametrize("args", [
    ["run", str(ROOT / "grids" / "seed.toml")],
    ["simulate", TINY],
    ["simulate", TINY, "--executor", "local"],
], ids=["decode-run", "simulate", "simulate-parts"])
def test_x64_is_off_after_a_cli_run(args, tmp_path):
    assert not x64_on()                        # also: no test module imported before turned it on
    res = CliRunner().invoke(main, [*args, "--warehouse", str(tmp_path / "wh"), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert not x64_on()
    assert jnp.zeros(()).dtype == jnp.float32 and jnp.asarray(0.5).dtype == jnp.float32


def test_serving_engine_keeps_float64_clocks_for_a_float32_caller():
    w = load_workloads(GRIDS / "tiny-workloads.toml")["tiny"]          # 16 single-turn sessions
    assert not x64_on()
    lanes = run_configs(w, load_cluster(GRIDS / "tiny-cluster.toml"), [Config("H100", load_levers()["baseline"])],
                        np.ones((1, 1)), early_stop=False)
    st = lanes.state(0, 0)
    assert st.finish_s.dtype == np.float64 and np.isfinite(st.finish_s).sum() == w.min_sessions
    assert not x64_on()
