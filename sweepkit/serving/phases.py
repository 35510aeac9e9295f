"""The phases of one instance's step boundary, each a pure function of the instance's arrays.

At a boundary (its step has ended, or an arrival woke it) an instance runs, in order:

1. :func:`complete` - the ended step's tokens land: first tokens, inter-token gaps, finished prompts become
   decode rows (their prompt segments enter the prefix cache), finished rows retire (their turn's segment is
   cached, their KV freed, the session's next turn released after its think time);
2. :func:`swap_in` - swapped-out rows come back, earliest arrival first, while they fit;
3. :func:`schedule` - the batching policy forms the next step: paged rows grow (the latest arrivals are
   preempted when they cannot), queued requests are admitted in FIFO order (head-of-line blocking), and the
   step's rows, prompt chunks and emitted tokens are fixed;
4. :func:`sweepkit.costmodel.steps.step_cost` prices it.

Every function is written for ONE instance and ``vmap``-ped over the cluster's instances; no Python ``if``
touches a traced value. Memory is counted in units (a token when reserved, a 16-token block when paged); the
prefix cache's unpinned segments count as free room and are evicted (LRU) only for the shortfall.

References:
  Yu et al., "Orca" (iteration-level scheduling), OSDI 2022; Kwon et al., vLLM, SOSP 2023, arXiv:2309.06180
  (paged KV, preemption by recompute or swap, sec. 4.5); Agrawal et al., "Sarathi-Serve", OSDI 2024,
  arXiv:2403.02310 (stall-free chunked batching, Alg. 3).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.costmodel.passes import Work, chunk_work
from sweepkit.costmodel.steps import step_cost
from sweepkit.serving.cluster_state import CHUNKED, DECODE, DECODE_PRIORITY, FREE, PREFILL, PREFILL_POOL, RUN_STEPS, \
    SWAPPED, bin_index
from sweepkit.serving.decode_run import decode_run, no_run
from sweepkit.serving.prefix import chain_nodes, evict, lookup, node_units


def no_events(S: int, N: int, bins: int) -> dict:
    """The event fields of a boundary that did nothing (request id N: none), shaped as :func:`boundary`'s."""
    none, zf = jnp.full((S,), N, jnp.int32), jnp.zeros((S,), jnp.float64)
    return dict(first_rid=none, finish_rid=none, next_rid=none, hand_rid=none, itl_bin=jnp.zeros((S + RUN_STEPS,), jnp.int32),
                itl_w=jnp.zeros((S + RUN_STEPS,), jnp.float64), zeros=jnp.zeros((), jnp.float64),
                misses=jnp.zeros((), jnp.int32), pre_rid=none, pre_out=zf, pre_last_s=zf)


def uniform(seed, rid, position):
    """u in (0, 1) from a counter-based hash of (seed, request, token position) (murmur3 finaliser)."""
    x = (seed.astype(jnp.uint64) * jnp.uint64(0x9E3779B97F4A7C15)
         ^ rid.astype(jnp.uint64) * jnp.uint64(0xBF58476D1CE4E5B9)
         ^ position.astype(jnp.uint64) * jnp.uint64(0x94D049BB133111EB))
    for shift, mul in ((33, 0xFF51AFD7ED558CCD), (33, 0xC4CEB9FE1A85EC53)):
        x = (x ^ (x >> jnp.uint64(shift))) * jnp.uint64(mul)
    x = x ^ (x >> jnp.uint64(33))
    return ((x >> jnp.uint64(11)).astype(jnp.float64) + 0.5) / float(1 << 53)


def arrival_order(arr_s):
    """(order, inverse) of the rows by arrival time, ties by slot: one sort per boundary, shared by every
    ordered sum of the boundary (an order over all rows is the order over any subset of them)."""
    S = arr_s.shape[0]
    order = jnp.argsort(arr_s, stable=True)
    return order, jnp.zeros((S,), jnp.int32).at[order].set(jnp.arange(S, dtype=jnp.int32))


def _ordered_cumsum(values, order, mask):
    """Inclusive cumulative sum of ``values`` over masked rows in arrival order, [S]."""
    cum = jnp.cumsum(jnp.where(mask, values, 0.0)[order[0]])
    return cum[order[1]]


def _arrival_rank(order, mask):
    """Rank of each masked row in arrival order (ties by slot), [S] (unmasked rows: S)."""
    S = mask.shape[0]
    rank = _ordered_cumsum(mask.astype(jnp.int32), order, mask) - 1
    return jnp.where(mask, rank, S).astype(jnp.int32)


def _used(pol, iv, units):
    """(private units held, cache units, pinned cache units) of an instance."""
    held = (iv["rows"].phase == PREFILL) | (iv["rows"].phase == DECODE)
    private = jnp.sum(jnp.where(held, iv["rows"].alloc, 0.0))
    cache = jnp.sum(jnp.where(iv["c_in"], units, 0.0))
    pinned = jnp.sum(jnp.where(iv["c_in"] & (iv["c_refs"] > 0), units, 0.0))
    return private, cache, pinned


def complete(pol, req, load, iv, first_s, t, shape):
    """Land the ended step (or run of decode steps): tokens, first tokens, gaps, energy, promotions, prefix
    inserts, retirements.

    Returns:
      (instance arrays, per-slot event fields as a dict).
    """
    r, plan = iv["rows"], iv["plan"]
    N = req.prompt_tokens.shape[0]
    K = plan["dt"].shape[0]
    rid = jnp.maximum(r.rid, 0)
    o = req.output_tokens[rid].astype(jnp.float64)
    on = jnp.arange(K) < plan["n"]
    E = jnp.where(on[:, None] & (r.phase != FREE)[None, :], plan["E"], 0.0)
    got = E[0] > 0
    first = got & (r.out <= 0)
    win = ((r.arr_s >= load.itl_from_s) & (r.arr_s <= load.itl_to_s)).astype(jnp.float64)
    ends = plan["t0"] + jnp.cumsum(plan["dt"])
    row_w = jnp.where(got & ~first, win, 0.0)
    row_bin = bin_index(ends[0] - r.last_s, shape.bins)
    run_w = jnp.where(on & (jnp.arange(K) >= 1), jnp.sum(jnp.where(E > 0, win[None, :], 0.0), axis=1), 0.0)
    zeros = jnp.sum(jnp.where(first[None, :], 0.0, jnp.maximum(E - 1.0, 0.0) * win[None, :]))
    eligible = r.arr_s <= load.eligible_to_s
    ttft_miss = first & (t - r.arr_s > load.ttft_slo_s) & eligible
    promote = (r.phase == PREFILL) & (r.done >= r.target)
    out = r.out + jnp.sum(E, axis=0)
    last = jnp.maximum(plan["n"] - 1, 0)
    r = dataclasses.replace(r, out=out, last_s=jnp.where(jnp.sum(E, axis=0) > 0, t, r.last_s),
                            phase=jnp.where(promote, DECODE, r.phase),
                            alloc=jnp.where((plan["n"] >= 1) & (r.phase != FREE), plan["alloc"][last], r.alloc))
    dt = jnp.sum(jnp.where(on, plan["dt"], 0.0))
    st = iv["stats"]
    st = dict(st, energy_j=st["energy_j"] + jnp.sum(jnp.where(on, plan["en"], 0.0)), busy_s=st["busy_s"] + dt,
              kv_area=st["kv_area"] + plan["frac"] * dt, batch_area=st["batch_area"] + plan["rows"] * dt,
              steps=st["steps"] + plan["n"], decode_rows=st["decode_rows"] + plan["n"] * plan["dec"])
    iv = dict(iv, rows=r, stats=st, plan=dict(plan, n=jnp.zeros_like(plan["n"])))
    if shape.prefix:
        iv = _insert(pol, req, iv, promote & (pol.prefix > 0), t, shape)
    fin = (r.phase == DECODE) & (out >= o)
    first_t = jnp.where(first, t, first_s[rid])
    tpot = (t - first_t) / jnp.maximum(o - 1.0, 1.0)
    tpot_miss = fin & (first_t - r.arr_s <= load.ttft_slo_s) & (o >= 2) & (tpot > load.tpot_slo_s) & eligible
    if shape.prefix:
        iv = _emit_and_release(pol, req, iv, fin & (pol.prefix > 0), t, shape)
    hand = promote & ~fin & (pol.role == PREFILL_POOL)
    if shape.prefix:
        ids, _, valid = chain_nodes(req, rid, shape)
        iv = _pin_range(iv, ids, valid, jnp.zeros_like(r.pins), jnp.where(hand, iv["rows"].pins, 0.0), t, -1.0)
    r = iv["rows"]
    k = rid // shape.sessions
    gone = fin | hand
    rows = dataclasses.replace(r, phase=jnp.where(gone, FREE, r.phase), rid=jnp.where(gone, -1, r.rid),
                               alloc=jnp.where(gone, 0.0, r.alloc), pins=jnp.where(gone, 0.0, r.pins))
    ev = dict(first_rid=jnp.where(first, rid, N), finish_rid=jnp.where(fin, rid, N), hand_rid=jnp.where(hand, rid, N),
              next_rid=jnp.where(fin & (k + 1 < shape.turns), rid + shape.sessions, N),
              itl_bin=jnp.concatenate([row_bin, bin_index(plan["dt"], shape.bins)]),
              itl_w=jnp.concatenate([row_w, run_w]), zeros=zeros,
              misses=(jnp.sum(ttft_miss) + jnp.sum(tpot_miss)).astype(jnp.int32))
    return dict(iv, rows=rows), ev


def _insert(pol, req, iv, on, t, shape):
    """Rows whose prompt completed put its chain segments in the cache, pinned; their private KV shrinks to
    the uncached rest (the KV moves into the cache). All or none per boundary, as room allows."""
    r = iv["rows"]
    rid = jnp.maximum(r.rid, 0)
    ids, toks, valid = chain_nodes(req, rid, shape)
    units = node_units(req, shape, pol.block_tokens)
    new = on[:, None] & valid & ~iv["c_in"][ids]
    covered = jnp.sum(jnp.where(valid, toks, 0.0), axis=-1)
    alloc = jnp.where(on, jnp.ceil(jnp.maximum(r.target - covered, 0.0) / pol.block_tokens), r.alloc)
    need = jnp.sum(jnp.where(new, units[ids], 0.0)) - jnp.sum(r.alloc - alloc)
    private, cache, pinned = _used(pol, iv, units)
    ok = private + pinned + need <= pol.kv_units
    on = on & ok
    M = iv["c_in"].shape[0]
    c_in = iv["c_in"].at[jnp.where(on[:, None] & valid, ids, M).ravel()].set(True, mode="drop")
    iv = dict(iv, c_in=c_in)
    n_valid = jnp.sum(valid, axis=-1).astype(jnp.float64)
    iv = _pin_range(iv, ids, valid, r.pins, jnp.where(on, n_valid, r.pins), t)
    rows = dataclasses.replace(r, alloc=jnp.where(on, alloc, r.alloc), hit=jnp.where(on, covered, r.hit),
                               pins=jnp.where(on, n_valid, r.pins))
    return dict(iv, rows=rows)


def _pin_range(iv, ids, valid, lo, hi, t, delta=1.0):
    """Add ``delta`` pins to valid chain positions lo < position <= hi (1-based among valid) of each row."""
    pos = jnp.cumsum(valid.astype(jnp.float64), axis=-1)
    on = valid & (pos > lo[:, None]) & (pos <= hi[:, None])
    M = iv["c_in"].shape[0]
    flat = jnp.where(on, ids, M).ravel()
    refs = iv["c_refs"].at[flat].add(jnp.where(on, delta, 0.0).ravel(), mode="drop")
    last = iv["c_last_s"].at[flat].set(t, mode="drop")
    return dict(iv, c_refs=refs, c_last_s=last)


def _emit_and_release(pol, req, iv, fin, t, shape):
    """Finished rows cache their turn's segment (multi-turn, whole chain pinned, room allowing), then unpin."""
    r = iv["rows"]
    rid = jnp.maximum(r.rid, 0)
    ids, toks, valid = chain_nodes(req, rid, shape)
    units = node_units(req, shape, pol.block_tokens)
    node = shape.systems + rid
    whole = r.pins >= jnp.sum(valid, axis=-1)
    emit = fin & whole & ~iv["c_in"][node] & (shape.turns > 1)
    need = jnp.sum(jnp.where(emit, units[node] - r.alloc, 0.0))
    private, cache, pinned = _used(pol, iv, units)
    emit = emit & (private + pinned + need <= pol.kv_units)
    M = iv["c_in"].shape[0]
    c_in = iv["c_in"].at[jnp.where(emit, node, M)].set(True, mode="drop")
    c_last = iv["c_last_s"].at[jnp.where(emit, node, M)].set(t, mode="drop")
    iv = dict(iv, c_in=c_in, c_last_s=c_last)
    return _pin_range(iv, ids, valid, jnp.zeros_like(r.pins), jnp.where(fin, r.pins, 0.0), t, delta=-1.0)


def _swap_bytes(pol, units):
    return units * pol.block_tokens * pol.kv_token_bytes


def _swap_cost(pol, units):
    """Seconds and joules of moving ``units`` blocks over the host link (per-block latency + bytes / rate)."""
    b = _swap_bytes(pol, units)
    return units * pol.host_block_s + b / pol.host_bytes_per_s, b * 8.0 * pol.host_j_per_bit


def swap_in(pol, req, iv, t, units_m, order):
    """Swapped-out rows return, earliest arrival first, while they fit (no watermark) under the batch cap."""
    r = iv["rows"]
    sw = r.phase == SWAPPED
    private, cache, pinned = _used(pol, iv, units_m)
    n_run = jnp.sum((r.phase == PREFILL) | (r.phase == DECODE))
    order = order()
    cum_u = _ordered_cumsum(r.alloc, order, sw)
    cum_n = _ordered_cumsum(jnp.ones_like(r.alloc), order, sw)
    fits = sw & (private + pinned + cum_u <= pol.kv_units) & (n_run + cum_n <= pol.batch_cap)
    back = sw & (_ordered_cumsum((sw & ~fits).astype(jnp.float64), order, sw) <= 0)
    units = jnp.sum(jnp.where(back, r.alloc, 0.0))
    sec, joules = _swap_cost(pol, units)
    st = iv["stats"]
    st = dict(st, swap_in_bytes=st["swap_in_bytes"] + _swap_bytes(pol, units), swap_j=st["swap_j"] + joules)
    rows = dataclasses.replace(r, phase=jnp.where(back, DECODE, r.phase))
    return dict(iv, rows=rows, owed=iv["owed"] + sec, stats=st)


def _grow(pol, req, iv, units_m, order, shape):
    """Paged rows' growth for a decode or mixed step, and the rows the LIFO rule preempts when room runs out.

    Returns:
      (grown allocation [S], survivors [S], preempted [S]).
    """
    r = iv["rows"]
    rid = jnp.maximum(r.rid, 0)
    p = req.prompt_tokens[rid].astype(jnp.float64)
    o = req.output_tokens[rid].astype(jnp.float64)
    dec = r.phase == DECODE
    run = dec | (r.phase == PREFILL)
    pos = jnp.minimum(p + r.out + pol.inst.gamma, p + o) - r.hit
    need = jnp.where(dec & (pol.paged > 0), jnp.ceil(pos / pol.block_tokens), r.alloc)
    alloc = jnp.maximum(need, r.alloc)
    private, cache, pinned = _used(pol, iv, units_m)
    short = jnp.sum(jnp.where(run, alloc, 0.0)) + pinned > pol.kv_units
    survive = jax.lax.cond(short, lambda: run & (_ordered_cumsum(alloc, order(), run) + pinned <= pol.kv_units),
                           lambda: run)
    return alloc, survive, run & ~survive


def _candidates(pol, req, iv, r_out, prefilled, t, shape):
    """The first A queued requests: ids, prompt tokens to compute, cached hit, nodes hit, KV units needed,
    tokens emitted before, and whether the prompt's KV was handed over computed (disaggregated)."""
    N = iv["queue"].shape[0]
    ar = jnp.arange(shape.admits)
    valid = ar < iv["tail"] - iv["head"]
    rid = iv["queue"][(iv["head"] + ar) % N]
    p = req.prompt_tokens[rid].astype(jnp.float64)
    o = req.output_tokens[rid].astype(jnp.float64)
    prev = r_out[rid]
    target = p + prev
    computed = prefilled[rid]   # KV handed over by the prefill pool: the prompt is done
    if shape.prefix:
        hit, nodes = lookup(iv["c_in"], req, rid, target, shape)
        hit, nodes = jnp.where(computed, 0.0, hit * pol.prefix), jnp.where(computed, 0.0, nodes * pol.prefix)
    else:
        hit = nodes = jnp.zeros_like(target)
    paged = pol.paged > 0
    need = jnp.where(paged, jnp.ceil((target - hit) / pol.block_tokens), p + o - hit)
    return valid, rid, target, hit, nodes.astype(jnp.float64), need, prev, computed


def _accepted(pol, rid, out, shape):
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


def _budget(pol, r, survive, cost, dec_rows, order):
    """Prompt tokens each partial row and each candidate computes this step, and the candidates' budget test.

    Chunked: decode rows take gamma + 1 tokens each of the budget tau (never trimmed), then partial prompts in
    arrival order, then new admissions, each min(remaining, tau - used). Whole prompts: the first always
    fits, the next while the cumulative prompt tokens stay within the budget.
    """
    tau = pol.token_budget
    dec_tok = jnp.sum(dec_rows) * (pol.inst.gamma + 1.0)
    partial = survive & (r.phase == PREFILL) & (r.done < r.target)
    rem = jnp.where(partial, r.target - r.done, 0.0)
    cum = jax.lax.cond(jnp.any(partial), lambda: _ordered_cumsum(rem, order(), partial), lambda: rem)
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


def _preempt(pol, req, iv, pre, t, order, shape):
    """Preempted rows: swapped out (decode rows, swap on) or dropped and queued at the front for recompute."""
    r = iv["rows"]
    S, N = r.rid.shape[0], iv["queue"].shape[0]
    rid = jnp.maximum(r.rid, 0)
    to_swap = pre & (pol.swap > 0) & (r.phase == DECODE)
    rec = pre & ~to_swap
    n_rec = jnp.sum(rec).astype(jnp.int32)
    rank = jax.lax.cond(n_rec > 0, lambda: _arrival_rank(order(), rec), lambda: jnp.full_like(r.rid, S))
    head = iv["head"] - n_rec
    queue = iv["queue"].at[jnp.where(rec, (head + rank) % N, N)].set(rid, mode="drop")
    units = jnp.sum(jnp.where(to_swap, r.alloc, 0.0))
    sec, joules = _swap_cost(pol, units)
    p = req.prompt_tokens[rid].astype(jnp.float64)
    st = iv["stats"]
    st = dict(st, preemptions=st["preemptions"] + jnp.sum(pre),
              recompute_tokens=st["recompute_tokens"] + jnp.sum(jnp.where(rec, p + r.out, 0.0)),
              swap_out_bytes=st["swap_out_bytes"] + _swap_bytes(pol, units), swap_j=st["swap_j"] + joules)
    if shape.prefix:
        ids, _, valid = chain_nodes(req, rid, shape)
        iv = _pin_range(iv, ids, valid, jnp.zeros_like(r.pins), jnp.where(rec, r.pins, 0.0), t, delta=-1.0)
    rows = dataclasses.replace(
        r, phase=jnp.where(rec, FREE, jnp.where(to_swap, SWAPPED, r.phase)), rid=jnp.where(rec, -1, r.rid),
        alloc=jnp.where(rec, 0.0, r.alloc), pins=jnp.where(rec, 0.0, r.pins))
    ev = dict(pre_rid=jnp.where(rec, rid, N), pre_out=r.out, pre_last_s=r.last_s)
    return dict(iv, rows=rows, queue=queue, head=head, owed=iv["owed"] + sec, stats=st), ev


def _admit(pol, req, iv, take, cand, c_new, r_last_s, arrival_s, t, shape):
    """Place the taken candidates in free slots as prompt rows (their hit segments pinned); pop the queue."""
    valid, rid, target, hit, nodes, need, prev, computed = cand
    r = iv["rows"]
    S, A = r.rid.shape[0], take.shape[0]
    free_idx = jnp.nonzero(r.phase == FREE, size=A, fill_value=S)[0]
    dest = jnp.where(take, free_idx, S)
    done = jnp.where(computed, target, hit + c_new)
    put = lambda a, v: a.at[dest].set(v, mode="drop")  # noqa: E731
    rows = dataclasses.replace(
        r, rid=put(r.rid, rid), phase=put(r.phase, jnp.where(computed, DECODE, PREFILL)), target=put(r.target, target), done=put(r.done, done),
        out=put(r.out, prev), alloc=put(r.alloc, need), hit=put(r.hit, hit), pins=put(r.pins, nodes),
        last_s=put(r.last_s, r_last_s[rid]),
        arr_s=put(r.arr_s, arrival_s[rid]))
    iv = dict(iv, rows=rows, head=iv["head"] + jnp.sum(take).astype(jnp.int32))
    if shape.prefix:
        ids, _, vld = chain_nodes(req, rid, shape)
        iv = _pin_range(iv, ids, vld, jnp.zeros_like(nodes), jnp.where(take, nodes, 0.0), t)
    first = take & (prev <= 0)
    st = iv["stats"]
    st = dict(st, hit_tokens=st["hit_tokens"] + jnp.sum(jnp.where(first, hit, 0.0)),
              first_prompt_tokens=st["first_prompt_tokens"] + jnp.sum(jnp.where(first, target, 0.0)))
    return dict(iv, stats=st), dest, (done >= target).astype(jnp.float64)


def schedule(pol, req, load, iv, shared, t, units_m, order, shape):
    """Form and price the next step under the batching policy: (instance arrays, events, seconds, joules).

    prefill-priority: admit whole prompts (FIFO, budget, batch cap, memory); if any, one prefill step (decode
    rows stall), else one decode step over every row. decode-priority: the same, but prompts are admitted
    only when no row is running. chunked: one mixed step of every decode row, partial prompts and new
    admissions within the token budget. Paged rows grow before decode and mixed steps.
    """
    r = iv["rows"]
    chunked = pol.batching == CHUNKED
    alloc_g, survive, pre = _grow(pol, req, iv, units_m, order, shape)
    running = (r.phase == PREFILL) | (r.phase == DECODE)
    n_run0 = jnp.sum(running)
    cand = _candidates(pol, req, iv, shared["r_out"], shared["prefilled"], t, shape)
    valid, rid, target, hit, nodes, need, prev, computed = cand
    private0, cache, pinned = _used(pol, iv, units_m)
    private_g = jnp.sum(jnp.where(survive, alloc_g, 0.0))
    room = pol.kv_units - pinned - jnp.where(chunked, private_g, private0) - pol.watermark_units
    n_run = jnp.where(chunked, jnp.sum(survive), n_run0)
    can = (jnp.sum(r.phase == SWAPPED) == 0) & ((pol.batching != DECODE_PRIORITY) | (n_run0 == 0))
    dec_rows = survive & (r.phase == DECODE)
    cost = jnp.where(computed, 0.0, target - hit)
    c_part, c_new, budget_ok = _budget(pol, r, survive, cost, jnp.where(chunked, dec_rows, False), order)
    ar = jnp.arange(1, valid.shape[0] + 1)
    ok = valid & can & budget_ok & (jnp.cumsum(need) <= room) & (n_run + ar <= pol.batch_cap)
    take = jnp.cumprod(ok).astype(bool)
    prefill_step = ~chunked & jnp.any(take & ~computed)   # handed-over prompts join as decode rows
    grow_now = chunked | ~prefill_step
    alloc = jnp.where(grow_now & running, alloc_g, r.alloc)
    iv = dict(iv, rows=dataclasses.replace(r, alloc=alloc))
    iv, ev = _preempt(pol, req, iv, pre & grow_now, t, order, shape)
    r = iv["rows"]
    dec = (r.phase == DECODE) & grow_now
    ridd = jnp.maximum(r.rid, 0)
    p = req.prompt_tokens[ridd].astype(jnp.float64)
    o = req.output_tokens[ridd].astype(jnp.float64)
    emit_dec = jnp.minimum(_accepted(pol, ridd, r.out, shape) + 1.0, o - r.out)
    part = (r.phase == PREFILL) & (c_part > 0)
    chunks = _chunks(r.done, c_part, part, hit, c_new, take & ~computed)
    done = r.done + jnp.where(part, c_part, 0.0)
    emit = jnp.where(dec, emit_dec, jnp.where(part & (done >= r.target), 1.0, 0.0))
    pure = ~jnp.any(part) & ~jnp.any(take) & ~jnp.any(pre & grow_now) & (jnp.sum(r.phase == SWAPPED) == 0)
    private1, _, _ = _used(pol, dict(iv, rows=dataclasses.replace(r, alloc=jnp.where(dec, 0.0, r.alloc))), units_m)
    plan_run = lambda: decode_run(pol, req, r, dec, lambda i, x: _accepted(pol, i, x, shape),  # noqa: E731
                                  private1 + pinned, shape)
    run = jax.lax.cond(pure & jnp.any(dec), plan_run, lambda: no_run(r.out))
    multi = pure & (run["n"] >= 2) & jnp.any(dec)
    iv, dest, emit_new = _admit(pol, req, dict(iv, rows=dataclasses.replace(r, done=done)), take, cand, c_new,
                                shared["r_last_s"], shared["arrival_s"], t, shape)
    emit = emit.at[dest].set(emit_new, mode="drop")
    joined = take & computed
    ctx = jnp.sum(jnp.where(dec, p + r.out, 0.0)) + jnp.sum(jnp.where(joined, target, 0.0))
    rows_dec = (jnp.sum(dec) + jnp.sum(joined)).astype(jnp.float64)
    t_s, e_j = step_cost(pol.inst, ctx, rows_dec, chunks, shape.gamma_max)
    K = run["dt"].shape[0]
    first_step = (jnp.arange(K) == 0)
    alloc = iv["rows"].alloc
    plan = dict(
        n=jnp.where(multi, run["n"], (t_s > 0).astype(jnp.int32)), t0=t,
        dt=jnp.where(multi, run["dt"], jnp.where(first_step, t_s, 0.0)),
        en=jnp.where(multi, run["en"], jnp.where(first_step, e_j, 0.0)),
        E=jnp.where(multi, run["E"], jnp.where(first_step[:, None], emit[None, :], 0.0)),
        alloc=jnp.where(multi & dec[None, :], run["alloc"], alloc[None, :]),
        frac=jnp.zeros(()), rows=jnp.sum((iv["rows"].phase == PREFILL) | (iv["rows"].phase == DECODE)).astype(jnp.float64),
        dec=rows_dec)
    st = iv["stats"]
    iv = dict(iv, plan=plan, stats=dict(st, prefill_tokens=st["prefill_tokens"] + chunks.tokens))
    return iv, ev


def _chunks(done, c_part, part, hit, c_new, take) -> Work:
    """The step's prompt chunks combined: partial rows (p0 = tokens done) and new admissions (p0 = hit)."""
    a = chunk_work(jnp.where(part, done, 0.0), jnp.where(part, c_part, 0.0))
    b = chunk_work(jnp.where(take, hit, 0.0), jnp.where(take, c_new, 0.0))
    return Work(tokens=jnp.sum(a.tokens) + jnp.sum(b.tokens), attn_pairs=jnp.sum(a.attn_pairs) + jnp.sum(b.attn_pairs),
                kv_tokens=jnp.sum(jnp.where(part, a.kv_tokens, 0.0)) + jnp.sum(jnp.where(take, b.kv_tokens, 0.0)))


def boundary(pol, req, load, iv, shared, t, shape):
    """One instance's boundary at time ``t``: complete, swap in, schedule, evict, account.

    Args:
      iv: the instance's arrays (rows, queue ring, cache, counters).  shared: per-request arrays of the lane
        (first_s, r_out, r_last_s, arrival_s), read only.  t: the boundary time, s.

    Returns:
      (instance arrays with ``busy_until_s`` and ``awake`` set, event fields).
    """
    units_m = node_units(req, shape, pol.block_tokens) if shape.prefix else jnp.zeros((1,))
    iv, ev = complete(pol, req, load, iv, shared["first_s"], t, shape)
    order = lambda: arrival_order(iv["rows"].arr_s)  # noqa: E731  (sorted only where a branch needs it)
    iv = jax.lax.cond(jnp.any(iv["rows"].phase == SWAPPED), lambda v: swap_in(pol, req, v, t, units_m, order),
                      lambda v: v, iv)
    iv, ev_pre = schedule(pol, req, load, iv, shared, t, units_m, order, shape)
    private, cache, pinned = _used(pol, iv, units_m)
    if shape.prefix:
        c_in, gone = evict(iv["c_in"], iv["c_refs"], iv["c_last_s"], units_m, private + cache - pol.kv_units)
        iv = dict(iv, c_in=c_in)
        cache = cache - gone
    plan = iv["plan"]
    busy = plan["n"] > 0
    owed = jnp.where(busy, iv["owed"], 0.0)
    frac = (private + cache) / jnp.maximum(pol.kv_units, 1.0)
    plan = dict(plan, dt=plan["dt"].at[0].add(owed), frac=frac)
    st = iv["stats"]
    iv = dict(iv, plan=plan, busy_until_s=t + jnp.sum(jnp.where(jnp.arange(plan["dt"].shape[0]) < plan["n"],
                                                                 plan["dt"], 0.0)),
              awake=busy, owed=iv["owed"] - owed, stats=dict(st, kv_peak=jnp.maximum(st["kv_peak"], frac)))
    return iv, dict(ev, **ev_pre)
