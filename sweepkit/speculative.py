"""Closed forms of speculative decoding (Leviathan, Kalman, Matias, ICML 2023, arXiv 2211.17192 v2).

A draft proposes gamma tokens; the target checks them in one pass and keeps the accepted run plus one token
of its own. Each drafted token is accepted i.i.d. with probability alpha. All functions take arrays
(broadcasting) and contain no Python branching on values, so they jit and vmap.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

TIE_RTOL = 1e-6
"""Relative tolerance under which two gammas' improvements count as equal in :func:`optimal_gamma`."""

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
    dtype = alpha.dtype if jnp.issubdtype(alpha.dtype, jnp.floating) else jnp.result_type(float)
    alpha = alpha.astype(dtype)
    n = jnp.asarray(gamma).astype(dtype) + 1.0
    one_minus = 1.0 - alpha                     # exact for alpha in [0.5, 1] (Sterbenz)
    at_one = one_minus == 0
    safe = jnp.where(at_one, 0.5, one_minus)
    # 1 - alpha^n = -expm1(n log1p(-(1 - alpha))): no cancellation as alpha -> 1.
    closed = -jnp.expm1(n * jnp.log1p(-safe)) / safe
    # Mathematically 1 <= E <= gamma + 1; clip the last-ulp rounding so the bounds hold exactly.
    return jnp.where(at_one, n, jnp.clip(closed, 1.0, n))


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
    """The integer gamma in [1, gamma_max] maximising Theorem 3.8 (near-ties go to the smaller gamma).

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
    top = jnp.max(grid, axis=0)
    # The smallest gamma within TIE_RTOL of the best: float noise never buys a longer draft.
    best = jnp.argmax(grid >= top * (1.0 - TIE_RTOL), axis=0)
    return (best + 1).astype(jnp.int32), jnp.take_along_axis(grid, best[None], axis=0)[0]
