"""Closed forms of speculative decoding (Leviathan, Kalman, Matias, ICML 2023, arXiv 2211.17192 v2).

A draft proposes gamma tokens; the target checks them in one pass and keeps the accepted run plus one token
of its own. Three acceptance models:

- **i.i.d.**: each drafted token is accepted with probability alpha (Leviathan et al.);
- **per position**: alpha_i is the probability that draft position i is accepted *given* that positions
  1..i-1 were (EAGLE's "n-alpha", Li et al. 2024, arXiv 2401.15077, Table 2), so P(k >= j) = prod_{i<=j}
  alpha_i and E[tokens per pass] = 1 + sum_{k=1}^{gamma} prod_{i<=k} alpha_i;
- **decaying**: alpha_i = alpha_1 r^(i-1), a two-parameter shorthand for the per-position model.

With every alpha_i equal the per-position forms reduce to Leviathan's Eq. (1), Theorems 3.8 and 3.11.
The i.i.d. functions take arrays (broadcasting); the per-position ones are written for one point (alphas
``[P]``, a scalar gamma) and vmap. None branches in Python on values, so all jit and vmap.

Conventions (docs/acceptance.md): a measured mean acceptance length tau counts the bonus token, so tau = E
(:func:`alpha_from_tau`); a per-token *unconditional* rate, such as the share of all drafted tokens that
were accepted, is not alpha (:func:`accepted_share`, :func:`conditional_alphas`).
"""

from __future__ import annotations

from functools import partial

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


def _positions(alphas, gamma):
    """(alphas as floats [P], survival prod_{i<=k} alpha_i for k = 1..P with positions k > gamma zeroed, n)."""
    alphas = jnp.asarray(alphas)
    alphas = alphas.astype(alphas.dtype if jnp.issubdtype(alphas.dtype, jnp.floating) else jnp.result_type(float))
    n = alphas.shape[-1]
    survival = jnp.cumprod(alphas)
    g = n if gamma is None else jnp.asarray(gamma).astype(alphas.dtype)
    return alphas, jnp.where(jnp.arange(1, n + 1, dtype=alphas.dtype) <= g, survival, 0.0), g


def expected_tokens_positional(alphas, gamma=None):
    """Expected tokens per verify pass with per-position acceptance, E = 1 + sum_{k=1}^{gamma} prod_{i<=k} alpha_i.

    alpha_i is conditional: the probability that draft position i is accepted given that 1..i-1 were. The
    first rejection ends the pass, so P(k >= j) = prod_{i<=j} alpha_i and E[k + 1] sums these survivals.
    With alpha_i = alpha for all i this is Leviathan's Eq. (1), (1 - alpha^(gamma+1)) / (1 - alpha).

    Args:
      alphas: [P] conditional acceptance at draft positions 1..P, each in [0, 1] (one point; vmap for more).
      gamma: drafted tokens, integer in [0, P] (may be traced); None means P. Positions after gamma are unused.

    Returns:
      E[tokens per pass], a scalar in [1, gamma + 1], non-decreasing in every alpha_i.

    Example:
      >>> round(float(expected_tokens_positional(jnp.array([0.75, 0.69, 0.65, 0.64, 0.64]))), 3)
      2.957

    References:
      Leviathan et al. 2023 (arXiv 2211.17192), Eq. (1); Li et al. 2024, EAGLE (arXiv 2401.15077), Table 2
      (per-position "n-alpha", chain drafts).
    """
    _, survival, g = _positions(alphas, gamma)
    return jnp.clip(1.0 + jnp.sum(survival), 1.0, g + 1.0)


def decaying_alphas(alpha_1, r, n_positions: int):
    """Per-position acceptance alpha_i = alpha_1 r^(i-1), i = 1..n_positions (clipped to [0, 1]).

    Args:
      alpha_1: acceptance of the first draft position, in [0, 1] (scalar; vmap for more).
      r: decay per position, >= 0 (1 gives the i.i.d. model).
      n_positions: P, static Python int.

    Returns:
      [P] conditional acceptances.

    Example:
      >>> [round(float(a), 3) for a in decaying_alphas(0.8, 0.9, 3)]
      [0.8, 0.72, 0.648]

    References:
      A two-parameter fit of the declining per-position rates in EAGLE (arXiv 2401.15077), Table 2.
    """
    alpha_1, r = jnp.asarray(alpha_1, dtype=float), jnp.asarray(r, dtype=float)
    i = jnp.arange(n_positions, dtype=alpha_1.dtype)
    return jnp.clip(alpha_1 * r ** i, 0.0, 1.0)


def improvement_factor_positional(alphas, gamma, c):
    """Theorem 3.8 with per-position acceptance: E(alphas, gamma) / (gamma c + 1).

    Args:
      alphas: [P] conditional acceptances in [0, 1].  gamma: drafted tokens in [0, P].
      c: cost coefficient, one draft run over one target run, >= 0.

    Returns:
      Expected walltime improvement over plain decoding (scalar).

    Example:
      >>> round(float(improvement_factor_positional(jnp.full(3, 0.7), 3, 0.0)), 2)
      2.53

    References:
      Leviathan et al. 2023, Theorem 3.8 (E generalised to per-position acceptance).
    """
    return expected_tokens_positional(alphas, gamma) / (jnp.asarray(gamma) * c + 1.0)


def operations_factor_positional(alphas, gamma, c_hat):
    """Theorem 3.11 with per-position acceptance: (gamma c_hat + gamma + 1) / E(alphas, gamma).

    Args:
      alphas: [P] conditional acceptances in [0, 1].  gamma: drafted tokens in [0, P].
      c_hat: arithmetic operations per token of the draft over the target, >= 0.

    Returns:
      Operations with speculation / operations without (scalar).

    Example:
      >>> round(float(operations_factor_positional(jnp.full(3, 0.7), 3, 0.0)), 2)
      1.58

    References:
      Leviathan et al. 2023, Theorem 3.11 (E generalised to per-position acceptance).
    """
    return (jnp.asarray(gamma) * c_hat + gamma + 1.0) / expected_tokens_positional(alphas, gamma)


def optimal_gamma_positional(alphas, c):
    """The gamma in [1, P] maximising :func:`improvement_factor_positional` (near-ties go to the smaller gamma).

    Args:
      alphas: [P] conditional acceptances in [0, 1] (P = the longest draft searched).  c: cost coefficient >= 0.

    Returns:
      (gamma*, improvement at gamma*), scalars.

    Example:
      >>> int(optimal_gamma_positional(jnp.full(16, 0.8), 0.05)[0])
      8

    References:
      Leviathan et al. 2023, sec. 3.5 (gamma found numerically).
    """
    alphas, _, _ = _positions(alphas, None)
    gammas = jnp.arange(1, alphas.shape[-1] + 1, dtype=alphas.dtype)
    grid = (1.0 + jnp.cumsum(jnp.cumprod(alphas))) / (gammas * c + 1.0)
    best = jnp.argmax(grid >= jnp.max(grid) * (1.0 - TIE_RTOL))
    return (best + 1).astype(jnp.int32), grid[best]


@partial(jax.jit, static_argnames="iterations")
def alpha_from_tau(tau, gamma, iterations: int = 64):
    """The i.i.d. alpha whose E(alpha, gamma) equals a measured mean acceptance length tau.

    tau counts the bonus token (EAGLE's tau, vLLM's "mean acceptance length"), so tau = E in [1, gamma + 1].
    E is increasing in alpha, so bisection on [0, 1] (``iterations`` halvings: 2^-64) inverts it.

    Args:
      tau: mean tokens per verify pass, bonus token included, in [1, gamma + 1]; NaN outside.
      gamma: the draft length tau was measured at, integer >= 1.
      iterations: bisection steps (static; the function is jitted).

    Returns:
      alpha in [0, 1] with expected_tokens(alpha, gamma) = tau (to 1e-9 in float64).

    Example:
      >>> round(float(alpha_from_tau(3.53, 7)), 3)    # vLLM, EAGLE-3, Llama-3.1-8B, MT-Bench, K = 7
      0.743

    References:
      Leviathan et al. 2023, Eq. (1); vLLM issue #26191 (acceptance length 3.53 at K = 7).
    """
    tau, gamma = jnp.broadcast_arrays(jnp.asarray(tau, dtype=float), jnp.asarray(gamma, dtype=float))

    def step(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        low = expected_tokens(mid, gamma) < tau
        return jnp.where(low, mid, lo), jnp.where(low, hi, mid)

    lo, hi = jax.lax.fori_loop(0, iterations, step, (jnp.zeros_like(tau), jnp.ones_like(tau)))
    alpha = jnp.where(tau >= gamma + 1.0, 1.0, 0.5 * (lo + hi))
    return jnp.where((tau >= 1.0) & (tau <= gamma + 1.0), alpha, jnp.nan)


def accepted_share(alphas, gamma=None):
    """Share of drafted tokens that were accepted, (E - 1) / gamma: an unconditional rate, NOT alpha.

    Counters such as vLLM's "accepted / drafted tokens" report this. For i.i.d. alpha it is
    alpha (1 - alpha^gamma) / (gamma (1 - alpha)) < alpha; convert with :func:`alpha_from_tau` from
    tau = 1 + gamma x share instead.

    Args:
      alphas: [P] conditional acceptances in [0, 1].  gamma: drafted tokens in [1, P]; None means P.

    Returns:
      Accepted drafts per drafted token, in [0, 1].

    Example:
      >>> round(float(accepted_share(jnp.full(7, 0.743))), 3)  # vLLM #26191: 12,208 of 33,712 = 0.362
      0.361

    References:
      vLLM issue #26191 (EAGLE-3, Llama-3.1-8B, MT-Bench, K = 7).
    """
    alphas, _, g = _positions(alphas, gamma)
    return (expected_tokens_positional(alphas, gamma) - 1.0) / g


def conditional_alphas(unconditional):
    """Conditional per-position alpha_i from unconditional acceptance through position i, p_i / p_(i-1).

    vLLM's "acceptance at token i" is p_i = P(positions 1..i all accepted) = prod_{j<=i} alpha_j; EAGLE's
    "n-alpha" is the conditional alpha_i. alpha_i = 0 where p_(i-1) = 0.

    Args:
      unconditional: [P] p_1 >= p_2 >= ... in [0, 1].

    Returns:
      [P] conditional acceptances.

    Example:
      >>> [round(float(a), 3) for a in conditional_alphas(jnp.array([0.8, 0.6, 0.3]))]
      [0.8, 0.75, 0.5]

    References:
      vLLM spec-decode metrics (per-position acceptance); Li et al. 2024, EAGLE, Table 2 (n-alpha).
    """
    p = jnp.asarray(unconditional, dtype=float)
    before = jnp.concatenate([jnp.ones((1,), p.dtype), p[:-1]])
    return jnp.where(before > 0, p / jnp.where(before > 0, before, 1.0), 0.0)
