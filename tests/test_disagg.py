"""Disaggregated prefill/decode pools, by running real simulations on a 2-GPU cluster (Llama-3-8B on H100).

A prefill instance computes the prompt and the first token; the KV (prompt + first token) crosses one FIFO link
(10 us + bytes / 50 GB/s) to the least-loaded decode instance, which never stalls for a prompt (DistServe,
arXiv:2401.09670; Splitwise, arXiv:2311.18677). With the pull hand-off the decode instance reserves room before
the transfer starts and the prefill instance holds the KV until it lands (Mooncake, arXiv:2407.00079, sec. 5).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sweepkit.errors import InputError
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.engine.handoff import link_transfers
from sweepkit.serving.config import Config, check
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.levers import Lever
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.workloads import load_workloads

TWO = dataclasses.replace(load_cluster(), model="llama-3-8b", gpus=2, instances=2, tp=1, batch_cap=64,
                          devices=("H100",))
COLOCATED = Lever("colocated")
DISAGG = Lever("1p1d", mode="disagg", prefill_instances=1, prefill_tp=1, instances=1, tp=1)


def _prefill_heavy(n=120):
    base = load_workloads()["long-context-rag"]
    return dataclasses.replace(base, name="heavy", prompt_mean_tokens=6000, prompt_cv=0.3, prompt_max_tokens=8192,
                               output_mean_tokens=96, output_cv=0.0, output_max_tokens=4096, system_prompts=0,
                               system_prompt_tokens=0, min_sessions=n, ttft_slo_s=1e-3, tpot_slo_s=1e-4)


@pytest.fixture(scope="module")
def runs():
    w = _prefill_heavy()
    cfgs = [Config("H100", COLOCATED), Config("H100", DISAGG)]
    lanes = run_configs(w, TWO, cfgs, np.full((2, 1), 4.0), early_stop=False)
    return w, lanes, [lane_metrics(lanes, c, 0, w, TWO.gpus, 100.0, 3.0) for c in range(2)]


def test_every_request_goes_arrival_first_token_transfer_landing_decode_finish_in_order(runs):
    w, lanes, ms = runs
    st = lanes.state(1, 0)
    came = np.isfinite(st.arrival_s)
    assert ms[1]["completed"] == came.sum() > 0
    arr, first, start, land, fin = (np.asarray(x)[came] for x in
                                     (st.arrival_s, st.first_s, st.xfer_start_s, st.xfer_land_s, st.finish_s))
    assert np.all(arr <= first) and np.all(first <= start) and np.all(start < land) and np.all(land < fin)
    order = np.argsort(start)   # one FIFO channel: transfers never overlap
    assert np.all(start[order][1:] >= land[order][:-1] - 1e-12)
    assert float(st.link_j) > 0


def test_disaggregation_cuts_itl_p99_on_a_prefill_heavy_load(runs):
    _, _, (colo, dis) = runs
    assert dis["itl_p99_s"] < 0.5 * colo["itl_p99_s"], (dis["itl_p99_s"], colo["itl_p99_s"])
    assert dis["tpot_p99_s"] < colo["tpot_p99_s"]


def test_the_kv_link_is_an_md1_queue_with_the_pollaczek_khinchine_mean_wait():
    """Poisson ready times at utilisation 0.5, deterministic transfers D: W = rho D / (2 (1 - rho)) = D / 2."""
    D, rho, n = 1.0, 0.5, 40_000
    ready = np.cumsum(np.random.default_rng(7).exponential(D / rho, n))

    def one(free, t):
        start, land, free = link_transfers(t, free, jnp.full((1,), D), jnp.ones((1,), bool))
        return free, start[0] - t

    with jax.enable_x64(True):
        waits = np.asarray(jax.lax.scan(one, jnp.float64(0.0), jnp.asarray(ready))[1])
    assert float(np.mean(waits)) == pytest.approx(rho * D / (2.0 * (1.0 - rho)), rel=0.10)


def test_bad_disaggregated_layouts_are_refused_in_one_line():
    with pytest.raises(InputError, match="GPUs, expected the cluster's 2"):
        check(TWO, Config("H100", dataclasses.replace(DISAGG, prefill_tp=2)), "levers.toml")
    with pytest.raises(InputError, match="need mode = 'disagg'"):
        check(TWO, Config("H100", Lever("x", prefill_instances=1)), "levers.toml")
    with pytest.raises(InputError, match="need mode = 'disagg'"):
        check(TWO, Config("H100", Lever("x", handoff="push")), "levers.toml")
    with pytest.raises(InputError, match="preemption = 'swap' are not modelled"):
        check(TWO, Config("H100", dataclasses.replace(DISAGG, kv="paged", preemption="swap")), "levers.toml")


def test_a_full_decode_pool_backs_pressure_up_into_prefill_admission():
    """Decode is the bottleneck (1,024-token outputs, reserved KV on a 40 GB A100), prefill is not (2 sessions/s
    of 6,000-token prompts). Pull: transfers wait for decode room, the held KV fills the prefill instance's
    memory and its admissions stall, so TTFT grows; push: the prefill instance frees the KV at hand-off and the
    transfer never waits for room (the landed KV queues on the decode side instead)."""
    cluster = dataclasses.replace(TWO, devices=("A100-40GB",))
    w = dataclasses.replace(_prefill_heavy(80), output_mean_tokens=1024)
    pull = dataclasses.replace(DISAGG, name="pull")
    push = dataclasses.replace(DISAGG, name="push", handoff="push")
    lanes = run_configs(w, cluster, [Config("A100-40GB", pull), Config("A100-40GB", push)], np.full((2, 1), 2.0),
                        early_stop=False)
    m_pull, m_push = (lane_metrics(lanes, c, 0, w, cluster.gpus, 100.0, 3.0) for c in range(2))
    peak_pull, peak_push = (np.asarray(lanes.state(c, 0).stats.kv_peak) for c in range(2))
    assert m_pull["completed"] == m_push["completed"] == 80
    assert peak_pull[0] > 0.9 and peak_push[0] < 0.2          # the prefill instance holds KV until it lands
    assert max(peak_pull[1], peak_push[1]) <= 1.0 + 1e-12      # decode KV never exceeds its capacity
    assert m_pull["kv_transfer_wait_s"] > 1.0 and m_push["kv_transfer_wait_s"] < 0.01
    assert m_pull["ttft_p90_s"] > 2.0 * m_push["ttft_p90_s"], (m_pull["ttft_p90_s"], m_push["ttft_p90_s"])


def test_a_prompt_larger_than_a_prefill_instance_memory_is_rejected_not_queued_forever():
    """2 x TP2 H100 prefill instances hold ~8.8k KV tokens of Llama-3-70B each: 12k-token prompts can never
    be prefilled there, so each is rejected on arrival (a miss) instead of blocking its queue's head forever;
    6k-token prompts all complete."""
    from sweepkit.serving.levers import load_levers

    cluster = load_cluster()
    lever = load_levers()["disagg-2p1d"]
    for prompt, done in ((12_000, 0), (6_000, 16)):
        w = dataclasses.replace(_prefill_heavy(16), prompt_mean_tokens=prompt, prompt_cv=0.0,
                                prompt_max_tokens=16_384, output_mean_tokens=16)
        lanes = run_configs(w, cluster, [Config("H100", lever)], np.full((1, 1), 0.5), early_stop=False)
        st = lanes.state(0, 0)
        came = np.isfinite(np.asarray(st.arrival_s))
        assert int(np.isfinite(np.asarray(st.finish_s)).sum()) == done
        assert int(np.asarray(st.rejected)[came].sum()) == 16 - done


def test_a_request_preempted_on_the_decode_pool_recomputes_its_prompt_there():
    """Paged KV on a decode-bound 1P1D: decode rows outgrow the blocks, the latest arrivals are preempted by
    recompute, and each re-prefills its prompt + generated tokens on the decode instance (its prefill tokens
    there equal the recomputed tokens), then finishes with exactly its output tokens. The lane runs in the
    program of the other tests' 120 sessions (``sessions=128``: a program of more sessions gives the same lane)."""
    cluster = dataclasses.replace(TWO, devices=("A100-40GB",))
    w = dataclasses.replace(_prefill_heavy(40), output_mean_tokens=1024)
    lever = dataclasses.replace(DISAGG, name="paged", kv="paged")
    lanes = run_configs(w, cluster, [Config("A100-40GB", lever)], np.full((1, 1), 2.0), early_stop=False,
                        sessions=128)
    assert lanes.groups[0].buf_s.shape[-1] == 512                       # the sessions the program holds
    st, m = lanes.state(0, 0), lane_metrics(lanes, 0, 0, w, cluster.gpus, 100.0, 3.0)
    stats = {k: np.asarray(v) for k, v in vars(st.stats).items()}
    assert m["completed"] == 40
    assert stats["preemptions"][1] > 0 and stats["preemptions"][0] == 0
    assert stats["prefill_tokens"][1] == pytest.approx(stats["recompute_tokens"][1], rel=1e-12)
