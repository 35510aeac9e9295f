"""Serving simulator: queues, continuous batching, sessions and SLOs on top of the per-pass cost model.

Pipeline position: catalogue -> cost model -> **serving simulation** -> warehouse -> queries -> reports.
Workloads, levers and the cluster are data (``data/*.toml``); the simulator is one ``jax.lax.while_loop`` per
instance, ``vmap``-ped over instances x loads x devices x levers. See docs/serving.md.
"""
