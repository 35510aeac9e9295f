"""The serving engine under an efficiency profile: None prices as before, a profile prices every target pass
by the measured model, and the grid key and `simulate --profile` choose it (one-line errors, exit 2)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from click.testing import CliRunner

from sweepkit.cli import main
from sweepkit.costmodel.efficiency import efficiency_arrays
from sweepkit.costmodel.passes import Work, chunk_work
from sweepkit.costmodel.steps import step_cost
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config, policy
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.levers import load_levers
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.profile import resolve_profile
from sweepkit.serving.workloads import load_workloads

LV = load_levers()
CL = load_cluster()
CFG = Config("H100", LV["baseline"])


def _fixed(prompt=500, output=40, n=6):
    base = load_workloads()["long-context-rag"]
    return dataclasses.replace(base, name="fixed", prompt_mean_tokens=prompt, prompt_cv=0.0, output_mean_tokens=output,
                               output_cv=0.0, system_prompts=0, system_prompt_tokens=0, turns=1, min_sessions=n,
                               ttft_slo_s=10.0, tpot_slo_s=1.0)


def _run(cluster, w, rate=0.001):
    return run_configs(w, cluster, [CFG], np.asarray([[rate]]), early_stop=False)


def test_no_profile_runs_equal_leaf_for_leaf_with_an_explicit_none():
    w = _fixed()
    implicit = _run(CL, w)
    explicit = _run(dataclasses.replace(CL, profile=resolve_profile("reference")[0]), w)
    with jax.enable_x64(True):
        assert policy(CL, CFG).inst.efficiency is None
    a, b = jax.tree_util.tree_leaves(implicit.groups), jax.tree_util.tree_leaves(explicit.groups)
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def test_a_profiled_run_at_low_load_prices_prefill_and_decode_by_the_profile():
    w = _fixed()
    prof = dataclasses.replace(CL, profile=resolve_profile("tensorrt-llm")[0])
    m = lane_metrics(_run(prof, w), 0, 0, w, CL.gpus, 100.0, 3.0)
    ref = lane_metrics(_run(CL, w), 0, 0, w, CL.gpus, 100.0, 3.0)
    with jax.enable_x64(True):   # the engine prices steps in float64: so does the expectation
        inst = policy(prof, CFG).inst
        assert inst.efficiency is not None
        none = Work(jnp.zeros(()), jnp.zeros(()), jnp.zeros(()))
        # One jitted program each (not the cost model op by op).
        t_pf, _ = jax.jit(lambda i: step_cost(i, jnp.zeros(()), jnp.zeros(()),
                                              chunk_work(jnp.zeros(()), jnp.asarray(500.0)), 0))(inst)
        ctx = 500.0 + jnp.arange(39, dtype=jnp.float64)     # one decode step per context, vmapped
        t_dec = float(np.mean(jax.jit(jax.vmap(lambda c: step_cost(inst, c, jnp.asarray(1.0), none, 0)[0]))(ctx)))
    assert m["ttft_p50_s"] == pytest.approx(float(t_pf), rel=1e-9)
    assert m["tpot_p50_s"] == pytest.approx(t_dec, rel=1e-3)
    assert m["tpot_p50_s"] != pytest.approx(ref["tpot_p50_s"], rel=1e-3)    # the profile changed the price


def test_bad_profile_names_and_files_are_one_line_errors(tmp_path):
    r = CliRunner().invoke(main, ["simulate", "tests/grids/serving-tiny.toml", "--warehouse", str(tmp_path / "wh"),
                                  "--profile", "no-such-profile"])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "no-such-profile" in lines[0] and "tensorrt-llm" in lines[0]
    bad = tmp_path / "bad.toml"
    bad.write_text("[default]\ngemm_eff_max = 7\n")
    r = CliRunner().invoke(main, ["simulate", "tests/grids/serving-tiny.toml", "--warehouse", str(tmp_path / "wh"),
                                  "--profile", str(bad)])
    assert r.exit_code == 2 and "bad.toml" in r.output and "Traceback" not in r.output


def test_a_grid_names_its_profile_in_its_serving_table(tmp_path):
    from sweepkit.serving.grid import load_serving_grid

    text = open("tests/grids/serving-tiny.toml").read()
    grids = tmp_path
    for f in ("tiny-workloads.toml", "tiny-cluster.toml"):
        (grids / f).write_text(open(f"tests/grids/{f}").read())
    (grids / "g.toml").write_text(text.replace("[serving]\n", '[serving]\nprofile = "tensorrt-llm"\n'))
    g = load_serving_grid(grids / "g.toml")
    assert g.profile == "tensorrt-llm" and g.cluster.profile.framework == "TensorRT-LLM"
    (grids / "h.toml").write_text(text.replace("[serving]\n", '[serving]\nprofile = "nope"\n'))
    r = CliRunner().invoke(main, ["simulate", str(grids / "h.toml"), "--warehouse", str(tmp_path / "wh")])
    assert r.exit_code == 2 and "h.toml [serving]" in r.output and "'nope'" in r.output


def test_simulate_with_a_profile_end_to_end(tmp_path):
    wh = str(tmp_path / "wh")
    args = ["simulate", "tests/grids/serving-tiny.toml", "--warehouse", wh, "--format", "json"]
    r = CliRunner().invoke(main, args + ["--profile", "tensorrt-llm"])
    assert r.exit_code == 0, r.output
    from sweepkit.store import Warehouse

    runs = Warehouse(wh).connect().execute("select grid_toml from runs").fetchall()
    assert len(runs) == 1 and "--profile tensorrt-llm" in runs[0][0]


def test_serve_rejects_a_bad_profile_before_it_starts():
    r = CliRunner().invoke(main, ["serve", "--profile", "nope", "--port", "0"])
    assert r.exit_code == 2 and "'nope'" in r.output and len(r.output.strip().splitlines()) == 1


def test_loaded_rows_of_a_framework_with_a_shipped_profile_are_priced_by_it():
    # One closed-loop user: TTFT is one lone prefill pass, under TensorRT-LLM's profile by default and under the
    # reference constants with profile = "reference" (tests/validation/test_serving_runs.py: the same row).
    from sweepkit.catalogue import get_device, get_model
    from sweepkit.costmodel.steps import instance, target_pass
    from sweepkit.validation import parse_measurements
    from sweepkit.validation.serving_runs import evaluate_serving_points

    head = "source,device,model,metric,value,unit,weight_format,kv_format,compute_format,input_tokens," \
           "output_tokens,requests,concurrency,percentile,framework\n"
    pts = parse_measurements(head + "t,H100,meta-llama/Llama-3.1-8B,ttft,1,ms,fp8,fp8,fp8,32,8,8,1,mean,"
                                    "TensorRT-LLM v0.14\n", "t.csv")
    (profiled,), (ref,) = evaluate_serving_points(pts), evaluate_serving_points(pts, profile="reference")
    with jax.enable_x64(True):
        f, dev = jnp.float64, get_device("H100")
        inst = instance(dev, get_model("llama-3.1-8b"), None, 1, "fp8", "fp8", "fp8", 0, f)
        eff = resolve_profile("tensorrt-llm")[0].fields("H100", "fp8")
        inst = dataclasses.replace(inst, efficiency=efficiency_arrays(eff, f))
        t_pf = float(target_pass(inst, chunk_work(f(0.0), f(32.0)))[0])
    assert profiled == pytest.approx(t_pf, rel=1e-4) and profiled != pytest.approx(ref, rel=1e-3)
