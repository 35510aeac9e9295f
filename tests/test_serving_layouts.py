"""Expert and attention-data parallel layouts in the serving engine: data files, one-line errors, KV capacity,
identical prices for the layouts every lever had before, and a simulated DEP8 run priced by the layout."""

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sweepkit.catalogue import get_device, get_model
from sweepkit.costmodel.arrays import device_arrays
from sweepkit.costmodel.memory import kv_capacity_tokens
from sweepkit.costmodel.passes import chunk_work, decode_work
from sweepkit.costmodel.steps import step_cost, target_pass
from sweepkit.errors import InputError
from sweepkit.serving.cluster import load_cluster, make_cluster
from sweepkit.serving.config import Config, check, kv_tokens, policy, resolve
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.levers import load_levers, parse_lever
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.grid import load_serving_grid
from sweepkit.serving.workloads import load_workloads

DATA = Path(__file__).resolve().parents[1] / "sweepkit" / "serving" / "data"
GRIDS = Path(__file__).resolve().parents[1] / "grids"
DS = load_cluster(DATA / "cluster-deepseek.toml")
MOE = load_levers(DATA / "levers-moe.toml")


def test_moe_grids_load_and_every_lever_is_valid_on_every_device():
    for name in ("moe-tradeoffs.toml", "moe-tradeoffs-qwen3.toml"):
        grid = load_serving_grid(GRIDS / name)         # checks every (device, lever) configuration
        assert {lv.name for lv in grid.levers} == set(MOE) and grid.n_points == 5 * (3 * len(MOE) - 3)
    res = resolve(DS, MOE["wide-ep-disagg"])
    assert (res.dp, res.ep, res.prefill_dp, res.prefill_ep, res.expert_imbalance) == (16, 16, 8, 8, 1.05)


def test_existing_levers_price_and_hold_kv_exactly_as_before():
    cl, levers = load_cluster(), load_levers()
    for name in ("baseline", "tp8", "tp2pp2", "w8a8-fp8"):
        cfg = Config("H100", levers[name])
        res = check(cl, cfg, "levers.toml")
        with jax.enable_x64(True):
            inst = policy(cl, cfg, res).inst
            assert float(inst.layout.dp) == float(inst.layout.ep) == float(inst.layout.kv_replicas) == 1.0
            bare = dataclasses.replace(inst, layout=None)
            f = jnp.float64
            for work in (decode_work(f(3000.0), f(6.0)), chunk_work(f(0), f(900))):
                assert tuple(map(float, target_pass(inst, work))) == tuple(map(float, target_pass(bare, work)))
            old = kv_capacity_tokens(device_arrays(get_device("H100"), jnp.float64), jnp.float64(res.tp * res.pp),
                                     inst.target, inst.draft, inst.weight_bytes, inst.kv_bytes)
        assert kv_tokens(cl, cfg, res) == float(old)


def test_dp_attention_multiplies_deepseek_kv_capacity():
    tp8 = kv_tokens(DS, Config("H200", MOE["baseline"]), resolve(DS, MOE["baseline"]))
    dep8 = kv_tokens(DS, Config("H200", MOE["dep8"]), resolve(DS, MOE["dep8"]))
    m = get_model("deepseek-v3")
    experts = m.n_experts * m.routed_expert_params
    free_tp8 = 8 * 141e9 * 0.9 - m.resident_params
    free_dep8 = free_tp8 - 7 * (m.resident_params - experts)
    per_token = m.kv_bytes_per_token(2.0)                  # 61 x 576 x 2 B = 70,272 B in BF16
    assert tp8 == free_tp8 // (8 * per_token) and dep8 == pytest.approx(free_dep8 // per_token, abs=1)
    assert dep8 / tp8 == pytest.approx(8 * free_dep8 / free_tp8, rel=1e-4)


@pytest.mark.parametrize("fields,msg", [
    (dict(tp=1, dp=8, ep=7), "ep = 7 is not allowed; expected a divisor of deepseek-v3's 256 routed experts"),
    (dict(tp=1, dp=8, ep=4), "ep = 4 is not allowed with dp = 8; expected ep = tp x dp = 8"),
    (dict(tp=1, dp=4, ep=4), r"instances x tp x dp x pp \(\+ prefill_instances x prefill_tp x prefill_dp\) = 12 GPUs, "
                             r"expected the cluster's 24"),
    (dict(prefill_dp=2), "prefill_instances, prefill_tp, prefill_ep, prefill_dp and handoff need mode = 'disagg'"),
])
def test_bad_moe_levers_get_one_line_errors(fields, msg):
    lever = parse_lever(fields, "levers.toml [levers.x]", "x")
    with pytest.raises(InputError, match=msg) as exc:
        check(DS, Config("H200", lever), "levers.toml [levers.x]")
    assert "\n" not in str(exc.value) and "lever 'x'" in str(exc.value)


def test_bad_clusters_and_interconnects_get_one_line_errors():
    base = dict(model="deepseek-v3", instances=1, tp=8, devices=["H200"], weight_format="fp8")
    cases = [
        (dict(scale_out="myrinet"), "scale_out = 'myrinet' is not allowed; expected one of ib-ndr, ib-xdr"),
        (dict(nodes=3), "nodes = 3 is not allowed; expected a divisor of gpus = 8"),
        (dict(tp=1, dp=16, instances=1, nodes=1), "nodes = 1 is not allowed; 16 GPUs per node exceed H200's"),
        (dict(model="llama-3-70b", weight_format="bf16", dp=2, tp=4, ep=8),
         "ep = 8 is not allowed; llama-3-70b is dense"),
        (dict(dp=0), "dp = 0 is not allowed"),
    ]
    for extra, msg in cases:
        with pytest.raises(InputError, match=msg) as exc:
            make_cluster("c.toml [cluster]", **{**base, **extra})
        assert "\n" not in str(exc.value)
    with pytest.raises(InputError, match="scale_out = 'myrinet' is not allowed; expected one of"):
        parse_lever({"scale_out": "myrinet"}, "levers.toml [levers.x]")
    with pytest.raises(InputError, match=r"expert_imbalance = 0.5 is not allowed; expected a number in \[1, 16\]"):
        parse_lever({"expert_imbalance": 0.5}, "levers.toml [levers.x]")


def test_simulated_dep8_run_prices_its_steps_with_the_layout():
    base = load_workloads()["long-context-rag"]
    w = dataclasses.replace(base, name="fixed", prompt_mean_tokens=1000, prompt_cv=0.0, output_mean_tokens=50,
                            output_cv=0.0, system_prompts=0, system_prompt_tokens=0, turns=1, min_sessions=12,
                            ttft_slo_s=10.0, tpot_slo_s=1.0)
    gather = dataclasses.replace(MOE["dep8"], name="dep8-gather", moe_exchange="gather")
    cfgs = [Config("H200", MOE["baseline"]), Config("H200", MOE["dep8"]), Config("H200", gather)]
    lanes = run_configs(w, DS, cfgs, np.full((3, 1), 0.001), early_stop=False)
    ms = [lane_metrics(lanes, c, 0, w, DS.gpus, 100.0, 3.5) for c in range(3)]
    with jax.enable_x64(True):
        for m, cfg in zip(ms, cfgs):
            inst = policy(DS, cfg).inst
            # the prompt runs on its request's attention rank (costmodel.rank_balance): a prefill step of one chunk
            zero = jnp.float64(0.0)
            t_pf = step_cost(inst, zero, zero, chunk_work(zero, jnp.float64(1000.0)), 0)[0]
            t_dec = np.mean([float(target_pass(inst, decode_work(jnp.float64(1000.0 + k), jnp.float64(1.0)))[0])
                             for k in range(0, 49, 8)])
            assert m["ttft_p50_s"] == pytest.approx(float(t_pf), rel=1e-9)
            assert m["tpot_p50_s"] == pytest.approx(t_dec, rel=2e-3)
    # one request at a time: DEP8 runs it on one attention rank's GPU and re-reads the shared weights
    assert ms[1]["tpot_p50_s"] != ms[0]["tpot_p50_s"]
    # TensorRT-LLM's all-gather exchange: one token a step has no DeepEP call time to pay (moe_comm.ep_gather)
    assert ms[2]["tpot_p50_s"] < ms[1]["tpot_p50_s"]
    # its prompt too: one rank's dense and attention work, not an eighth of it on each
    with jax.enable_x64(True):
        dep8 = policy(DS, cfgs[1]).inst
        spread = target_pass(dep8, chunk_work(jnp.float64(0.0), jnp.float64(1000.0)))[0]
    assert ms[1]["ttft_p50_s"] > 1.5 * float(spread)
