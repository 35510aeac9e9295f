"""Acceptance models: closed forms, invariants, the published tables, the sampler and the acceptance file."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweepkit.acceptance import (expected_tokens_np, iid_alpha_from_tau, load_acceptance, sample_accepted,
                                 workload_alphas)
from sweepkit.errors import InputError
from sweepkit.serving.requests import accepted_drafts, uniform_hash
from sweepkit.speculative import (accepted_share, alpha_from_tau, conditional_alphas, decaying_alphas,
                                  expected_tokens, expected_tokens_positional, improvement_factor,
                                  improvement_factor_positional, operations_factor, operations_factor_positional,
                                  optimal_gamma, optimal_gamma_positional)

alpha = st.floats(0.0, 1.0)
EAGLE_70B = [0.75, 0.69, 0.65, 0.64, 0.64]     # EAGLE (arXiv 2401.15077) Table 2, LLaMA2-Chat-70B, chain, T = 0


def test_equal_alphas_reduce_to_leviathan_in_float64():
    with jax.enable_x64(True):
        for a in (0.0, 0.3, 0.7, 0.95, 1.0):
            for g in range(0, 9):
                alphas = jnp.full(9, a, jnp.float64)
                assert float(expected_tokens_positional(alphas, g)) == pytest.approx(float(expected_tokens(a, g)),
                                                                                    rel=1e-12)
                assert float(improvement_factor_positional(alphas, g, 0.05)) == pytest.approx(
                    float(improvement_factor(a, g, 0.05)), rel=1e-12)
                assert float(operations_factor_positional(alphas, g, 0.02)) == pytest.approx(
                    float(operations_factor(a, g, 0.02)), rel=1e-12)
            gp, vp = optimal_gamma_positional(jnp.full(16, a, jnp.float64), 0.05)
            gi, vi = optimal_gamma(a, 0.05, 16)
            assert int(gp) == int(gi) and float(vp) == pytest.approx(float(vi), rel=1e-12)


_expected = jax.jit(expected_tokens_positional)


@given(st.lists(alpha, min_size=8, max_size=8), st.integers(0, 8))
def test_expected_tokens_within_one_and_gamma_plus_one(alphas, gamma):
    e = float(_expected(jnp.asarray(alphas), gamma))
    assert 1.0 <= e <= gamma + 1.0


@given(st.lists(alpha, min_size=8, max_size=8), st.integers(0, 7), st.floats(0.0, 1.0), st.integers(0, 8))
def test_expected_tokens_non_decreasing_in_every_alpha(alphas, i, bump, gamma):
    raised = list(alphas)
    raised[i] = alphas[i] + (1.0 - alphas[i]) * bump
    with jax.enable_x64(True):
        assert float(_expected(jnp.asarray(raised), gamma)) >= float(_expected(jnp.asarray(alphas), gamma))


@given(st.floats(0.0, 1.0), st.integers(1, 16))
def test_tau_to_alpha_inverts_eq_1(a, gamma):
    with jax.enable_x64(True):
        tau = expected_tokens(jnp.float64(a), gamma)
        back = alpha_from_tau(tau, gamma)
        assert abs(float(expected_tokens(back, gamma)) - float(tau)) < 1e-9
        assert abs(iid_alpha_from_tau(float(tau), gamma) - float(back)) < 1e-9      # numpy twin
    assert np.isnan(float(alpha_from_tau(0.5, 3))) and np.isnan(float(alpha_from_tau(4.5, 3)))


def test_eagle_chain_drafts_of_1_to_7_tokens_against_the_papers_chain_tau():
    # Per-position rates (conditional, chain); positions 6..7 repeat the last rate. The paper's chain tau for
    # LLaMA2-Chat-70B is 3.12 (EAGLE Table 5); its Table 2 tau 3.81 is for tree drafts and is not reachable.
    with jax.enable_x64(True):
        alphas = jnp.asarray(EAGLE_70B + [0.64, 0.64])
        e = [round(float(expected_tokens_positional(alphas, g)), 3) for g in range(1, 8)]
    assert e == [1.75, 2.268, 2.604, 2.819, 2.957, 3.045, 3.102]
    assert abs(e[-1] - 3.12) < 0.02 and e[-1] < 3.81


def test_unconditional_rates_are_not_alpha():
    # vLLM #26191 (EAGLE-3, Llama-3.1-8B, MT-Bench, K = 7): acceptance length 3.53; 12,208 of 33,712 drafted
    # tokens accepted (0.362). The i.i.d. alpha that gives 3.53 is 0.743; the share is (E - 1) / gamma.
    with jax.enable_x64(True):
        a = float(alpha_from_tau(3.53, 7))
        assert round(a, 3) == 0.743
        assert float(accepted_share(jnp.full(7, a))) == pytest.approx(12208 / 33712, abs=2e-3)
        p = jnp.cumprod(jnp.asarray(EAGLE_70B))                 # unconditional "acceptance at token i"
        np.testing.assert_allclose(conditional_alphas(p), EAGLE_70B, rtol=1e-12)


def test_decaying_model():
    a = decaying_alphas(0.8, 1.0, 6)
    assert float(expected_tokens_positional(a)) == pytest.approx(float(expected_tokens(0.8, 6)), rel=1e-6)
    np.testing.assert_allclose(decaying_alphas(0.8, 0.5, 3), [0.8, 0.4, 0.2], rtol=1e-6)
    grid = jax.vmap(lambda a1, r: expected_tokens_positional(decaying_alphas(a1, r, 4), 3))(
        jnp.array([0.6, 0.8]), jnp.array([0.9, 1.0]))
    assert grid.shape == (2,) and float(grid[1]) == pytest.approx(float(expected_tokens(0.8, 3)), rel=1e-6)


def test_sampler_survival_matches_the_model_and_the_iid_sampler():
    rng = np.random.default_rng(0)
    u = rng.random((4000, 50))
    alphas = np.array(EAGLE_70B[:3])
    k = sample_accepted(u, alphas)
    for j in range(1, 4):
        assert (k >= j).mean() == pytest.approx(np.prod(alphas[:j]), abs=0.01)
    assert (k + 1).mean() == pytest.approx(expected_tokens_np(alphas), rel=0.01)
    # Equal alphas: the serving engine's i.i.d. sampler, same uniforms (common random numbers).
    uh = uniform_hash(0, np.arange(500)[:, None], np.arange(40)[None, :])
    mismatch = (sample_accepted(uh, np.full(3, 0.7)) != accepted_drafts(uh, 0.7, 3)).mean()
    assert mismatch < 1e-3
    per_request = sample_accepted(u[:2], np.array([[1.0, 1.0], [0.0, 1.0]]))
    assert per_request[0].tolist() == [2] * 50 and per_request[1].tolist() == [0] * 50


def test_packaged_acceptance_file():
    cat = load_acceptance()
    assert cat.tables["eagle-llama2-chat-70b"].alphas == tuple(EAGLE_70B)
    for workload in ("chat", "coding-agent", "offline-batch", "long-context-rag", "realtime-voice"):
        for draft in ("mtp", "llama-3.2-1b"):
            alphas, model = workload_alphas(workload, draft, 4, cat)
            assert alphas.shape == (4,) and model.source
    code, chat = workload_alphas("coding-agent", "mtp", 3)[0], workload_alphas("chat", "mtp", 3)[0]
    assert expected_tokens_np(code) > expected_tokens_np(chat)        # code accepts more than chat
    # The mtp domain scale: E(s x EAGLE table, gamma 5) / E(table, 5) = EAGLE-3 tau ratio (Table 1, 8B).
    for workload, ratio in (("coding-agent", 6.74 / 6.13), ("long-context-rag", 5.34 / 6.13)):
        scaled = workload_alphas(workload, "mtp", 5)[0]
        assert expected_tokens_np(scaled) / expected_tokens_np(EAGLE_70B) == pytest.approx(ratio, abs=1e-3)


@pytest.mark.parametrize("text, message", [
    ("[tables.x]\nalpha = 1.5\nsource = 's'", "tables.x.alpha = 1.5 is not allowed; expected a number in [0, 1]"),
    ("[tables.x]\nalpha = 0.5", "tables.x.source = None is not allowed"),
    ("[tables.x]\nalpha = 0.5\nalphas = [0.5]\nsource = 's'", "tables.x gives 2 models"),
    ("[tables.x]\ntau = 2.0\nsource = 's'", "tables.x has tau but no tau_gamma"),
    ("[tables.x]\ntau = 9.0\ntau_gamma = 3\nsource = 's'", "tables.x.tau = 9.0 is not allowed"),
    ("[workloads.chat]\nmtp = 'nope'", "workloads.chat.mtp.table = 'nope' is not allowed"),
    ("[workloads.chat]\ntree = { alpha = 0.5, source = 's' }", "workloads.chat.tree = 'tree' is not allowed"),
    ("[tables.x]\nalpha = 0.5\nsource = 's'\ncolour = 1", "tables.x.colour = 1 is not allowed"),
])
def test_bad_acceptance_files_give_one_line(tmp_path, text, message):
    path = tmp_path / "acc.toml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_acceptance(path)
    assert message in str(err.value) and "\n" not in str(err.value) and str(path) in str(err.value)
    with pytest.raises(InputError, match="chat"):
        workload_alphas("nosuch", "mtp", 3)


@given(st.lists(alpha, min_size=4, max_size=4), st.integers(0, 3), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_sampler_is_monotone_in_every_alpha_with_common_random_numbers(alphas, i, bump, seed):
    u = np.random.default_rng(seed).random((8, 16))
    raised = np.array(alphas)
    raised[i] += (1.0 - raised[i]) * bump
    low, high = sample_accepted(u, np.array(alphas)), sample_accepted(u, raised)
    assert np.all(low <= high) and low.min() >= 0 and high.max() <= 4
