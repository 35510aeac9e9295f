"""A run of consecutive decode steps priced and applied in one boundary, where nothing can change between them.

When an instance's next step is a pure decode step (no prompt to compute, nothing to admit, nothing swapped
out, no preemption) its batch cannot change until a row finishes or a request arrives: a queued request that
cannot be admitted now stays blocked (memory and rows only tighten while rows grow), and an arrival is seen
only at a boundary. So up to K steps are formed at once: step j of each row emits its accepted drafts + 1
(or 1), its cached context grows by what the rows emitted before it, and the run stops

* at the first step in which a row finishes (that step is the run's last),
* before the first step whose paged growth would not fit.

The plan is kept on the instance and lands at its end (:func:`sweepkit.serving.phases.complete`); a request
routed to the instance while it runs cuts the plan at the first step ending at or after its arrival
(:func:`sweepkit.serving.cluster_sim.route`), so every arrival meets a boundary exactly as with single
steps. With n = 1 this is exactly one decode step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.passes import Work
from sweepkit.costmodel.steps import step_cost
from sweepkit.serving.cluster_state import RUN_STEPS



def no_run(like):
    """The plan of no run (n = 0), shaped as :func:`decode_run`'s, for the branch that plans none."""
    K = RUN_STEPS
    zk, zks = jnp.zeros((K,), like.dtype), jnp.zeros((K,) + like.shape, like.dtype)
    return dict(n=jnp.zeros((), jnp.int32), dt=zk, en=zk, E=zks, alloc=zks)


def decode_run(pol, req, r, dec, accepted, other_units, shape):
    """Plan a run of up to K decode steps of the ``dec`` rows.

    Args:
      r: the instance's rows.  dec: [S] rows in the step.  accepted: fn(rid, position) -> drafts accepted.
      other_units: KV units held outside the decode rows (other rows and pinned cache).

    Returns:
      dict: n (steps that may run), dt [K] and en [K] (seconds and dynamic joules of each step), E [K, S]
      (tokens each row emits in each step), alloc [K, S] (units after each step's growth).
    """
    K = RUN_STEPS
    rid = jnp.maximum(r.rid, 0)
    p = req.prompt_tokens[rid].astype(jnp.float64)
    o = req.output_tokens[rid].astype(jnp.float64)
    rem = jnp.where(dec, o - r.out, 0.0)

    def emit(cum, _):
        e = jnp.where(dec, jnp.clip(accepted(rid, r.out + cum) + 1.0, 0.0, rem - cum), 0.0)
        return cum + e, e

    def drafted():
        # A loop, not unrolled: unrolled, XLA:CPU fuses every step's draws into each later step's (quadratic).
        return jax.lax.scan(emit, jnp.zeros_like(rem), None, length=K)[1]   # [K, S]

    def plain():      # nothing accepted: one token a step while the row has any left (rem is a whole number)
        return jnp.where(dec[None, :] & (jnp.arange(K, dtype=rem.dtype)[:, None] < rem[None, :]), 1.0, 0.0)

    E = jax.lax.cond(jnp.any(pol.accept_survival > 0), drafted, plain) if shape.gamma_max > 0 else plain()
    before = jnp.cumsum(E, axis=0) - E        # tokens emitted before step j
    finish = dec[None, :] & (before + E >= rem[None, :])
    j_fin = jnp.min(jnp.where(jnp.any(finish, axis=1), jnp.arange(K), K))
    rows = jnp.sum(dec).astype(jnp.float64)
    ctx = jnp.sum(jnp.where(dec[None, :], (p + r.out)[None, :] + before, 0.0), axis=1)
    none = Work(jnp.zeros(()), jnp.zeros(()), jnp.zeros(()))
    dt, en = jax.vmap(lambda c: step_cost(pol.inst, c, rows, none, shape.gamma_max))(ctx)
    pos = jnp.minimum((p + r.out)[None, :] + before + pol.inst.gamma, (p + o)[None, :]) - r.hit[None, :]
    grown = jnp.maximum(jnp.ceil(pos / pol.block_tokens), r.alloc[None, :])
    need = jnp.where((dec & (pol.paged > 0))[None, :], grown, r.alloc[None, :])
    fits = other_units + jnp.sum(jnp.where(dec[None, :], need, 0.0), axis=1) <= pol.kv_units
    j = jnp.arange(K)
    ok = (j <= j_fin) & (fits | (j == 0))
    n = jnp.maximum(jnp.sum(jnp.cumprod(ok)), 1).astype(jnp.int32)
    return dict(n=n, dt=dt, en=en, E=E, alloc=need)
