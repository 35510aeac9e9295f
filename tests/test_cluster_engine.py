"""The cluster engine's mechanisms, by running real simulations on small clusters (Llama-3-8B on H100s).

Batching, KV and preemption policies share one compiled program (levers are data), so each test module
compiles a handful of shapes. Expectations follow the published behaviour of each mechanism: Sarathi-Serve
(arXiv:2403.02310) for chunked prefill, vLLM (arXiv:2309.06180) for paged KV and preemption, SGLang
(arXiv:2312.07104) for prefix caching.
"""

import dataclasses

import jax
import numpy as np
import pytest

from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.levers import Lever
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.workloads import load_workloads

ONE = dataclasses.replace(load_cluster(), model="llama-3-8b", gpus=1, instances=1, tp=1, batch_cap=64,
                          devices=("H100",))


def _single(prompt=2048, prompt_cv=0.6, output=128, output_cv=0.0, n=200, offline=False):
    base = load_workloads()["long-context-rag"]
    return dataclasses.replace(base, name="mech", prompt_mean_tokens=prompt, prompt_cv=prompt_cv,
                               prompt_max_tokens=8192, output_mean_tokens=output, output_cv=output_cv,
                               output_max_tokens=4096, system_prompts=0, system_prompt_tokens=0, min_sessions=n,
                               ttft_slo_s=1e-3, tpot_slo_s=1e-4, offline=offline)  # SLOs: n sessions exactly


def _run(w, cl, levers, rate, device="H100", **sized):
    cfgs = [Config(device, lv) for lv in levers]
    lanes = run_configs(w, cl, cfgs, np.full((len(cfgs), 1), rate), early_stop=False, **sized)
    return [lane_metrics(lanes, c, 0, w, cl.gpus, 100.0, 3.0) for c in range(len(cfgs))], lanes


BATCHING = [Lever("pp"), Lever("dp", batching="decode-priority")] + [
    Lever(f"c{tau}", batching="chunked", token_budget=tau) for tau in (256, 512, 1024, 2048)]
MTP_W = Lever("mtp-w", draft="mtp", gamma=3, alpha_from_workload=True)
"""Per-position acceptance (chat's MTP model): its lanes and the batching lanes share one program, sized for
both (a larger program gives the same results)."""


@pytest.fixture(scope="module")
def batching():
    return _run(_single(), ONE, BATCHING, 5.0, cover=[Config("H100", MTP_W)])


def test_every_request_finishes_with_exactly_its_tokens_and_littles_law_holds(batching):
    ms, lanes = batching
    out = lanes.sessions.output.T.reshape(-1)
    for c, m in enumerate(ms):
        st = lanes.state(c, 0)
        came = np.isfinite(st.arrival_s)
        assert m["completed"] + m["rejected"] == m["requests"] == 200
        assert np.all(st.first_s[came] >= st.arrival_s[came]) and np.all(st.finish_s[came] >= st.first_s[came])
        win = came & (st.arrival_s > st.window_from_s)
        # every generated token after the first of the steady set's requests (all but the first 10% to
        # arrive) left exactly one gap in the ITL record
        assert win.sum() == 200 - int(0.1 * 200)
        assert st.hist.sum() + st.zeros == pytest.approx(float((out[win] - 1).sum()), abs=1e-6)
        assert m["little_l"] == pytest.approx(m["little_lambda_w"], rel=1e-9)
        assert m["kv_peak_fraction"] <= 1.0


def test_chunked_prefill_trades_ttft_for_itl_as_sarathi_serve_reports(batching):
    ms, _ = batching
    pp, dp, c256, c512, c1024, c2048 = ms
    assert c512["itl_p99_s"] < pp["itl_p99_s"] / 2
    assert pp["ttft_p50_s"] < c512["ttft_p50_s"] < 2 * pp["ttft_p50_s"]
    itl = [m["itl_p99_s"] for m in (c256, c512, c1024, c2048)]
    assert all(b >= a * (1 - 1e-9) for a, b in zip(itl, itl[1:])), itl
    assert c256["ttft_p50_s"] > c2048["ttft_p50_s"]


def test_decode_priority_starves_prompts_but_never_stalls_decode_rows(batching):
    ms, _ = batching
    pp, dp = ms[0], ms[1]
    assert dp["ttft_p50_s"] > 10 * pp["ttft_p50_s"]
    assert dp["itl_p99_s"] < pp["itl_p99_s"]


KV = [Lever("reserved"), Lever("paged", kv="paged"), Lever("swap", kv="paged", preemption="swap"),
      Lever("paged-chunked", kv="paged", batching="chunked", token_budget=1024)]


@pytest.fixture(scope="module")
def memory_bound():
    # 2,048-token prompts with 1,024-token outputs, all at once, on a small KV: reservation binds
    cl = dataclasses.replace(ONE, devices=("A100-40GB",), batch_cap=256)
    w = _single(prompt=2048, prompt_cv=0.3, output=1024, output_cv=0.5, n=150, offline=True)
    return _run(w, cl, KV, 1e6, device="A100-40GB")


def test_paged_kv_runs_a_larger_batch_and_preempts_where_memory_binds(memory_bound):
    ms, _ = memory_bound
    reserved, paged, swap, chunked = ms
    for m in ms:
        assert m["completed"] == 150 and m["kv_peak_fraction"] <= 1.0
        assert m["little_l"] == pytest.approx(m["little_lambda_w"], rel=1e-9)
    assert paged["mean_running_batch"] > 1.2 * reserved["mean_running_batch"]
    assert reserved["preemptions"] == 0
    assert paged["preemptions"] > 0 and paged["recompute_tokens"] > 0
    assert chunked["preemptions"] > 0


def test_swapped_out_bytes_come_back_in(memory_bound):
    ms, _ = memory_bound
    swap = ms[2]
    assert swap["preemptions"] > 0 and swap["swap_out_bytes"] > 0
    assert swap["swap_in_bytes"] == pytest.approx(swap["swap_out_bytes"], rel=1e-12)
    assert ms[1]["swap_out_bytes"] == 0


def test_prefix_cache_hits_the_chat_history_and_cuts_ttft():
    """The cached lanes run in the program of the test below (256 rows per instance: a row past this
    cluster's cap of 64 is never admitted, so a program of more rows gives the same lane)."""
    w = dataclasses.replace(load_workloads()["chat"], min_sessions=60)
    (plain,), _ = _run(w, ONE, [Lever("paged", kv="paged")], 0.3)
    (cached,), lanes = _run(w, ONE, [Lever("prefix", kv="paged", prefix_caching=True)], 0.3, slots=256)
    assert lanes.groups[0].plan.fin_at.shape[-1] == 256                   # rows per instance in the program
    assert cached["prefix_hit_rate"] > 0.5 and plain["prefix_hit_rate"] == 0
    assert cached["ttft_p50_s"] < plain["ttft_p50_s"]
    assert cached["completed"] == cached["requests"]
    assert cached["little_l"] == pytest.approx(cached["little_lambda_w"], rel=1e-9)


def test_prefix_cache_under_recompute_preemption_releases_every_pin():
    """Multi-turn chat on a small KV, everything at once: rows pin their chains, are preempted by recompute
    (their pins released), come back and finish; at the end no segment is pinned, and the KV in use (rows
    and cache) never passed the instance's. Pins are released only where a row holds one
    (finish, hand-off, preemption), so a release skipped or done twice shows here."""
    cl = dataclasses.replace(ONE, devices=("A100-40GB",), batch_cap=256)
    w = dataclasses.replace(load_workloads()["chat"], min_sessions=120, prompt_mean_tokens=2048,
                            output_mean_tokens=512, offline=True)
    (m,), lanes = _run(w, cl, [Lever("prefix", kv="paged", prefix_caching=True)], 1e6, device="A100-40GB")
    st = lanes.state(0, 0)
    assert m["preemptions"] > 0 and m["recompute_tokens"] > 0 and m["prefix_hit_rate"] > 0
    assert m["completed"] == m["requests"] and m["kv_peak_fraction"] <= 1.0
    assert np.all(np.asarray(st.c_refs) == 0)
    assert m["little_l"] == pytest.approx(m["little_lambda_w"], rel=1e-9)


def test_least_loaded_routing_splits_a_burst_and_session_routing_keeps_a_session_home():
    cl = dataclasses.replace(ONE, gpus=2, instances=2)
    burst = _single(prompt=512, prompt_cv=0.0, output=64, n=40, offline=True)
    (ll,), lanes = _run(burst, cl, [Lever("ll")], 1e6)
    st = lanes.state(0, 0)
    assert list(st.q_tail) == [20, 20]          # every arrival went to the instance with less queued + running
    w = dataclasses.replace(load_workloads()["coding-agent"], min_sessions=30)
    (ses,), lanes = _run(w, cl, [Lever("home", router="session")], 0.05)
    st = lanes.state(0, 0)
    assert ses["completed"] == ses["requests"]
    assert np.all(st.home[:30] >= 0) and st.q_tail.sum() == ses["requests"]


def test_per_position_acceptance_gives_the_closed_form_tokens_per_verify_pass():
    """alpha = "workload": chat's MTP model (0.75, 0.69, 0.65; sweepkit/catalogue/acceptance.toml) drawn per
    request and pass; tokens per verify pass within 3% of E = 1 + sum_k prod_{i<=k} alpha_i (Leviathan et al.
    2023, eq. 1, generalised to per-position alphas)."""
    from sweepkit.acceptance import workload_alphas
    from sweepkit.speculative import expected_tokens_positional

    w = dataclasses.replace(_single(prompt=128, prompt_cv=0.0, output=1024, n=64), name="chat")
    ms, lanes = _run(w, ONE, [MTP_W], 0.5, cover=[Config("H100", lv) for lv in BATCHING],
                     sessions=_single().min_sessions)        # the batching lanes' program
    assert lanes.groups[0].buf_s.shape[-1] == 512
    st = lanes.state(0, 0)
    done = np.isfinite(st.finish_s)
    assert done.sum() == ms[0]["completed"] == ms[0]["requests"] > 0
    decode_tokens = float(ms[0]["completed"] * (1024 - 1))
    per_pass = decode_tokens / float(np.sum(st.stats.decode_rows))
    alphas, model = workload_alphas("chat", "mtp", 3)
    want = float(expected_tokens_positional(jax.numpy.asarray(alphas)))
    assert model.name == "chat/mtp" and want == pytest.approx(2.604, abs=1e-3)
    assert per_pass == pytest.approx(want, rel=0.03)
