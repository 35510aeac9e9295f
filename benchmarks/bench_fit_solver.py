"""The profile fit's solver against optimistix's Levenberg-Marquardt, on the same least-squares problem.

Usage:  python benchmarks/bench_fit_solver.py [--framework vLLM] [--loss l2|cauchy] [--rtol 1e-6 ...]

The problem is ``sweepkit calibrate --framework X``'s on the packaged corpus (the framework's train rows that
may be fitted on, started from the seed profile: :func:`sweepkit.validation.profile_fit.fit_problem`). It is
solved by sweepkit's :func:`sweepkit.validation.lm.levenberg_marquardt` (a jitted step, the loop in Python) and by
``optimistix.least_squares`` with ``optimistix.LevenbergMarquardt(rtol, atol=rtol)`` (the whole solve one
compiled program; github.com/patrick-kidger/optimistix), each twice in one process: the first call compiles,
the second reuses the program. For each it prints the steps taken, the final cost (the sum of squared
residuals the fit minimises), the median |error| % of the training rows, the wall seconds of each call and, for
optimistix, how far its parameters end from sweepkit's (the largest difference as a share of a field's range).
optimistix is not a dependency of sweepkit: without it the script prints sweepkit's solver alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _timed(solve) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = solve()
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--framework", default="vLLM", help="whose profile fit (default vLLM)")
    ap.add_argument("--loss", choices=("l2", "cauchy"), default="l2")
    ap.add_argument("--rtol", type=float, nargs="+", default=[1e-6], help="optimistix's rtol (= atol) values")
    ap.add_argument("--max-steps", type=int, default=2000, help="optimistix's step limit")
    args = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp

    from sweepkit.catalogue.efficiency import packaged_profile
    from sweepkit.validation import load_measurements
    from sweepkit.validation.framework_fit import fittable, framework_rows, with_kernel_time
    from sweepkit.validation.lm import levenberg_marquardt
    from sweepkit.validation.profile_fit import fit_problem
    from sweepkit.validation.serving_points import MAX_BATCH, TOKEN_BUDGET
    from sweepkit.validation.steady_rows import row_inputs

    points, _, _ = load_measurements(None)
    train = [m for m in framework_rows(points, args.framework, ()) if m.split == "train" and fittable(m)]
    if len(train) < 2:
        print(f"{args.framework}: {len(train)} training rows; a fit needs at least 2", file=sys.stderr)
        return 2
    with jax.enable_x64(True):
        prob = fit_problem(row_inputs(train, MAX_BATCH, TOKEN_BUDGET), [m.value_si for m in train],
                           [(m.device, m.compute_format) for m in train],
                           with_kernel_time(packaged_profile(), args.framework),
                           fit_token_budget=any(m.metric != "max_output_throughput" for m in train), loss=args.loss)

        def cost(u) -> float:
            return float(jnp.sum(prob.residuals(u) ** 2))

        def median_pct(u) -> float:
            return 100.0 * float(np.median(np.abs(np.expm1(np.asarray(prob.data(u))))))

        print(f"{args.framework}, loss {args.loss}: {len(train)} training rows, {prob.u0.size} parameters; "
              f"start: cost {cost(prob.u0):,.2f}, median |error| {median_pct(prob.u0):.2f} %")
        print("| solver | steps | cost | median abs. error % | first call s | second call s | parameters apart |")
        print("|---|---|---|---|---|---|---|")
        (u, steps), first = _timed(lambda: levenberg_marquardt(prob.residuals, prob.u0))
        _, second = _timed(lambda: levenberg_marquardt(prob.residuals, prob.u0))
        print(f"| sweepkit levenberg_marquardt | {steps} | {cost(u):,.4f} | {median_pct(u):.2f} | {first:.1f} | "
              f"{second:.1f} | - |")
        try:
            import optimistix as optx
        except ImportError:
            print("optimistix is not installed (pip install optimistix): sweepkit's solver only")
            return 0
        def fn(v, _):
            return prob.residuals(v)

        for rtol in args.rtol:
            solver = optx.LevenbergMarquardt(rtol=rtol, atol=rtol)

            def solve(solver=solver):
                sol = optx.least_squares(fn, solver, prob.u0,
                                         max_steps=args.max_steps, throw=False)
                sol.value.block_until_ready()
                return sol

            sol, first = _timed(solve)
            _, second = _timed(solve)
            print(f"| optimistix LevenbergMarquardt rtol {rtol:g} | {int(sol.stats['num_steps'])} | "
                  f"{cost(sol.value):,.4f} | {median_pct(sol.value):.2f} | {first:.1f} | {second:.1f} | "
                  f"{float(jnp.max(jnp.abs(jax.nn.sigmoid(sol.value) - jax.nn.sigmoid(u)))):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
