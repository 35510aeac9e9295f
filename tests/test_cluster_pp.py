"""A cluster's pp: pipeline stages per instance, the weights' fit over the stages, and the same replica as a
lever's pp."""

import dataclasses

import jax
import numpy as np
import pytest

from sweepkit.errors import InputError
from sweepkit.serving.cluster import make_cluster, parse_cluster
from sweepkit.serving.config import Config, check, policy
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.levers import Lever
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.workloads import load_workloads

KW = dict(model="llama-3.1-70b", tp=1, devices=["H100"], weight_format="fp8", kv_format="fp8", batch_cap=8)


def test_cluster_pp_is_the_same_replica_as_a_lever_pp():
    by_cluster = make_cluster(instances=1, pp=2, **KW)
    by_lever = make_cluster(instances=2, **KW)
    plain = Lever(name="plain", description="")
    staged = Lever(name="pp2", description="", instances=1, tp=1, pp=2)
    a, b = check(by_cluster, Config("H100", plain), "a"), check(by_lever, Config("H100", staged), "b")
    assert (a.instances, a.tp, a.pp, a.microbatches) == (b.instances, b.tp, b.pp, b.microbatches) == (1, 1, 2, 2)
    with jax.enable_x64(True):
        ia, ib = policy(by_cluster, Config("H100", plain)).inst, policy(by_lever, Config("H100", staged)).inst
    for x, y in zip(jax.tree_util.tree_leaves(ia), jax.tree_util.tree_leaves(ib)):
        assert np.array_equal(np.asarray(x), np.asarray(y))


def test_the_weights_fit_over_the_stages_and_bad_pp_gets_one_line():
    # Llama-3.1-70B in BF16 is ~141 GB of weights: over one H100's 72 GB usable (90 % of 80 GB), ~35 GB a GPU over
    # four stages
    bf16 = dict(KW, weight_format="bf16", kv_format="bf16")
    with pytest.raises(InputError, match=r"tp = 1 is not allowed; llama-3.1-70b's bf16 weights take 141.\d GB per GPU, "
                                         r"H100 may use 72 GB \(90% of its HBM\): expected a larger tp or pp"):
        make_cluster(instances=1, **bf16)
    c = make_cluster(instances=1, pp=4, **bf16)
    assert (c.gpus, check(c, Config("H100", Lever(name="x", description="")), "c").pp) == (4, 4)
    with pytest.raises(InputError, match=r"\[cluster\]: pp = 0 is not allowed"):
        parse_cluster(dict(KW, instances=1, pp=0), "c.toml [cluster]")
    with pytest.raises(InputError, match=r"gpus = 3 is not allowed; expected instances x tp x dp x pp = 2"):
        make_cluster(instances=1, pp=2, gpus=3, **KW)


def test_a_pipelined_cluster_serves_requests():
    base = load_workloads()["long-context-rag"]
    w = dataclasses.replace(base, name="fixed", prompt_mean_tokens=256, prompt_cv=0.0, output_mean_tokens=16,
                            output_cv=0.0, system_prompts=0, system_prompt_tokens=0, turns=1, min_sessions=6,
                            ttft_slo_s=10.0, tpot_slo_s=1.0)
    c = make_cluster(instances=1, pp=2, **KW)
    lanes = run_configs(w, c, [Config("H100", Lever(name="plain", description=""))], np.full((1, 1), 0.01),
                        early_stop=False)
    m = lane_metrics(lanes, 0, 0, w, c.gpus, 100.0, 3.5)
    assert np.isfinite(m["ttft_p50_s"]) and m["ttft_p50_s"] > 0 and np.isfinite(m["tpot_p50_s"])
