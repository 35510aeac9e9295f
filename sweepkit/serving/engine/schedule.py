"""The scheduling phase of a boundary: the batching policy forms the next step and prices it.

prefill-priority: admit whole prompts (FIFO, token budget, batch cap, memory); if any, one prefill step
(decode rows stall), else one decode step over every row. decode-priority: the same, but prompts are admitted
only when no row is running. chunked: one mixed step of every decode row (gamma + 1 tokens each of the budget),
partial prompts and new admissions within the token budget. Paged rows grow before decode and mixed steps.
A pure decode step plans a run of up to RUN_STEPS steps at once (:mod:`sweepkit.serving.engine.decode_run`); so does a
step computing prompts (whole, or the last chunks of chunked batching) where nothing could change at the
boundary after it (the step, then the run).

References:
  Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI 2024,
  arXiv:2403.02310 (stall-free chunked batching, Alg. 3); Leviathan et al., "Fast Inference from
  Transformers via Speculative Decoding", ICML 2023, arXiv:2211.17192 (acceptance, sec. 3).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.costmodel.passes import Work, chunk_work
from sweepkit.costmodel.steps import step_cost
from sweepkit.serving.engine.state import CHUNKED, COLOCATED, DECODE, DECODE_PRIORITY, FREE, PREFILL, PREFILL_POOL, \
    RESERVED, SWAPPED
from sweepkit.serving.engine.decode_run import decode_run, no_run
from sweepkit.serving.engine.kv_phases import grow, kv_used, not_preempted, parked_units, preempt
from sweepkit.serving.engine.prefix import lookup, offset, pin_chains, prompt_chains, unpinned_hit_units
from sweepkit.serving.engine.records import Candidates, Plan, Run
from sweepkit.serving.engine.row_order import masked_cumsum, uniform
from sweepkit.serving.engine.updates import add_at, first_true, set_at


def candidates(pol, req, iv, r_out, prefilled, handed, t, units_m, shape) -> Candidates:
    """The first A queued requests: ids, prompt tokens to compute, cached hit, nodes hit, KV units needed,
    tokens emitted before, whether the prompt was computed by the prefill pool (disaggregated), and whether
    its KV still waits there for room here (pull hand-off: admitting it reserves the room and starts the
    transfer), and the KV units of its hit's cached segments that nothing pins now (the admission pins them,
    so they stop counting as evictable room: :func:`sweepkit.serving.engine.prefix.unpinned_hit_units`)."""
    ar = jnp.arange(shape.admits)
    valid = ar < iv.tail - iv.head
    rid = iv.queue[iv.head + ar - iv.qbase]     # the boundary's window of the ring
    p = req.prompt_tokens[rid].astype(jnp.float64)
    o = req.output_tokens[rid].astype(jnp.float64)
    prev = r_out[rid]
    target = p + prev
    awaiting = handed[rid]
    computed = prefilled[rid] | awaiting   # the prefill pool computed the prompt
    if shape.prefix:
        def looked_up():
            hit, nodes = lookup(iv.c_in, req, rid, target, shape, offset(iv))
            hit, nodes = jnp.where(computed, 0.0, hit), jnp.where(computed, 0.0, nodes)
            return hit, nodes, unpinned_hit_units(iv.c_refs, units_m, req, rid, nodes, shape, offset(iv))
        zero = jnp.zeros_like(target)
        hit, nodes, pinning = jax.lax.cond(jnp.any(valid) & (pol.prefix > 0), looked_up, lambda: (zero, zero, zero))
    else:
        hit = nodes = pinning = jnp.zeros_like(target)
    paged = pol.paged > 0
    whole = jnp.where(pol.role == PREFILL_POOL, target - hit, p + o - hit)   # a prefill instance holds the prompt
    need = jnp.where(paged, jnp.ceil((target - hit) / pol.block_tokens), whole) + pol.state_units
    return Candidates(valid=valid, rid=rid, target=target, hit=hit, nodes=nodes, need=need, prev=prev,
                      computed=computed, awaiting=awaiting, pinning=pinning)


def accepted(pol, rid, out, shape):
    """Drafted tokens accepted in a verify pass starting at token ``out``: k = #{j : u < prod_{i<=j} alpha_i}.

    One uniform per (request, position) inverts the survival function P(k >= j) = prod_{i<=j} alpha_i
    (:func:`sweepkit.acceptance.sample_accepted`); with equal alphas this is min(floor(ln u / ln alpha),
    gamma). Without a draft in the program (``gamma_max`` 0) nothing is drawn.
    """
    if shape.gamma_max == 0:
        return jnp.zeros(jnp.shape(rid), jnp.float64)
    u = uniform(pol.spec_seed, rid, out)
    surv = pol.accept_survival
    return sum((u < surv[j]).astype(jnp.float64) for j in range(surv.shape[0]))


def token_budget_split(pol, r, survive, cost, dec_rows, order):
    """Prompt tokens each partial row and each candidate computes this step, and the candidates' budget test.

    Chunked: decode rows take gamma + 1 tokens each of the budget tau (never trimmed), then partial prompts in
    arrival order, then new admissions, each min(remaining, tau - used). Whole prompts: the first always
    fits, the next while the cumulative prompt tokens stay within the budget.
    """
    tau = pol.token_budget
    dec_tok = jnp.sum(dec_rows) * (pol.inst.gamma + 1.0)
    partial = survive & (r.phase == PREFILL) & (r.done < r.target)
    rem = jnp.where(partial, r.target - r.done, 0.0)
    cum = jax.lax.cond(jnp.any(partial), lambda: masked_cumsum(rem, r.arr_s, partial, order), lambda: rem)
    ceiling = jnp.maximum(tau, dec_tok)
    c_part = jnp.where(partial, jnp.minimum(dec_tok + cum, ceiling) - jnp.minimum(dec_tok + cum - rem, ceiling), 0.0)
    used = jnp.minimum(dec_tok + jnp.sum(rem), ceiling)
    before = used + jnp.cumsum(cost) - cost
    chunked_c = jnp.clip(tau - before, 0.0, cost)
    chunk_ok = before < tau
    whole_ok = (jnp.cumsum(cost) <= tau) | (jnp.cumsum(cost) - cost <= 0)
    chunked = pol.batching == CHUNKED
    return (jnp.where(chunked, c_part, 0.0), jnp.where(chunked, chunked_c, cost),
            jnp.where(chunked, chunk_ok, whole_ok))


def admit(pol, req, iv, take, cand, c_new, r_last_s, arrival_s, t, units_m, shape):
    """Place the taken candidates in free slots as prompt rows (their hit segments pinned); pop the queue."""
    rid, target, hit, nodes, need, prev = cand.rid, cand.target, cand.hit, cand.nodes, cand.need, cand.prev
    computed, awaiting = cand.computed, cand.awaiting
    r = iv.rows
    S, A = r.rid.shape[0], take.shape[0]
    free_idx = first_true(r.phase == FREE, A, S)
    dest = jnp.where(take, free_idx, S)
    done = jnp.where(computed, target, hit + c_new)
    put = lambda a, v: set_at(a, dest, v)  # noqa: E731
    rows = dataclasses.replace(
        r, rid=put(r.rid, rid), phase=put(r.phase, jnp.where(awaiting, RESERVED, jnp.where(computed, DECODE, PREFILL))),
        target=put(r.target, target), done=put(r.done, done),
        out=put(r.out, prev), alloc=put(r.alloc, need), hit=put(r.hit, hit), pins=put(r.pins, nodes),
        last_s=put(r.last_s, r_last_s[rid]),
        arr_s=put(r.arr_s, arrival_s[rid]))
    iv = dataclasses.replace(iv, rows=rows, head=iv.head + jnp.sum(take).astype(jnp.int32))
    if shape.prefix:
        iv = pin_chains(iv, req, rid, jnp.where(take, nodes, 0.0), t, units_m, shape)
    first = take & (prev <= 0)
    st = iv.stats
    st = dataclasses.replace(st, hit_tokens=st.hit_tokens + jnp.sum(jnp.where(first, hit, 0.0)),
                             first_prompt_tokens=st.first_prompt_tokens + jnp.sum(jnp.where(first, target, 0.0)))
    return dataclasses.replace(iv, stats=st), dest, ((done >= target) & ~awaiting).astype(jnp.float64)


def schedule(pol, req, load, iv, shared, t, units_m, order, shape):
    """Form and price the next step under the batching policy: (instance arrays, rows preempted for
    recompute, the pulled hand-offs admitted [A] whose KV transfer starts now (N: none)).

    prefill-priority: admit whole prompts (FIFO, budget, batch cap, memory); if any, one prefill step (decode
    rows stall), else one decode step over every row. decode-priority: the same, but prompts are admitted
    only when no row is running. chunked: one mixed step of every decode row, partial prompts and new
    admissions within the token budget. Paged rows grow before decode and mixed steps.
    """
    r = iv.rows
    chunked = pol.batching == CHUNKED
    alloc_g, survive, pre = grow(pol, req, iv, units_m, order, shape)
    running = (r.phase == PREFILL) | (r.phase == DECODE)
    n_run0 = jnp.sum(running)
    cand = candidates(pol, req, iv, shared.r_out, shared.prefilled, shared.handed, t, units_m, shape)
    valid, rid, target, hit, need, computed, awaiting = (cand.valid, cand.rid, cand.target, cand.hit, cand.need,
                                                         cand.computed, cand.awaiting)
    private0, cache, pinned = kv_used(pol, iv, units_m)
    private_g = jnp.sum(jnp.where(survive, alloc_g, 0.0))
    room = pol.kv_units - pinned - jnp.where(chunked, private_g + parked_units(r), private0) - pol.watermark_units
    n_run = jnp.where(chunked, jnp.sum(survive), n_run0) + jnp.sum(r.phase == RESERVED)   # held KV: no cap
    can = (jnp.sum(r.phase == SWAPPED) == 0) & ((pol.batching != DECODE_PRIORITY) | (n_run0 == 0))
    dec_rows = survive & (r.phase == DECODE)
    cost = jnp.where(computed, 0.0, target - hit)
    c_part, c_new, budget_ok = token_budget_split(pol, r, survive, cost, jnp.where(chunked, dec_rows, False), order)
    ar = jnp.arange(1, valid.shape[0] + 1)
    ok = (valid & can & budget_ok & (jnp.cumsum(need + cand.pinning) <= room) & (n_run + ar <= pol.batch_cap)
          & (ar <= jnp.sum(r.phase == FREE)))
    take = jnp.cumprod(ok).astype(bool)
    prefill_step = ~chunked & jnp.any(take & ~computed)   # handed-over prompts join as decode rows
    grow_now = chunked | ~prefill_step
    alloc = jnp.where(grow_now & running, alloc_g, r.alloc)
    iv = dataclasses.replace(iv, rows=dataclasses.replace(r, alloc=alloc))
    out = pre & grow_now
    if shape.paged:
        iv, ev = jax.lax.cond(jnp.any(out), lambda v: preempt(pol, req, v, out, t, order, units_m, shape),
                              lambda v: (v, not_preempted(v.rows, shape.requests)), iv)
    else:                                            # without paged KV, grow preempts nothing
        ev = not_preempted(iv.rows, shape.requests)
    r = iv.rows
    dec = (r.phase == DECODE) & grow_now
    ridd = jnp.maximum(r.rid, 0)
    p = req.prompt_tokens[ridd].astype(jnp.float64)
    o = req.output_tokens[ridd].astype(jnp.float64)
    emit_dec = jnp.minimum(accepted(pol, ridd, r.out, shape) + 1.0, o - r.out)
    part = (r.phase == PREFILL) & (c_part > 0)
    chunks = step_chunks(r.done, c_part, part, hit, c_new, take & ~computed)
    done = r.done + jnp.where(part, c_part, 0.0)
    emit = jnp.where(dec, emit_dec, jnp.where(part & (done >= r.target), 1.0, 0.0))
    pure = ~jnp.any(part) & ~jnp.any(take) & ~jnp.any(out) & (jnp.sum(r.phase == SWAPPED) == 0)
    def admitted(v):
        v, dest, emit_new = admit(pol, req, v, take, cand, c_new, shared.r_last_s, shared.arrival_s, t, units_m,
                                  shape)
        return v, set_at(emit, dest, emit_new)
    iv, emit = jax.lax.cond(jnp.any(take), admitted, lambda v: (v, emit),
                            dataclasses.replace(iv, rows=dataclasses.replace(r, done=done)))
    joined = take & computed & ~awaiting
    ctx = jnp.sum(jnp.where(dec, p + r.out, 0.0)) + jnp.sum(jnp.where(joined, target, 0.0))
    rows_dec = (jnp.sum(dec) + jnp.sum(joined)).astype(jnp.float64)
    t_s, e_j = step_cost(pol.inst, ctx, rows_dec, chunks, shape.gamma_max)
    after = iv.rows                               # with the admitted prompts (pure: unchanged)
    prompts = prefill_step | (chunked & (jnp.any(part) | jnp.any(take & ~computed)))
    fold = prompts & _nothing_between(pol, req, iv, after, emit)
    new = fold & (after.phase == PREFILL)            # their first token ends the step
    run_rows = dataclasses.replace(after, out=jnp.where(new | (fold & (after.phase == DECODE)), after.out + emit,
                                                        after.out))
    run_dec = jnp.where(fold, (after.phase == DECODE) | new, dec)
    run_free = dataclasses.replace(after, alloc=jnp.where(run_dec, 0.0, after.alloc))
    private1, _, _ = kv_used(pol, dataclasses.replace(iv, rows=run_free), units_m)
    # Nothing can take a finished row's place: the queue is empty, or (decode priority) rows still run.
    blocked = (iv.tail == iv.head) | (pol.batching == DECODE_PRIORITY)
    alone = blocked & jnp.all((after.phase == FREE) | run_dec) & (iv.owed <= 0)

    def plan_run():
        held_now, cache_now, pinned_now = kv_used(pol, iv, units_m)
        on = new & (pol.prefix > 0)
        used = held_now + pinned_now
        rows, gained, ok = run_rows, jnp.zeros(()), jnp.ones((), bool)
        if shape.prefix:                       # only where a prompt completes in a folded step
            rows, gained, ok = jax.lax.cond(jnp.any(on), lambda: cached_prompts(pol, req, iv, run_rows, on, used,
                                                                                units_m, shape),
                                            lambda: (rows, gained, ok))
        strict = fold & (pol.prefix > 0)       # the prompts' segments enter the cache inside the plan: no eviction
        run = decode_run(pol, req, rows, run_dec, lambda i, x: accepted(pol, i, x, shape), private1 + pinned,
                         (private1 + cache_now + gained, left_behind(pol, req, dataclasses.replace(iv, rows=rows),
                                                                      units_m, shape), strict),
                         jnp.where(fold, t + t_s, t), alone, ~fold, shape)
        return run, gained, ok & (~strict | (held_now + cache_now <= pol.kv_units))

    run, gained, ok = jax.lax.cond((pure | fold) & jnp.any(run_dec), plan_run,
                                   lambda: (no_run(r.out), jnp.zeros(()), jnp.zeros((), bool)))
    multi = pure & (run.n >= 2) & jnp.any(dec)
    plan = _plan(run, gained, multi, fold & (run.n >= 1) & ok, t, t_s, e_j, emit, after, rows_dec)
    st = iv.stats
    iv = dataclasses.replace(iv, plan=plan, stats=dataclasses.replace(st, prefill_tokens=st.prefill_tokens + chunks.tokens))
    return iv, ev, jnp.where(take & awaiting, rid, req.prompt_tokens.shape[0])


def step_chunks(done, c_part, part, hit, c_new, take) -> Work:
    """The step's prompt chunks combined: partial rows (p0 = tokens done) and new admissions (p0 = hit)."""
    a = chunk_work(jnp.where(part, done, 0.0), jnp.where(part, c_part, 0.0))
    b = chunk_work(jnp.where(take, hit, 0.0), jnp.where(take, c_new, 0.0))
    return Work(tokens=jnp.sum(a.tokens) + jnp.sum(b.tokens), attn_pairs=jnp.sum(a.attn_pairs) + jnp.sum(b.attn_pairs),
                kv_tokens=jnp.sum(jnp.where(part, a.kv_tokens, 0.0)) + jnp.sum(jnp.where(take, b.kv_tokens, 0.0)),
                prefill_pairs=jnp.sum(a.prefill_pairs) + jnp.sum(b.prefill_pairs),
                prefix_tokens=jnp.sum(a.prefix_tokens) + jnp.sum(b.prefix_tokens),
                rows=jnp.sum(a.rows) + jnp.sum(b.rows))


def left_behind(pol, req, iv, units_m, shape):
    """[S] KV units each row's finish leaves in the prefix cache: its turn's segment, where it pins its whole
    chain, the segment is not cached yet and the workload has several turns (as
    :func:`sweepkit.serving.engine.complete.emit_and_release` caches them); zeros without the prefix cache."""
    r = iv.rows
    if not shape.prefix:
        return jnp.zeros_like(r.alloc)
    rid = jnp.maximum(r.rid, 0)
    node = shape.systems + rid
    chain = (req.system_tokens[req.system_id[rid]] > 0).astype(jnp.float64) + (rid // req.stride).astype(jnp.float64)
    emits = (pol.prefix > 0) & (r.pins >= chain) & ~iv.c_in[offset(iv) + node] & (req.turns > 1)
    return jnp.where(emits, units_m[node], 0.0)


def _nothing_between(pol, req, iv, after, emit):
    """Whether nothing could change at the boundary that ends a step computing prompts (a whole-prompt
    prefill step, or a chunked mixed step), so that the decode run after it is planned with it (one boundary
    instead of two): the queue is empty (nothing left to admit), every busy row decodes or computes a prompt,
    every prompt is complete at the step's end with more than its first token to emit, no decode row
    finishes in the step, no swap time is owed, the instance is colocated (a prefill-pool instance hands its
    prompts over). With the prefix cache the prompts' segments enter the cache at that boundary
    (:func:`cached_prompts`): the plan is made only where nothing is evicted at either boundary or inside the
    run and the segments fit."""
    o = req.output_tokens[jnp.maximum(after.rid, 0)].astype(jnp.float64)
    new = after.phase == PREFILL
    return ((iv.tail == iv.head) & jnp.all((after.phase == FREE) | (after.phase == DECODE) | new)
            & jnp.all(~new | ((after.done >= after.target) & (emit >= 1.0) & (o > after.out + emit)))
            & jnp.all((after.phase != DECODE) | (o > after.out + emit))
            & (iv.owed <= 0) & (pol.role == COLOCATED))


def cached_prompts(pol, req, iv, rows, on, used, units_m, shape):
    """The rows as they will be once the prompts of ``on`` rows complete and their chains enter the prefix
    cache (:func:`sweepkit.serving.engine.complete.insert_prefix`, which applies it when the plan lands): (rows with
    the prompts' allocation, hit and pins, KV units the cache gains, whether the insert fits beside ``used``,
    the private and pinned units held now). Programs with the prefix cache only."""
    ids, valid, new, covered, alloc, need = prompt_chains(iv.c_in, req, rows, on, units_m, pol.block_tokens, shape,
                                                          offset(iv), pol.state_units)
    # a node enters once: rows share only system prompts (the chain's first node; one row per session)
    systems = add_at(jnp.zeros((shape.systems,)), jnp.where(new[:, 0], ids[:, 0], shape.systems), 1.0) > 0
    gained = (jnp.sum(jnp.where(new[:, 1:], units_m[ids[:, 1:]], 0.0))
              + jnp.sum(jnp.where(systems, units_m[:shape.systems], 0.0)))
    out = dataclasses.replace(rows, alloc=alloc, hit=jnp.where(on, covered, rows.hit),
                              pins=jnp.where(on, jnp.sum(valid, axis=-1).astype(jnp.float64), rows.pins))
    return out, gained, used + need <= pol.kv_units


def _plan(run: Run, gained, multi, folded, t, t_s, e_j, emit, after, rows_dec) -> Plan:
    """The instance's plan: the run of decode steps (``multi``), the step formed here followed by the run
    (``folded``: a step computing prompts, then decode), or the step formed here alone. ``gained``: KV units
    the folded prompts put in the prefix cache. Its ``ends`` and ``frac`` are set where the boundary ends."""
    K = run.dt.shape[0]

    def pick(a, step):           # [K, ...] per step, from the run, the step then the run, or the step alone
        alone = jnp.zeros_like(a).at[0].set(step)
        return jnp.where(multi, a, jnp.where(folded, jnp.concatenate([step[None], a[:-1]]), alone))

    zero = jnp.zeros(())
    rows = jnp.sum((after.phase == PREFILL) | (after.phase == DECODE)).astype(jnp.float64)
    # a folded run's KV use after its first step, less that in it: the rows' growth (from the prompts'
    # allocation), the segments the prompts put in the cache, those the finished rows leave there
    held = run.kv_delta + run.held[0] - jnp.sum(jnp.where(after.phase != FREE, after.alloc, 0.0)) + gained
    return Plan(
        n=jnp.where(multi, run.n, jnp.where(folded, jnp.minimum(run.n + 1, K), (t_s > 0).astype(jnp.int32))),
        t0=t, dt=pick(run.dt, t_s), en=pick(run.en, e_j), E=pick(run.E, emit),
        alloc=jnp.where(multi | folded, pick(run.alloc, after.alloc), after.alloc[None, :]),
        fin=pick(run.fin, zero), fin_at=jnp.where(multi, run.fin_at, jnp.where(folded, run.fin_at + 1, 0)),
        kv_delta=jnp.where(multi, run.kv_delta, jnp.where(folded, jnp.concatenate([zero[None], held[:-1]]), 0.0)),
        promoted=jnp.where(folded, jnp.sum(after.phase == PREFILL), 0).astype(jnp.float64), frac=zero, rows=rows,
        dec=pick(jnp.full((K,), jnp.where(multi, rows_dec, rows)), rows_dec), ends=jnp.zeros_like(run.dt))
