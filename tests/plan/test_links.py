"""A plan's frontier on the what-if page: the files it writes are the ones ``sweepkit serve`` loads, every
frontier point is a preset the page offers and the serving engine accepts on the written cluster, and each
address names that preset."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from sweepkit.errors import InputError
from sweepkit.plan.api import Plan
from sweepkit.plan.frontier import rows
from sweepkit.plan.links import serve_files
from sweepkit.plan.search import Simulated
from sweepkit.plan.space import enumerate_space, make_space
from sweepkit.serve.api import build_context, options, whatif_args
from sweepkit.serving.config import Config, check


def _plan(model: str, gpus: int, fixed: dict, objectives: dict[int, float]) -> Plan:
    """A plan whose simulated rows are ``objectives`` (row -> tokens/s per GPU) of the space's table, with
    TTFT and TPOT falling as the objective falls (so every row is on the frontier)."""
    table = enumerate_space(make_space(model, ["H100"], gpus, fixed))
    n = len(table["tp"])
    bound = dict(ttft_lb_s=np.zeros(n), tpot_lb_s=np.zeros(n))
    sims = [Simulated(i, 1.0, dict(output_tok_s_per_gpu=v, ttft_p99_s=v / 1e4, tpot_p99_s=v / 1e5), 2 * v, v)
            for i, v in objectives.items()]
    p = Plan(model, "tokens_per_gpu")
    p.workloads["chat"] = dict(rows=rows(table, bound, np.ones(n), sims, "chat"), simulated=len(sims))
    return p


FIXED = dict(tp=(1, 2), pp=(1,), prefill_tp=(1,), batching=("chunked",), token_budget=(2048,), batch_cap=(64,),
             kv=("paged",), weight_format=("bf16",), kv_format=("bf16",), spec=("none",))


def test_every_frontier_point_is_a_preset_the_page_offers_and_the_engine_accepts(tmp_path):
    """Llama-3.1-8B on 2 x H100: colocated 2 x tp1, 1 x tp2 and a disaggregated 1P:1D on the frontier."""
    plan = _plan("llama-3.1-8b", 2, FIXED, {0: 300.0, 1: 200.0, 2: 100.0})
    links = serve_files(plan, tmp_path)
    assert len(links) == 3
    ctx = build_context(None, None, str(tmp_path / "levers.toml"), str(tmp_path / "cluster.toml"))
    assert (ctx.cluster.instances, ctx.cluster.tp, ctx.cluster.gpus) == (2, 1, 2)   # the best colocated row
    offered = options(ctx)["levers"]
    for name, address in links.items():
        q = parse_qs(urlparse(address).query)
        assert urlparse(address).path == "/what-if" and q["lever"] == [name] and q["device"] == ["H100"]
        assert name in offered
        args = whatif_args(ctx, dict(workload="chat", device="H100", before="baseline", after=name))
        check(ctx.cluster, Config("H100", args["after"]), "what-if")
    modes = {ctx.levers[n].mode for n in links}
    assert modes == {"colocated", "disagg"}


def test_expert_parallel_points_link_too(tmp_path):
    """Qwen3-30B-A3B on 4 x H100 as 2 x (tp1 dp2 ep2): the cluster takes the DEP layout."""
    fixed = dict(FIXED, tp=(1,), dp=(2,), ep=(2,), mode=("colocated",))
    plan = _plan("qwen3-30b-a3b", 4, fixed, {0: 500.0})
    links = serve_files(plan, tmp_path)
    ctx = build_context(None, None, str(tmp_path / "levers.toml"), str(tmp_path / "cluster.toml"))
    assert (ctx.cluster.instances, ctx.cluster.tp, ctx.cluster.dp, ctx.cluster.ep) == (2, 1, 2, 2)
    (name,) = links
    lever = ctx.levers[name]
    assert (lever.dp, lever.ep) == (2, 2)
    check(ctx.cluster, Config("H100", lever), "what-if")


def test_nothing_simulated_is_one_line(tmp_path):
    with pytest.raises(InputError) as e:
        serve_files(Plan("llama-3.1-8b", "tokens_per_gpu"), tmp_path)
    assert "no simulated frontier" in str(e.value) and "\n" not in str(e.value)
