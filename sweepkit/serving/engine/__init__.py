"""The cluster engine: one lane (one configuration at one load) simulated as one ``jax.lax.while_loop``.

Everything that runs inside the compiled program lives here; the driver (workloads, levers, capacity search,
lanes, programs, metrics) lives in :mod:`sweepkit.serving` and uses the engine only through the names below.

Example:
  >>> from sweepkit.serving.engine import simulate
  >>> state = simulate(policy, requests, load, shape)      # doctest: +SKIP
"""

from sweepkit.serving.engine.loop import MISS_SHARE, simulate
from sweepkit.serving.engine.state import CHUNKED, COLOCATED, DECODE_POOL, DECODE_PRIORITY, LEAST_LOADED, \
    LEAST_OUTSTANDING, PREFILL_POOL, PREFILL_PRIORITY, SESSION, Load, Policy, Requests, Shape, State, bin_centres_s

__all__ = [
    "simulate", "State", "Policy", "Requests", "Load", "Shape", "MISS_SHARE", "bin_centres_s",
    "PREFILL_PRIORITY", "DECODE_PRIORITY", "CHUNKED", "LEAST_LOADED", "SESSION", "LEAST_OUTSTANDING",
    "COLOCATED", "PREFILL_POOL", "DECODE_POOL",
]
