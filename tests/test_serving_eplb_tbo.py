"""Serving levers for EPLB redundant experts and two-batch overlap, and a grid's run horizon (parse-level, cheap)."""

from pathlib import Path

import jax
import pytest

from sweepkit.errors import InputError
from sweepkit.serving.cluster import load_cluster, make_cluster
from sweepkit.serving.config import Config, check, pool_layout, resolve
from sweepkit.serving.levers import parse_lever
from sweepkit.serving.grid import load_serving_grid

DATA = Path(__file__).resolve().parents[1] / "sweepkit" / "serving" / "data"
DS = load_cluster(DATA / "cluster-deepseek.toml")


def test_redundant_experts_and_overlap_reach_the_layout():
    # 24 H200 as 1 x DEP24 over three nodes: 256 + 32 replicas = 288 slots, 12 per GPU; TBO on.
    lever = parse_lever(dict(instances=1, tp=1, dp=24, ep=24, redundant_experts=32, two_batch_overlap=True),
                        "levers.toml [levers.x]", "x")
    res = check(DS, Config("H200", lever), "levers.toml [levers.x]")
    with jax.enable_x64(True):
        lay = pool_layout(DS, Config("H200", lever), res)
    assert (float(lay.ep), float(lay.expert_slots), float(lay.overlap)) == (24.0, 288.0, 1.0)
    plain = resolve(DS, parse_lever(dict(tp=1, dp=8, ep=8), "levers.toml [levers.y]", "y"))
    assert (plain.redundant_experts, plain.two_batch_overlap) == (0, False)
    with pytest.raises(InputError, match=r"ep = 24 is not allowed; .*or redundant_experts = 8 "):
        check(DS, Config("H200", parse_lever(dict(instances=1, tp=1, dp=24, ep=24), "l", "z")), "l")


@pytest.mark.parametrize("fields, msg", [
    (dict(two_batch_overlap="yes"), "two_batch_overlap = 'yes' is not allowed; expected true or false"),
    (dict(redundant_experts=-1), "redundant_experts = -1 is not allowed"),
])
def test_bad_eplb_and_overlap_levers_are_one_line(fields, msg):
    with pytest.raises(InputError, match=msg) as exc:
        parse_lever(fields, "levers.toml [levers.x]", "x")
    assert "\n" not in str(exc.value)


def test_cluster_redundant_experts_are_checked_against_ep():
    base = dict(model="deepseek-v3", instances=1, tp=1, dp=24, ep=24, devices=["H200"], weight_format="fp8")
    assert make_cluster("c.toml [cluster]", **base, redundant_experts=32).redundant_experts == 32
    with pytest.raises(InputError, match="ep = 24 is not allowed with 16 redundant experts; expected a divisor of "
                                         "the 272 expert slots") as exc:
        make_cluster("c.toml [cluster]", **base, redundant_experts=16)
    assert "\n" not in str(exc.value)


def test_a_grid_horizon_and_min_sessions_shorten_every_workloads_runs(tmp_path):
    text = ('name = "g"\n[serving]\nworkloads = ["chat", "offline-batch"]\nlevers = ["baseline"]\n'
            'devices = ["H100"]\n{extra}')
    short = tmp_path / "short.toml"
    short.write_text(text.format(extra="horizon = 2.0\nmin_sessions = 100\n"))
    plain = tmp_path / "plain.toml"
    plain.write_text(text.format(extra=""))
    s, p = load_serving_grid(short).workloads[0], load_serving_grid(plain).workloads[0]
    assert (p.horizon, p.min_sessions, s.horizon, s.min_sessions) == (4.0, 200, 2.0, 100)
    rate = 10.0
    assert s.sessions_at(rate) == int(-(-rate * 2.0 * p.session_s // 1)) and p.sessions_at(rate) > s.sessions_at(rate)
    bad = tmp_path / "bad.toml"
    bad.write_text(text.format(extra="horizon = 0.5\n"))
    with pytest.raises(InputError, match=r"horizon = 0.5 is not allowed") as exc:
        load_serving_grid(bad)
    assert "\n" not in str(exc.value)


def test_the_moe_exchange_lever_reaches_the_layout_and_needs_a_dep_layout():
    # TensorRT-LLM's attention-DP MoE (all-gather + reduce-scatter) on 8 H200 as DEP8; FP8 tokens at 1 B a value
    lever = parse_lever(dict(instances=3, tp=1, dp=8, ep=8, moe_exchange="gather"), "levers.toml [levers.x]", "x")
    res = check(DS, Config("H200", lever), "levers.toml [levers.x]")
    with jax.enable_x64(True):
        lay = pool_layout(DS, Config("H200", lever), res)
    assert (res.moe_exchange, float(lay.exchange), float(lay.dispatch_bytes)) == ("gather", 1.0, 1.0)
    assert resolve(DS, parse_lever(dict(tp=1, dp=8, ep=8), "l", "y")).moe_exchange == "all-to-all"
    with pytest.raises(InputError, match=r"levers.toml \[levers.z\]: moe_exchange = 'ring' is not allowed; "
                                         r"expected one of all-to-all, gather") as exc:
        parse_lever(dict(moe_exchange="ring"), "levers.toml [levers.z]", "z")
    assert "\n" not in str(exc.value)
    tp8 = parse_lever(dict(moe_exchange="gather"), "levers.toml [levers.w]", "w")
    with pytest.raises(InputError, match=r"lever 'w' on H200: moe_exchange = 'gather' is not allowed with dp = 1, "
                                         r"ep = \d+; .*expected dp > 1 and ep = tp x dp, or 'all-to-all'") as exc:
        check(DS, Config("H200", tp8), "levers.toml [levers.w]")
    assert "\n" not in str(exc.value)
