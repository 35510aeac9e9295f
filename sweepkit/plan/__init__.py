"""``sweepkit plan``: the deployment to run, searched over layouts, batching, KV, formats and speculation.

Two stages: an analytic screen of every configuration (:mod:`sweepkit.plan.screen`, vmapped in JAX), then
the serving engine's capacity search on the survivors, best bound first, until no remaining bound can beat
the simulated best (:mod:`sweepkit.plan.search`); the Pareto frontier and lever contributions of what was
simulated (:mod:`sweepkit.plan.frontier`).
"""
