"""The plan's space: layouts use exactly the budget's GPUs, and every configuration is one the serving
engine accepts (its own checks, run on the levers the plan would simulate)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweepkit.errors import InputError
from sweepkit.plan.search import cluster_for, config_of
from sweepkit.plan.space import AXES, enumerate_space, layouts, make_space
from sweepkit.serving.config import check, resolve


@given(gpus=st.integers(1, 24))
def test_every_layout_uses_exactly_the_budget(gpus):
    space = make_space("llama-3.1-70b", ["H100"], gpus)
    for lay in layouts(space):
        used = lay["instances"] * lay["tp"] * lay["pp"] + lay["prefill_instances"] * lay["prefill_tp"]
        assert used == gpus and 64 % lay["tp"] == 0 and lay["instances"] >= 1
        assert (lay["dp"], lay["ep"]) == (1, 1)                 # a dense model


@given(gpus=st.integers(1, 24))
def test_expert_layouts_use_exactly_the_budget_in_the_engines_forms(gpus):
    """Qwen3-30B-A3B (128 experts): instances x tp x dp x pp (+ the prefill pool) = gpus; dp > 1 only with
    ep = tp x dp (DEP), dp = 1 only with ep = 1; never tensor parallelism past the 8-GPU scale-up domain."""
    space = make_space("qwen3-30b-a3b", ["H100"], gpus)
    lays = layouts(space)
    for lay in lays:
        used = lay["instances"] * lay["tp"] * lay["dp"] * lay["pp"] + lay["prefill_instances"] * lay["prefill_tp"]
        assert used == gpus and 128 % lay["ep"] == 0
        assert lay["ep"] == (lay["tp"] * lay["dp"] if lay["dp"] > 1 else 1)
    if gpus % 2 == 0:
        assert any(lay["dp"] == 2 and lay["mode"] == "colocated" for lay in lays)
    table = enumerate_space(space)
    assert (table["tp"] <= 8).all() and (table["prefill_tp"] <= 8).all()


def test_a_fixed_ep_spreads_experts_inside_the_tp_group():
    """--fix ep=4 at dp = 1: the experts over the TP group of tp 4 or 8 (a divisor of tp)."""
    s = make_space("mixtral-8x7b", ["H100"], 8, {"ep": (4,), "dp": (1,), "pp": (1,), "mode": ("colocated",)})
    assert sorted((l["tp"], l["ep"]) for l in layouts(s)) == [(4, 4), (8, 4)]


def test_layouts_of_eight_gpus_count_every_split():
    """8 GPUs, tp in {4, 8}, pp 1, prefill_tp 4: colocated 2 x tp4, 1 x tp8; disagg P1(tp4) + D1(tp4)."""
    s = make_space("llama-3.1-70b", ["H100"], 8, {"tp": (4, 8), "pp": (1,), "prefill_tp": (4,)})
    got = sorted((l["mode"], l["instances"], l["tp"], l["prefill_instances"]) for l in layouts(s))
    assert got == [("colocated", 1, 8, 0), ("colocated", 2, 4, 0), ("disagg", 1, 4, 1)]


def test_the_default_space_is_large_enough():
    table = enumerate_space(make_space("llama-3.1-70b", ["H100", "H200"], 16))
    assert len(table["tp"]) >= 10_000
    assert set(table) >= {"device", "gpus", "instances", "prefill_instances", *AXES}


SMALL = enumerate_space(make_space("llama-3.1-8b", ["H100", "A100"], 4))
MOE = enumerate_space(make_space("qwen3-30b-a3b", ["H100"], 4, {"batching": ("chunked",), "batch_cap": (256,),
                                                                  "token_budget": (8192,)}))


@given(seed=st.integers(0, 2**31 - 1))
def test_every_configuration_passes_the_engines_checks(seed):
    table = SMALL
    i = int(np.random.default_rng(seed).integers(len(table["tp"])))
    cfg = config_of(table, i)
    cluster = cluster_for("llama-3.1-8b", cfg.device, 4, int(table["batch_cap"][i]))
    res = check(cluster, cfg, "plan")
    assert res == resolve(cluster, cfg.lever)
    assert res.tp == table["tp"][i] and res.mode == table["mode"][i]
    assert res.prefix_caching == (table["kv"][i] == "paged+prefix")


@given(seed=st.integers(0, 2**31 - 1))
def test_every_expert_layout_passes_the_engines_checks(seed):
    """A mixture-of-experts configuration (EP / DP layouts, disaggregated or not) as the engine resolves it."""
    table = MOE
    i = int(np.random.default_rng(seed).integers(len(table["tp"])))
    cfg = config_of(table, i)
    res = check(cluster_for("qwen3-30b-a3b", cfg.device, 4, 256), cfg, "plan")
    assert (res.tp, res.dp, res.ep, res.pp) == tuple(int(table[k][i]) for k in ("tp", "dp", "ep", "pp"))
    assert (res.prefill_dp, res.prefill_ep) == (1, 1)


@pytest.mark.parametrize("fixed, words", [
    ({"nope": 1}, "unknown axis"), ({"kv": "virtual"}, "kv"), ({"tp": "four"}, "tp"),
    ({"spec": "mtp"}, "DRAFT:GAMMA"), ({"weight_format": "fp7"}, "fp7"), ({"dp": (2,)}, "dense"),
    ({"ep": (4, 8)}, "dense")])
def test_a_bad_fixed_choice_is_one_line(fixed, words):
    with pytest.raises(InputError) as e:
        make_space("llama-3.1-8b", ["H100"], 1, fixed)
    assert words in str(e.value) and "\n" not in str(e.value)
