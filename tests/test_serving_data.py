"""Serving data: workloads, levers and cluster as TOML; request sampling; acceptance draws."""

import dataclasses

import numpy as np
import pytest

from sweepkit.errors import InputError
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.levers import load_levers
from sweepkit.serving.requests import sample_sessions, verify_passes
from sweepkit.serving.workloads import load_workloads
from sweepkit.speculative import expected_tokens

SEED_FIVE = ["chat", "coding-agent", "offline-batch", "long-context-rag", "realtime-voice"]


def test_packaged_workloads_are_the_seeds_five_with_sources():
    ws = load_workloads()
    assert list(ws) == SEED_FIVE
    for w in ws.values():
        assert w.source
    # the reference's examples/tradeoffs.py: session_s = turns x (think + ttft_slo + mean_output x tpot_slo)
    assert ws["chat"].session_s == pytest.approx(83.70, abs=0.01)
    assert ws["coding-agent"].session_s == pytest.approx(79.2)
    assert ws["realtime-voice"].session_s == pytest.approx(27.0)
    # chat at its reference load simulates 1,947 requests (the reference's examples/tradeoffs.py)
    assert ws["chat"].sessions_at(1.9375) * ws["chat"].turns == 1947


def test_lognormal_mean_and_cv():
    # sigma^2 = ln(1 + cv^2), mu = ln(mean) - sigma^2 / 2: E = mean and sd / mean = cv before rounding and clipping
    w = dataclasses.replace(load_workloads()["offline-batch"], prompt_mean_tokens=500.0, prompt_cv=0.8,
                            prompt_max_tokens=10**6, output_mean_tokens=50.0, output_cv=3.0, output_max_tokens=64)
    s = sample_sessions(w, 100_000)
    x = s.new_input[:, 0]
    assert x.mean() == pytest.approx(500.0, rel=0.01)
    assert x.std() / x.mean() == pytest.approx(0.8, rel=0.03)
    assert s.output.max() <= 64


def test_prompts_carry_system_prompt_and_whole_history():
    w = load_workloads()["chat"]
    s = sample_sessions(w, 50)
    x, y = s.new_input, s.output
    for k in range(w.turns):
        want = w.system_prompt_tokens + (x[:, :k] + y[:, :k]).sum(axis=1) + x[:, k]
        np.testing.assert_array_equal(s.prompt[:, k], want)


def test_common_random_numbers_across_session_counts():
    w = load_workloads()["realtime-voice"]
    small, large = sample_sessions(w, 100), sample_sessions(w, 3000)
    np.testing.assert_array_equal(small.prompt, large.prompt[:100])
    np.testing.assert_array_equal(small.start_unit, large.start_unit[:100])


def test_tokens_per_verify_pass_within_3pct_of_expected_tokens():
    # the reference's speculative tests: simulated tokens/verify within 3% of the closed form (g4 a0.75, 200 req, 1024 out)
    ids = np.arange(200)
    out = np.full(200, 1025)
    passes = verify_passes(ids, out, 0.75, 4)
    assert (1024 * 200) / passes.sum() == pytest.approx(float(expected_tokens(0.75, 4)), rel=0.03)
    np.testing.assert_array_equal(verify_passes(ids, out, 0.0, 4), out - 1)


def test_bad_workload_file_is_one_clear_line(tmp_path):
    p = tmp_path / "w.toml"
    p.write_text('[workloads.mine]\nsource = "me"\nttft_slo_s = -1\ntpot_slo_s = 0.05\n'
                 'prompt_mean_tokens = 10\nprompt_cv = 0\nprompt_max_tokens = 10\noutput_mean_tokens = 5\n'
                 'output_cv = 0\noutput_max_tokens = 9\n')
    with pytest.raises(InputError) as e:
        load_workloads(p)
    msg = str(e.value)
    assert "\n" not in msg and "w.toml" in msg and "ttft_slo_s" in msg and "-1" in msg
    p.write_text('[workloads.mine]\nsource = "me"\nttft_slo = 1\n')
    with pytest.raises(InputError, match="unknown field 'ttft_slo'"):
        load_workloads(p)
    with pytest.raises(InputError, match="no such file"):
        load_workloads(tmp_path / "missing.toml")


def test_workload_from_a_trace_file(tmp_path):
    (tmp_path / "t.csv").write_text("input_tokens,output_tokens\n100,10\n200,20\n")
    p = tmp_path / "w.toml"
    p.write_text('[workloads.replay]\nsource = "my trace"\ntrace = "t.csv"\nttft_slo_s = 1\ntpot_slo_s = 0.05\n')
    w = load_workloads(p)["replay"]
    s = sample_sessions(w, 64)
    assert set(np.unique(s.output)) <= {10, 20}
    assert set(np.unique(s.prompt)) <= {100, 200}


def test_bad_lever_and_cluster_files(tmp_path):
    p = tmp_path / "l.toml"
    p.write_text('[levers.x]\ndraft = "mtp"\ngamma = 3\nalpha = 1.5\n')
    with pytest.raises(InputError, match="alpha = 1.5"):
        load_levers(p)
    p.write_text('[levers.x]\ndraft = "nope"\ngamma = 3\nalpha = 0.5\n')
    with pytest.raises(InputError, match="draft = 'nope'"):
        load_levers(p)
    c = tmp_path / "c.toml"
    c.write_text('[cluster]\nmodel = "llama-3-70b"\ninstances = 2\ntp = 4\ngpus = 6\ndevices = ["H100"]\n')
    with pytest.raises(InputError, match="gpus = 6"):
        load_cluster(c)
    c.write_text('[cluster]\nmodel = "llama-3-70b"\ninstances = 2\ntp = 4\ndevices = ["Z9"]\n')
    with pytest.raises(InputError, match="Z9"):
        load_cluster(c)


def test_packaged_levers_and_cluster():
    lv = load_levers()
    assert {"baseline", "mtp", "draft-llama-3.2-1b", "decode-priority", "chunked-512", "chunked-2048", "paged",
            "paged-swap", "prefix-cache", "tp8", "tp2x4", "tp2pp2", "tp2pp2-mb1", "w8a8-fp8", "w4-int4", "kv-fp8",
            "fp8-all", "w4a4-fp4", "modern-colocated", "modern-spec", "disagg-1p1d", "disagg-2p1d",
            "disagg-levers", "modern-disagg"} == set(lv)
    assert len(lv) == 24   # the reference sweep's 23 levers + the baseline
    assert all(v.source and v.family for v in lv.values())
    assert (lv["mtp"].gamma, lv["mtp"].alpha) == (3, 0.7)
    assert (lv["draft-llama-3.2-1b"].gamma, lv["draft-llama-3.2-1b"].draft) == (4, "llama-3.2-1b")
    cl = load_cluster()
    assert (cl.gpus, cl.instances, cl.tp, cl.batch_cap, cl.prefill_token_budget) == (8, 2, 4, 256, 8192)
    assert dataclasses.replace(cl, tp=2).tp == 2


def test_single_turn_sampler_is_prefix_stable():
    # Common random numbers: request s is the same whatever the number of requests simulated.
    for name in ("offline-batch", "long-context-rag"):
        w = load_workloads()[name]
        small, large = sample_sessions(w, 50), sample_sessions(w, 400)
        for f in ("start_unit", "new_input", "output", "prompt", "system_id"):
            np.testing.assert_array_equal(getattr(small, f), getattr(large, f)[:50], err_msg=f"{name} {f}")


def test_single_turn_sampler_follows_the_seeds_draw_order():
    # the reference's workload.py: one random.Random(seed); per request, in order: the gap expovariate(rate), the
    # system prompt randrange(system_prompts) (only with system prompts), the input and the output, each
    # round(lognormvariate(mu, sigma)) clipped to [1, max], sigma^2 = ln(1 + cv^2), mu = ln(mean) - sigma^2/2.
    import math
    import random

    def lognorm(rng, mean, cv, hi):
        s2 = math.log(1.0 + cv * cv)
        return min(max(round(rng.lognormvariate(math.log(mean) - s2 / 2.0, math.sqrt(s2))), 1), hi)

    rate = 0.59375  # a load only divides the unit-rate arrivals: expovariate(rate) == expovariate(1) / rate
    for name, n_sys in (("long-context-rag", 4), ("offline-batch", 0)):
        w = load_workloads()[name]
        assert w.system_prompts == n_sys
        rng, t, want = random.Random(1), 0.0, []
        for _ in range(6):
            t += rng.expovariate(rate)
            sid = rng.randrange(n_sys) if n_sys else 0
            x = lognorm(rng, w.prompt_mean_tokens, w.prompt_cv, w.prompt_max_tokens)
            y = lognorm(rng, w.output_mean_tokens, w.output_cv, w.output_max_tokens)
            want.append((t, sid, x, y))
        s = sample_sessions(w, 6, seed=1)
        np.testing.assert_allclose(s.start_unit / rate, [r[0] for r in want], rtol=1e-12)
        np.testing.assert_array_equal(s.system_id, [r[1] for r in want])
        np.testing.assert_array_equal(s.new_input[:, 0], [r[2] for r in want])
        np.testing.assert_array_equal(s.output[:, 0], [r[3] for r in want])
        np.testing.assert_array_equal(s.prompt[:, 0], w.system_prompt_tokens * (n_sys > 0) + s.new_input[:, 0])
    # another seed, another sample
    w = load_workloads()["long-context-rag"]
    assert not np.array_equal(sample_sessions(w, 6, seed=2).new_input, sample_sessions(w, 6, seed=1).new_input)


def test_single_turn_lengths_within_one_and_max():
    for name in ("offline-batch", "long-context-rag"):
        w = load_workloads()[name]
        s = sample_sessions(w, 2000)
        assert s.new_input.shape == s.output.shape == (2000, 1)
        assert 1 <= s.new_input.min() and s.new_input.max() <= w.prompt_max_tokens
        assert 1 <= s.output.min() and s.output.max() <= w.output_max_tokens
        assert (np.diff(s.start_unit) > 0).all() and (s.think_s == 0).all()
    # a tight max is hit and respected; a huge cv drives some draws below 0.5, which clip to 1
    w = dataclasses.replace(load_workloads()["offline-batch"], prompt_max_tokens=2000, output_cv=4.0)
    s = sample_sessions(w, 2000)
    assert s.new_input.max() == 2000 and s.output.min() == 1


def _seed_draws(w, n, seed=1):
    """The seed's chat_sessions draw order (workload.py, commit 0caa090), written out independently: per
    session the start gap, the system prompt (with system prompts), then per turn the input, the output and
    (turn > 0) the think time; a length with cv = 0 is its mean and draws nothing."""
    import math
    import random

    rng = random.Random(seed)

    def length(mean, cv, hi):
        if cv <= 0:
            return int(min(hi, max(1, round(mean))))
        s2 = math.log(1 + cv ** 2)
        return int(min(hi, max(1, round(rng.lognormvariate(math.log(mean) - s2 / 2, math.sqrt(s2))))))

    out = []
    for _ in range(n):
        gap = rng.expovariate(1.0)
        sid = rng.randrange(w.system_prompts) if w.system_prompts and w.system_prompt_tokens else 0
        turns = []
        for k in range(w.turns):
            x = length(w.prompt_mean_tokens, w.prompt_cv, w.prompt_max_tokens)
            y = length(w.output_mean_tokens, w.output_cv, w.output_max_tokens)
            think = w.think_mean_s * rng.expovariate(1.0) if k and w.think_mean_s > 0 else 0.0
            turns.append((x, y, think))
        out.append((gap, sid, turns))
    return out


@pytest.mark.parametrize("name", ["chat", "coding-agent", "realtime-voice"])
def test_multi_turn_sessions_follow_the_seeds_draw_order(name):
    # the reference's workload.py: one random.Random(1) for the whole workload, sessions drawn up front in order
    w = load_workloads()[name]
    want = _seed_draws(w, 40)
    s = sample_sessions(w, 40, seed=1)
    np.testing.assert_allclose(s.start_unit, np.cumsum([g for g, _, _ in want]), rtol=1e-15)
    np.testing.assert_array_equal(s.system_id, [sid for _, sid, _ in want])
    for f, k in (("new_input", 0), ("output", 1), ("think_s", 2)):
        np.testing.assert_array_equal(getattr(s, f), [[t[k] for t in turns] for _, _, turns in want], err_msg=f)
    assert s.new_input.shape == (40, w.turns) and (s.think_s[:, 0] == 0).all() and (s.think_s[:, 1:] > 0).all()


def test_fixed_lengths_draw_nothing():
    # cv = 0: the length is its mean and takes no draw, so the other draws are the seed's in the same order
    w = dataclasses.replace(load_workloads()["realtime-voice"], prompt_cv=0.0, prompt_mean_tokens=100.4)
    s = sample_sessions(w, 30)
    want = _seed_draws(w, 30)
    assert (s.new_input == 100).all()
    np.testing.assert_array_equal(s.output, [[t[1] for t in turns] for _, _, turns in want])


def test_trace_workloads_keep_the_block_sampler(tmp_path):
    # A trace's rows are resampled from numpy.random.default_rng([seed, block]), 1,024 sessions a block.
    from sweepkit.serving.requests import _block

    (tmp_path / "t.csv").write_text("input_tokens,output_tokens\n100,10\n200,20\n300,30\n")
    p = tmp_path / "w.toml"
    p.write_text('[workloads.replay]\nsource = "my trace"\ntrace = "t.csv"\nturns = 2\nthink_mean_s = 1\n'
                 'ttft_slo_s = 1\ntpot_slo_s = 0.05\n')
    w = load_workloads(p)["replay"]
    b = _block(w, 1, 0)
    s = sample_sessions(w, 10)
    np.testing.assert_array_equal(s.new_input, b["x"][:10])
    np.testing.assert_array_equal(s.start_unit, np.cumsum(b["gaps"])[:10])
