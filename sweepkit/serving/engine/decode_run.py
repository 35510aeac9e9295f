"""A run of consecutive decode steps priced and applied in one boundary, where nothing can change between them.

When an instance's next step is a pure decode step (no prompt to compute, nothing to admit, nothing swapped
out, no preemption) its batch cannot change until a row finishes or a request arrives: a queued request that
cannot be admitted now stays blocked (memory and rows only tighten while rows grow), and an arrival is seen
only at a boundary. So up to K steps are formed at once: step j of each row emits its accepted drafts + 1
(or 1), its cached context grows by what the rows emitted before it, and the run stops

* at the first step in which a row finishes (that step is the run's last), unless nothing could take the
  finished row's place (``extend``: the queue is empty, or under decode priority rows still run, and every
  busy row decodes): then the run goes on with
  the rows left, each step priced for them, and stops before the first step that ends after a finished row's
  next turn is released (its finish + think time), so that the turn is routed when it arrives; after the
  last row finishes, the run ends. With the prefix cache a run goes on past a finish only while nothing in it
  is evicted: at every step the rows' KV (finished rows' too), the whole cache and the segments the finished
  rows leave in it fit, so each finish's segment enters the cache and its chain is unpinned as at a boundary
  of its own (stamped with its finish), and the cache's LRU order is the same;
* before the first step whose paged growth would not fit.

A row that finishes inside the run finishes at its step's end (:func:`sweepkit.serving.engine.complete.complete`), and
until the run lands the router counts it as gone from the end of that step (:func:`finished_by`).

The plan is kept on the instance and lands at its end (:func:`sweepkit.serving.engine.phases.complete`); a request
routed to the instance while it runs cuts the plan at the first step ending at or after its arrival
(:func:`sweepkit.serving.engine.loop.route`), so every arrival meets a boundary exactly as with single
steps (under decode priority, which admits nothing while a row runs, only a pulled hand-off cuts it). With n = 1 this is exactly one decode step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.passes import Work
from sweepkit.costmodel.steps import step_cost
from sweepkit.serving.engine.records import Run
from sweepkit.serving.engine.state import RUN_STEPS
from sweepkit.serving.engine.updates import rows_updated



def no_run(like):
    """The plan of no run (n = 0), shaped as :func:`decode_run`'s, for the branch that plans none."""
    K = RUN_STEPS
    zk, zks = jnp.zeros((K,), like.dtype), jnp.zeros((K,) + like.shape, like.dtype)
    return Run(n=jnp.zeros((), jnp.int32), dt=zk, en=zk, E=zks, alloc=zks, fin=zk, kv_delta=zk,
               fin_at=jnp.zeros(like.shape, jnp.int32), held=zk)


def decode_run(pol, req, r, dec, accepted, other_units, cached, t, extend, first_free, shape):
    """Plan a run of up to K decode steps of the ``dec`` rows.

    Args:
      r: the instance's rows.  dec: [S] rows in the step.  accepted: fn(rid, position) -> drafts accepted.
      other_units: KV units held outside the decode rows (other rows and pinned cache).  cached: (KV units
      held outside the decode rows counting the whole prefix cache, [S] units each row's finish leaves in
      the cache, whether every step must keep all of it in memory (no eviction in the run)); without the
      prefix cache (other_units, zeros, False).  t: the run's start,
      s.  extend: whether the run may go on past a row's finish (nothing could take its place).  first_free:
      whether the first step runs whatever its paged growth (it was checked, or rows preempted, before); else
      it too must fit (a run planned after a prefill step: n is then 0 where it does not).

    Returns:
      :class:`~sweepkit.serving.engine.records.Run`: n (steps that may run), dt [K] and en [K] (seconds and dynamic joules of each step), E [K, S]
      (tokens each row emits in each step), alloc [K, S] (units after each step's growth), fin [K] (rows
      finishing in each step), kv_delta [K] (KV units held in each step less those held in the first: the
      rows' growth, less the rows finished earlier in the run, plus the segments they left in the cache),
      fin_at [S] (the step a row finishes in; K: none), held [K] (KV units the run's rows hold in each step).
    """
    K = RUN_STEPS
    rid = jnp.maximum(r.rid, 0)
    p = req.prompt_tokens[rid].astype(jnp.float64)
    o = req.output_tokens[rid].astype(jnp.float64)
    rem = jnp.where(dec, o - r.out, 0.0)
    steps = jnp.arange(K, dtype=jnp.int32)

    def emit(carry, j):
        cum, at = carry
        e = jnp.where(dec, jnp.clip(accepted(rid, r.out + cum) + 1.0, 0.0, rem - cum), 0.0)
        at = jnp.where(dec & (cum < rem) & (cum + e >= rem), j, at)
        return (cum + e, at), (e, cum)

    def drafted():
        # A loop, not unrolled: unrolled, XLA:CPU fuses every step's draws into each later step's (quadratic).
        (_, at), (E, before) = jax.lax.scan(emit, (jnp.zeros_like(rem), jnp.full(rem.shape, K, jnp.int32)), steps)
        return E, before, at

    def plain():      # nothing accepted: one token a step while the row has any left (rem is a whole number)
        j = steps.astype(rem.dtype)[:, None]
        E = jnp.where(dec[None, :] & (j < rem[None, :]), 1.0, 0.0)
        return E, jnp.minimum(j, rem[None, :]), jnp.where(dec, jnp.minimum(rem - 1.0, K), K).astype(jnp.int32)

    # E, before [K, S]: tokens each row emits in step j and before it; at [S]: the step it finishes in (K: none)
    E, before, at = jax.lax.cond(jnp.any(pol.accept_survival > 0), drafted, plain) if shape.gamma_max > 0 else plain()
    j_fin = jnp.min(at)
    (fin,) = rows_updated([(jnp.zeros((K,)), at, 1.0, "add")])   # rows finishing in step j
    rows = jnp.sum(dec) - (jnp.cumsum(fin) - fin)               # rows still decoding in step j
    ctx = jnp.sum(jnp.where(dec[None, :] & (steps[:, None] <= at[None, :]), (p + r.out)[None, :] + before, 0.0), axis=1)
    none = Work(jnp.zeros(()), jnp.zeros(()), jnp.zeros(()))
    dt, en = jax.vmap(lambda c, b: step_cost(pol.inst, c, b, none, shape.gamma_max))(ctx, rows)
    ends = t + jnp.cumsum(dt)
    pos = jnp.minimum((p + r.out)[None, :] + before + pol.inst.gamma, (p + o)[None, :]) - r.hit[None, :]
    grown = jnp.maximum(jnp.ceil(pos / pol.block_tokens) + pol.state_units, r.alloc[None, :])
    need = jnp.where((dec & (pol.paged > 0))[None, :], grown, r.alloc[None, :])
    held_all = jnp.sum(jnp.where(dec[None, :], need, 0.0), axis=1)   # by every row, finished ones at their last
    outside, left, strict = cached
    # by step j: the earliest next-turn release, the units freed and those cached at its end (rows finishing)
    released, freed, left_at = rows_updated([(jnp.full((K,), jnp.inf), at, _releases(req, rid, at, ends), "min"),
                                             (jnp.zeros((K,)), at, need[K - 1], "add"),
                                             (jnp.zeros((K,)), at, jnp.where(dec, left, 0.0), "add")])
    held = held_all - (jnp.cumsum(freed) - freed)                  # less the rows finished in earlier steps
    released_by = jnp.concatenate([jnp.full((1,), jnp.inf), jax.lax.cummin(released)[:-1]])
    room = jnp.cumprod(outside + held_all + jnp.cumsum(left_at) <= pol.kv_units) > 0
    past = extend & (rows > 0) & (ends <= released_by) & ((pol.prefix <= 0) | room)
    on = (((steps <= j_fin) | past) & ((other_units + held <= pol.kv_units) | ((steps == 0) & first_free))
          & (~strict | room))
    n = jnp.sum(jnp.cumprod(on)).astype(jnp.int32)
    kv_delta = held - held[0] + jnp.cumsum(left_at) - left_at
    return Run(n=n, dt=dt, en=en, E=E, alloc=need, fin=fin, kv_delta=kv_delta, fin_at=at, held=held)


def _releases(req, rid, at, ends):
    """[S] when each row's next turn is released if it finishes in step ``at`` of the run (its end + think
    time; inf: it does not finish, or it was its session's last turn)."""
    K = ends.shape[0]
    nxt = jnp.minimum(rid + req.stride, req.think_s.shape[0] - 1)
    more = (rid // req.stride + 1 < req.turns) & (at < K)
    return jnp.where(more, ends[jnp.minimum(at, K - 1)] + req.think_s[nxt], jnp.inf)


def promoted_by(plan, t_s):
    """[I] prompts each instance's plan computed in its first step, ended before ``t_s``, that still sit in its
    rows as prompts until the plan lands: a run planned after a prefill step (``schedule``)."""
    return jnp.where((plan.n >= 1) & (plan.ends[:, 0] < t_s), plan.promoted, 0.0)


def finished_by(plan, t_s, ties):
    """[I] rows each instance's planned run has finished before ``t_s`` (and at ``t_s`` where ``ties``), but
    that still sit in its rows until the run lands: a run extended past a finish (``decode_run``)."""
    K = plan.dt.shape[-1]
    ends = plan.ends
    by = (ends < t_s) | ((ends == t_s) & ties[:, None])
    return jnp.sum(jnp.where(by & (jnp.arange(K)[None, :] < plan.n[:, None]), plan.fin, 0.0), axis=-1)
