"""A Levenberg-Marquardt least-squares solver for the profile fit (:mod:`sweepkit.validation.profile_fit`).

Each step solves the damped normal equations with the Jacobian from ``jax.jacfwd``, one jitted program a
step; the accept / reject loop runs in Python. ``benchmarks/bench_fit_solver.py`` compares it with
optimistix's ``LevenbergMarquardt`` on the packaged fits (docs/validation.md, docs/performance.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def levenberg_marquardt(residuals, u0: jax.Array, iterations: int = 200) -> tuple[jax.Array, int]:
    """Minimise sum(residuals(u)^2) from ``u0``: Levenberg-Marquardt with Marquardt's diagonal scaling,
    the Jacobian from ``jax.jacfwd``; the damping falls x 0.3 after an accepted step and rises x 10 after a
    rejected one; stops when the cost falls by less than 1e-10 of itself, lambda exceeds 1e10, or after
    ``iterations`` steps.

        (J^T J + lambda diag(J^T J)) delta = -J^T r

    Args:
      residuals: u -> the residual vector (dimensionless; jax-traceable).
      u0: the start (the unconstrained parameters).
      iterations: the most steps taken.

    Returns:
      (u, steps taken).

    Example:
      >>> u, _ = levenberg_marquardt(lambda u: jnp.array([u[0] - 3.0, 10.0 * (u[1] - u[0] ** 2)]),
      ...                            jnp.array([0.0, 0.0]))
      >>> [round(float(x), 6) for x in u]
      [3.0, 9.0]

    References:
      Marquardt, "An Algorithm for Least-Squares Estimation of Nonlinear Parameters", SIAM J. Appl. Math.
      11 (1963) 431-441; Nocedal & Wright, "Numerical Optimization", sec. 10.3.
    """
    @jax.jit
    def step(u, lam):
        r = residuals(u)
        jac = jax.jacfwd(residuals)(u)
        jtj = jac.T @ jac
        delta = -jnp.linalg.solve(jtj + lam * jnp.diag(jnp.diag(jtj)) + 1e-9 * jnp.eye(u.size), jac.T @ r)
        return u + delta, jnp.sum(residuals(u + delta) ** 2), jnp.sum(r ** 2)

    u, lam, used = u0, 1e-2, 0
    for used in range(1, iterations + 1):  # noqa: B007 (the count is reported after the loop)
        u_new, c_new, c_old = step(u, lam)
        if float(c_new) < float(c_old):
            u, lam = u_new, max(lam * 0.3, 1e-9)
            if float(c_old) - float(c_new) < 1e-10 * float(c_old):
                break
        else:
            lam *= 10.0
            if lam > 1e10:
                break
    return u, used
