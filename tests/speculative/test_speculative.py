"""Speculative-decoding closed forms against Leviathan et al. 2023 (arXiv 2211.17192 v2)."""

import jax.numpy as jnp
import numpy as np
import pytest

from sweepkit.speculative import expected_tokens, improvement_factor, operations_factor, optimal_gamma

# Leviathan et al. 2023, Table 1 (sec. 3.5), c = c_hat = 0: (alpha, gamma, operations, speed) as printed.
TABLE_1 = [(0.6, 2, 1.53, 1.96), (0.7, 3, 1.58, 2.53), (0.8, 2, 1.23, 2.44),
           (0.8, 5, 1.63, 3.69), (0.9, 2, 1.11, 2.71), (0.9, 10, 1.60, 6.86)]


@pytest.mark.parametrize("alpha, gamma, ops, speed", TABLE_1)
def test_leviathan_table_1_to_the_printed_digits(alpha, gamma, ops, speed):
    assert round(float(improvement_factor(alpha, gamma, 0.0)), 2) == speed     # Thm 3.8
    assert round(float(operations_factor(alpha, gamma, 0.0)), 2) == ops        # Thm 3.11


def test_expected_tokens_is_the_geometric_sum():
    # Eq. (1) = sum_{i=0}^{gamma} alpha^i.
    for alpha in (0.0, 0.2, 0.5, 0.7, 0.95):
        for gamma in range(0, 9):
            assert float(expected_tokens(alpha, gamma)) == pytest.approx(sum(alpha ** i for i in range(gamma + 1)),
                                                                         rel=1e-6)


def test_alpha_one_limit_and_continuity():
    assert float(expected_tokens(1.0, 3)) == 4.0
    assert float(expected_tokens(1.0 - 1e-7, 3)) == pytest.approx(4.0, rel=1e-5)
    assert float(expected_tokens(1.0 - 1e-3, 3)) == pytest.approx(sum((1 - 1e-3) ** i for i in range(4)), rel=1e-6)


def test_realistic_c_lowers_the_row():
    # Leviathan et al. 2023 (arXiv 2211.17192), computed from Thm 3.8: alpha 0.7, gamma 3: c = 0.02 -> 2.39x, c = 0.05 -> 2.20x.
    assert round(float(improvement_factor(0.7, 3, 0.02)), 2) == 2.39
    assert round(float(improvement_factor(0.7, 3, 0.05)), 2) == 2.20


def test_bigram_example():
    # Leviathan sec. 3.6: EnDe bigram, alpha ~ 0.2, gamma 3 -> 1.25x (computed 1.248).
    assert float(improvement_factor(0.2, 3, 0.0)) == pytest.approx(1.248, abs=1e-3)


def test_optimal_gamma_is_the_brute_force_argmax():
    for alpha in np.linspace(0.05, 0.95, 10):
        for c in (0.0, 0.01, 0.05, 0.2, 0.5):
            g, best = optimal_gamma(alpha, c, 16)
            # float64 brute force of Thm 3.8; near-ties (1e-5) may resolve either way in float32.
            values = [(1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + 1)) for k in range(1, 17)]
            top = max(values)
            assert values[int(g) - 1] >= top * (1 - 1e-5)
            assert all(v < top * (1 - 5e-7) for v in values[: int(g) - 1])   # no shorter gamma is as good
            assert float(best) == pytest.approx(values[int(g) - 1], rel=1e-5)


def test_corollary_3_9_lower_bound():
    # Cor 3.9: if alpha > c, the best gamma improves by at least (1 + alpha) / (1 + c).
    for alpha, c in [(0.3, 0.1), (0.6, 0.5), (0.9, 0.05)]:
        assert float(optimal_gamma(alpha, c)[1]) >= (1 + alpha) / (1 + c) - 1e-6


def test_vectorised_over_arrays():
    alpha = jnp.linspace(0.0, 1.0, 11)
    out = expected_tokens(alpha, 3)
    assert out.shape == (11,) and float(out[0]) == 1.0 and float(out[-1]) == 4.0
