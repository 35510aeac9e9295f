"""Closed forms of speculative decoding (Leviathan, Kalman, Matias, ICML 2023, arXiv 2211.17192 v2).

A draft proposes gamma tokens; the target checks them in one pass and keeps the accepted run plus one token
of its own. Each drafted token is accepted i.i.d. with probability alpha. All functions take arrays
(broadcasting) and contain no Python branching on values, so they jit and vmap.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_ONE_EPS = 1e-6


def expected_tokens(alpha, gamma):
    """Expected tokens per verify pass, E = (1 - alpha^(gamma+1)) / (1 - alpha).

    The number of tokens a pass yields is a capped geometric: accepted drafts k ~ min(Geom, gamma), plus one.
    E = sum_{i=0}^{gamma} alpha^i, whose alpha -> 1 limit is gamma + 1.

    Args:
      alpha: acceptance probability per drafted token, in [0, 1].
      gamma: draft length, integer >= 0.

    Returns:
      E[tokens per pass], in [1, gamma + 1].

    Example:
      >>> round(float(expected_tokens(0.7, 3)), 4)
      2.533

    References:
      Leviathan et al. 2023, sec. 3.1, Eq. (1).
    """
    alpha = jnp.asarray(alpha)
    gamma = jnp.asarray(gamma, dtype=alpha.dtype if jnp.issubdtype(alpha.dtype, jnp.floating) else None)
    near_one = jnp.abs(1.0 - alpha) < _ONE_EPS
    safe = jnp.where(near_one, 0.5, alpha)
    closed = (1.0 - safe ** (gamma + 1.0)) / (1.0 - safe)
    # Near alpha = 1 use the first-order expansion of sum alpha^i around 1: (g+1) - (1-a) g (g+1) / 2.
    limit = (gamma + 1.0) - (1.0 - alpha) * gamma * (gamma + 1.0) / 2.0
    return jnp.where(near_one, limit, closed)


def improvement_factor(alpha, gamma, c):
    """Expected walltime improvement, (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)).

    Args:
      alpha: acceptance rate in [0, 1].
      gamma: draft length, integer >= 0.
      c: cost coefficient, time of one draft run over one target run, >= 0.

    Returns:
      Speed-up over plain decoding (assumes the gamma + 1 target positions cost one target run).

    Example:
      >>> round(float(improvement_factor(0.7, 3, 0.0)), 2)
      2.53

    References:
      Leviathan et al. 2023, Theorem 3.8; Table 1 (c = 0).
    """
    return expected_tokens(alpha, gamma) / (jnp.asarray(gamma) * c + 1.0)


def operations_factor(alpha, gamma, c_hat):
    """Expected increase in arithmetic operations, (1 - alpha)(gamma c_hat + gamma + 1) / (1 - alpha^(gamma+1)).

    Args:
      alpha: acceptance rate in [0, 1].
      gamma: draft length, integer >= 0.
      c_hat: arithmetic operations per token of the draft over the target, >= 0.

    Returns:
      Operations with speculation / operations without.

    Example:
      >>> round(float(operations_factor(0.7, 3, 0.0)), 2)
      1.58

    References:
      Leviathan et al. 2023, Theorem 3.11; Table 1 (c_hat = 0).
    """
    return (jnp.asarray(gamma) * c_hat + gamma + 1.0) / expected_tokens(alpha, gamma)


def optimal_gamma(alpha, c, gamma_max: int = 16):
    """The integer gamma in [1, gamma_max] maximising Theorem 3.8 (ties go to the smaller gamma).

    Args:
      alpha: acceptance rate in [0, 1].
      c: cost coefficient >= 0.
      gamma_max: largest gamma searched (static Python int).

    Returns:
      (gamma*, improvement at gamma*), arrays shaped like broadcast(alpha, c).

    Example:
      >>> int(optimal_gamma(0.8, 0.05)[0])
      8

    References:
      Leviathan et al. 2023, sec. 3.5 ("since gamma is an integer, it can be easily found numerically"), Fig. 3.
    """
    alpha, c = jnp.broadcast_arrays(jnp.asarray(alpha, dtype=float), jnp.asarray(c, dtype=float))
    gammas = jnp.arange(1, gamma_max + 1, dtype=alpha.dtype)
    grid = jax.vmap(lambda g: improvement_factor(alpha, g, c))(gammas)
    best = jnp.argmax(grid, axis=0)
    return (best + 1).astype(jnp.int32), jnp.max(grid, axis=0)
