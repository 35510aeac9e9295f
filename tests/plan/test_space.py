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


@pytest.mark.parametrize("fixed, words", [
    ({"nope": 1}, "unknown axis"), ({"kv": "virtual"}, "kv"), ({"tp": "four"}, "tp"),
    ({"spec": "mtp"}, "DRAFT:GAMMA"), ({"weight_format": "fp7"}, "fp7")])
def test_a_bad_fixed_choice_is_one_line(fixed, words):
    with pytest.raises(InputError) as e:
        make_space("llama-3.1-8b", ["H100"], 1, fixed)
    assert words in str(e.value) and "\n" not in str(e.value)
