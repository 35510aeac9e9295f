"""Serving simulator: queues, continuous batching, sessions and SLOs on top of the per-pass cost model.

Pipeline position: catalogue -> cost model -> **serving simulation** -> warehouse -> queries -> reports.
Workloads, levers and the cluster are data (``data/*.toml``); the simulator is one ``jax.lax.while_loop`` over
every instance of one configuration at one load (a lane); each lane is its own call of a compiled program, on a
pool of threads (:mod:`sweepkit.serving.programs`). See docs/serving.md.
"""
