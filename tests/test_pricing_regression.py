"""The decode grid, the serving engine and the trace price every pass through one API (costmodel/steps.py).

``tests/data/pricing-regression.json`` holds the decode grid's and the trace's columns as sweepkit computed
them at commit b7e579b, when the grid and the trace priced passes with their own calls to the per-pass cost
model: a dense grid (Llama-3-70B on H100, TP1 and TP8, no draft / MTP / a 1B draft, memory-, compute- and
power-bound passes), a mixture-of-experts grid (Mixtral-8x7B TP2 on B200, FP8 KV) and four traces (TP2 with
MTP, arrivals and a batch cap; H200 FP8 with a 1B draft), both modes each. The grid runs in float32, so its
values may move by float32 rounding (the order of additions inside a pass); bounds and memory fits must not.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest

from sweepkit.catalogue import get_device, get_draft, get_model
from sweepkit.costmodel.passes import Work, chunk_work, combine, decode_work
from sweepkit.costmodel.steps import draft_pass, draft_pass_cost, instance, step_cost, target_pass, target_pass_cost
from sweepkit.sweep.engine import iter_decode_chunks
from sweepkit.trace.scheduler import Scenario, run_mode

DATA = json.loads((Path(__file__).parent / "data" / "pricing-regression.json").read_text())
FLOAT32_RTOL = 1e-6
"""Observed: at most 2.5e-7 (two float32 ulps), in times and energies of TP8 passes and KV-heavy passes."""


@pytest.mark.parametrize("grid", DATA["grids"], ids=lambda g: g["axes"]["model"][0])
def test_decode_grid_rows_equal_the_saved_rows(grid):
    table = pa.Table.from_batches(list(iter_decode_chunks(types.SimpleNamespace(axes=grid["axes"]), 8)))
    for name, expected in grid["columns"].items():
        got = table.column(name).to_pylist()
        if isinstance(expected[0], float):
            np.testing.assert_allclose(got, expected, rtol=FLOAT32_RTOL, atol=0.0, err_msg=name)
        else:
            assert got == expected, name


def _scenario(kw: dict) -> Scenario:
    return Scenario(**{k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()}).checked()


@pytest.mark.parametrize("trace", DATA["traces"],
                         ids=lambda t: f"{t['scenario'].get('device', 'H100')}-tp{t['scenario'].get('tp', 1)}-"
                                       f"{'spec' if t['speculative'] else 'plain'}")
def test_trace_rows_equal_the_saved_rows(trace):
    cols = run_mode(_scenario(trace["scenario"]), trace["speculative"])
    for name, expected in trace["columns"].items():
        got = np.asarray(cols[name]).tolist()
        if isinstance(expected[0], float):
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0.0, err_msg=name)
        else:
            assert got == expected, name


def test_trace_steps_are_the_serving_engines_steps():
    """Each trace step lasts exactly what step_cost (the serving engine's pricing) gives the same rows."""
    kw = DATA["traces"][1]["scenario"]
    sc = _scenario(kw)
    cols = run_mode(sc, True)
    target = get_model(sc.model)
    with jax.enable_x64(True):
        inst = instance(get_device(sc.device), target, get_draft(sc.draft, target), sc.tp, sc.weight_format,
                        sc.kv_format, sc.compute_format, sc.gamma, jnp.float64)
        seen = set()
        for i in np.unique(cols["pass_index"]):
            row = np.flatnonzero(cols["pass_index"] == i)[0]
            if cols["pass_kind"][row] == "decode":
                t, _ = step_cost(inst, jnp.float64(cols["context_tokens"][row]), jnp.float64(cols["batch"][row]),
                                 Work(*(jnp.zeros((), jnp.float64),) * 3), sc.gamma)
            else:
                prompts = cols["prompt_tokens"][cols["pass_index"] == i].astype(np.float64)
                chunks = combine(*(chunk_work(jnp.float64(0.0), jnp.float64(p)) for p in prompts))
                t, _ = step_cost(inst, jnp.float64(0.0), jnp.float64(0.0), chunks, sc.gamma)
            assert cols["end_s"][row] - cols["start_s"][row] == pytest.approx(float(t), rel=1e-12)
            seen.add(str(cols["pass_kind"][row]))
    assert seen == {"prefill", "decode"}


def test_pass_cost_views_agree():
    """A PassCost is the (seconds, dynamic joules) pair plus the devices' idle power over the pass."""
    m = get_model("llama-3-70b")
    with jax.enable_x64(True):
        inst = instance(get_device("H100"), m, get_draft("llama-3.2-1b", m), 4, "fp8", "bf16", "fp8", 3,
                        jnp.float64)
        work = decode_work(jnp.float64(64 * 4096.0), jnp.float64(64.0))
        idle = float(inst.device.idle_w) * 4
        for pair, cost in ((target_pass(inst, work), target_pass_cost(inst, work)),
                           (draft_pass(inst, work), draft_pass_cost(inst, work))):
            assert float(cost.t_s) == float(pair[0]) > 0
            assert float(cost.energy_j) == pytest.approx(float(pair[1]) + idle * float(pair[0]), rel=1e-12)
        none = instance(get_device("H100"), m, None, 4, "fp8", "bf16", "fp8", 0, jnp.float64)
        empty = draft_pass_cost(none, work)
        assert float(empty.t_s) == float(empty.energy_j) == float(empty.flops) == 0.0
