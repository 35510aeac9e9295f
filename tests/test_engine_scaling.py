"""What keeps an iteration of the cluster engine independent of the run's size: the blocked minimum behind
the next-arrival search (against ``jnp.argmin``, Hypothesis; its invariant after real runs), and programs
compiled for a larger capacity than the run's layout (padding changes no result)."""

import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sweepkit.serving import sizes
from sweepkit.serving.engine import minblocks

times = st.one_of(st.just(np.inf), st.floats(0.0, 100.0, allow_nan=False).map(lambda x: round(x, 1)))


@given(st.lists(times, min_size=1, max_size=300),
       st.lists(st.tuples(st.integers(0, 299), times), max_size=20))
def test_argmin_matches_jnp_argmin_through_point_updates(values, updates):
    v = jnp.asarray(values, jnp.float32)
    mins = minblocks.block_mins(v)
    assert int(minblocks.argmin(v, mins)) == int(jnp.argmin(v))
    for i, x in updates:
        i = i % v.shape[0]
        lower = x <= float(v[i])
        v = v.at[i].set(x)
        mins = (minblocks.lowered(v, mins, jnp.array([i]), jnp.array([x], jnp.float32)) if lower
                else minblocks.refresh(v, mins, jnp.int32(i)))
        np.testing.assert_array_equal(np.asarray(mins), np.asarray(minblocks.block_mins(v)))
        assert int(minblocks.argmin(v, mins)) == int(jnp.argmin(v))   # first index of the minimum on ties


def test_out_of_range_updates_change_nothing():
    v = jnp.arange(100.0)
    mins = minblocks.block_mins(v)
    np.testing.assert_array_equal(minblocks.refresh(v, mins, jnp.int32(100)), mins)
    np.testing.assert_array_equal(minblocks.lowered(v, mins, jnp.array([100, -1]), jnp.array([-5.0, -5.0])), mins)


def test_block_size_is_about_sqrt_n():
    assert [minblocks.block_size(n) for n in (1, 64, 1024, 16384, 65536)] == [8, 8, 32, 128, 256]


def test_engine_state_keeps_block_minima_exact(x64):
    """When a real multi-turn run stops early (turns still pending, so the minima are not all inf) the kept
    minima equal a full recomputation over the program's whole arrays (released turns only lowered their
    entries, routed ones were refreshed). The program is sized for the levers of
    :func:`test_programs_without_unreachable_phases_give_the_same_lanes` too (``cover``), with every phase: the
    one that test's full lanes run in (a larger program gives the same results)."""
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.lanes import run_configs
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads

    w, lv = load_workloads()["chat"], load_levers()
    cover = [Config("H100", lv[k]) for k in ("mtp", "draft-llama-3.2-1b", "paged-swap")]
    lanes = run_configs(w, load_cluster(), [Config("H100", lv["baseline"]), Config("H100", lv["disagg-1p1d"])],
                        np.full((2, 1), 8.0), early_stop=True, cover=cover)
    assert lanes.groups[0].buf_s.shape[-1] == 4096                      # the sessions the program holds
    for c in range(2):
        st_ = lanes.state(c, 0, trim=False)
        assert st_.stopped and np.isfinite(st_.buf_s).any()
        for values, mins in ((st_.buf_s, st_.buf_min), (st_.hand_s, st_.hand_min)):
            np.testing.assert_array_equal(mins, np.asarray(minblocks.block_mins(jnp.asarray(values))))


def test_padding_a_run_to_a_larger_program_changes_no_result(monkeypatch):
    """The same lanes (multi-turn chat: the draws depend on the request layout; a speculative, a paged and a
    prefix-caching lever) in programs sized to the run's bucket and in ones padded to 2x it give the same
    metrics (the prefix cache's segments, evictions and hit rates included). The prefix-caching lever runs in
    a call of its own: padded, its program is the one chat and the other workloads run the lever alone in
    (the tests below build it too); the speculative and the paged lever share one program."""
    from sweepkit.serving import lanes as lanes_mod
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.metrics import lane_metrics
    from sweepkit.serving.workloads import load_workloads

    w, lv, cl = load_workloads()["chat"], load_levers(), load_cluster()
    calls = [[Config("H100", lv["mtp"]), Config("H100", lv["paged"])], [Config("H100", lv["prefix-cache"])]]

    def run(factor):
        monkeypatch.setattr(sizes, "CAPACITY_FACTOR", factor)
        monkeypatch.setattr(sizes, "PREFIX_CAPACITY_FACTOR", factor)
        metrics, shapes = [], []
        for cfgs in calls:                        # 0.4/s: 200 sessions, bucket 256
            out = lanes_mod.run_configs(w, cl, cfgs, np.full((len(cfgs), 1), 0.4), early_stop=False)
            shapes += [g.buf_s.shape[-1] for g in out.groups]    # sessions each program holds
            metrics += [lane_metrics(out, c, 0, w, cl.gpus, 0.0, 1.0) for c in range(len(cfgs))]
        return metrics, shapes

    exact, n_exact = run(2)     # capacity = the bucket (buckets are powers of 2)
    padded, n_padded = run(8)
    assert len(n_exact) == 2 and n_exact == [256, 256] and n_padded == [512, 512]    # with and without the cache
    assert exact[2]["prefix_hit_rate"] > 0.3      # the cache is in use
    for a, b in zip(exact, padded):
        assert a == b


def test_padding_shared_prompts_with_the_prefix_cache_changes_no_result(monkeypatch):
    """RAG (4 shared prompts) with the prefix cache in a program padded to 8 shared-prompt segments, and in one of
    exactly 4, gives the same metrics: a padded segment is in no chain."""
    from sweepkit.serving import lanes as lanes_mod
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.metrics import lane_metrics
    from sweepkit.serving.workloads import load_workloads

    w, lv, cl = load_workloads()["long-context-rag"], load_levers(), load_cluster()
    cfgs = [Config("H100", lv["prefix-cache"])]

    def run():
        out = lanes_mod.run_configs(w, cl, cfgs, np.full((1, 1), 0.5), early_stop=False)
        systems = out.groups[0].c_in.shape[-1] - out.groups[0].arrival_s.shape[-1]   # segments before requests'
        return lane_metrics(out, 0, 0, w, cl.gpus, 0.0, 1.0), systems

    padded, n_padded = run()
    monkeypatch.setattr(sizes, "SYSTEMS_CLASS", 1)
    exact, n_exact = run()
    assert (n_padded, n_exact) == (8, w.system_prompts) and exact["prefix_hit_rate"] > 0.05   # the cache is in use
    assert padded == exact


def test_padding_turns_with_the_prefix_cache_changes_no_result(monkeypatch):
    """Realtime voice (6 turns) with the prefix cache in a program of the 8-turn class, and in one of exactly
    6 turns, ends in the same state leaf for leaf: a chain's positions past its request's turn are invalid
    and its node ids follow the run's layout (``Requests.stride``), so padded turns are segments no chain
    holds; RAG (1 turn) in the 3-turn class likewise (the class of its runs past 512 sessions, taken here for
    a small run by lowering :data:`sizes.PREFIX_ONE_CLASS_UP_TO`)."""
    import jax

    from sweepkit.serving import lanes as lanes_mod
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads

    ws, lv, cl = load_workloads(), load_levers(), load_cluster()
    cfgs = [Config("H100", lv["prefix-cache"])]

    def run(name, rate):
        out = lanes_mod.run_configs(ws[name], cl, cfgs, np.full((1, 1), rate), early_stop=False)
        return out.state(0, 0), out.groups[0].c_in.shape[-1], out.groups[0].arrival_s.shape[-1] // \
            out.groups[0].buf_s.shape[-1]

    cases = {"realtime-voice": 0.5, "long-context-rag": 0.5}
    one_class = {"realtime-voice": sizes.PREFIX_ONE_CLASS_UP_TO, "long-context-rag": 0}
    padded = {}
    for name, rate in cases.items():
        monkeypatch.setattr(sizes, "PREFIX_ONE_CLASS_UP_TO", one_class[name])
        padded[name] = run(name, rate)
    assert padded["realtime-voice"][2] == 8 and padded["long-context-rag"][2] == 3     # the classes tested
    monkeypatch.setattr(sizes, "prefix_turns_class", lambda t, n: t)
    for name, rate in cases.items():
        exact, m_exact, _ = run(name, rate)
        st, m_padded, _ = padded[name]
        assert m_padded > m_exact                        # the first program really holds more segments
        assert float(np.asarray(st.stats.hit_tokens).sum()) > 0          # the cache is in use
        for x, y in zip(jax.tree_util.tree_leaves(exact), jax.tree_util.tree_leaves(st)):
            x, y = np.asarray(x), np.asarray(y)              # the cache's arrays [I, M]: M cut to the exact's
            np.testing.assert_array_equal(x, y[..., :x.shape[-1]] if x.ndim else y)


def test_padding_turns_and_shared_prompts_changes_no_result(monkeypatch):
    """Chat (3 turns) in a program padded in turns (a power of 2, at least 4,096 requests) and shared-prompt
    slots (8), and in one of exactly its own sizes, gives the same metrics; turns are data
    (``Requests.turns``), so a session still ends after its third. A speculative and a paged lever: the padded
    program is the one :func:`test_padding_a_run_to_a_larger_program_changes_no_result` builds."""
    from sweepkit.serving import lanes as lanes_mod
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.metrics import lane_metrics
    from sweepkit.serving.workloads import load_workloads

    w, lv, cl = load_workloads()["chat"], load_levers(), load_cluster()
    cfgs = [Config("H100", lv["mtp"]), Config("H100", lv["paged"])]
    rates = np.full((2, 1), 0.4)

    def run():
        out = lanes_mod.run_configs(w, cl, cfgs, rates, early_stop=False)
        turns = {g.arrival_s.shape[-1] // g.buf_s.shape[-1] for g in out.groups}   # requests / sessions held
        return [lane_metrics(out, c, 0, w, cl.gpus, 0.0, 1.0) for c in range(2)], turns, out

    classed, t_classed, out = run()
    monkeypatch.setattr(sizes, "turns_class", lambda t, n, b: t)
    monkeypatch.setattr(sizes, "SYSTEMS_CLASS", 1)
    exact, t_exact, _ = run()
    assert t_exact == {w.turns} and min(t_classed) > w.turns    # the first program really holds more turns
    assert classed == exact
    st = out.state(0, 0, trim=False)
    assert np.all(np.isinf(st.arrival_s[w.turns * out.n_sessions:]))   # no later turn ever arrives


def test_workloads_of_similar_size_share_a_program():
    """Without the prefix cache, the five workloads (1 to 8 turns; 1 to 4 shared prompts) compile to one shape
    of at least 4,096 requests per session class up to 4,096 sessions, and past that a 6-turn workload's runs
    of 8,192 sessions fit the 4-turn program of 32,768; with the prefix cache every workload shares one
    program up to 512 sessions, and past that 1- to 3-turn workloads share programs (chat keeps its own 3
    turns), as do 6 and 8 turns, their shared prompts padded as without it."""
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import resolve
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads

    ws, lv, cl = load_workloads(), load_levers(), load_cluster()
    res = [resolve(cl, lv["baseline"])]
    shape = lambda name, prefix, n=512, b=None: sizes.shape_for(  # noqa: E731
        ws[name], cl, res, [lv["baseline"]], n, prefix, b)
    for n in (512, 4096):
        same = {shape(name, False, n) for name in ws}
        assert len(same) == 1 and next(iter(same)).requests >= max(sizes.MIN_REQUESTS, 8 * n)
    assert shape("realtime-voice", False, 32768, 8192) == shape("chat", False, 32768, 16384)
    assert shape("realtime-voice", False, 32768, 8192).turns == 4
    assert shape("coding-agent", False, 32768, 32768).turns == 8         # a layout that needs more turns
    assert len({shape(name, True) for name in ws}) == 1                 # up to 512 sessions: one class
    mid = lambda name: shape(name, True, 4096)  # noqa: E731
    assert mid("coding-agent") == mid("realtime-voice") != mid("chat")
    assert mid("chat").turns == ws["chat"].turns
    assert mid("long-context-rag") == mid("offline-batch") == mid("chat")


def test_programs_without_unreachable_phases_give_the_same_lanes(monkeypatch):
    """Reserved, colocated levers (the seed's baseline, MTP and draft) compile without the preemption, swap and
    hand-off phases (:func:`sweepkit.serving.sizes.families`), and their lanes end in the same state, leaf for
    leaf, as in a program holding every phase; a lever that needs a phase keeps it."""
    import jax

    from sweepkit.serving import lanes as lanes_mod
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config, resolve
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads

    w, lv, cl = load_workloads()["chat"], load_levers(), load_cluster()
    cfgs = [Config("H100", lv[k]) for k in ("baseline", "mtp", "draft-llama-3.2-1b")]
    rates = np.full((3, 2), [[1.5, 6.0]])        # below capacity, and past it (queues, the early stop)

    shapes, families = [], sizes.families
    shape_for = sizes.shape_for
    monkeypatch.setattr(sizes, "shape_for", lambda *a: shapes.append(shape_for(*a)) or shapes[-1])
    lean = lanes_mod.run_configs(w, cl, cfgs, rates, early_stop=True)
    monkeypatch.setattr(sizes, "families", lambda res, prefix: dict(paged=True, swap=True, pools=True))
    full = lanes_mod.run_configs(w, cl, cfgs, rates, early_stop=True)
    assert [(s.paged, s.swap, s.pools) for s in shapes] == [(False, False, False), (True, True, True)]
    for c in range(3):
        for k in range(2):
            a, b = lean.state(c, k, trim=False), full.state(c, k, trim=False)
            for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert lean.state(0, 1).stopped and not lean.state(0, 0).stopped
    fam = lambda *names: families([resolve(cl, lv[n]) for n in names], False)  # noqa: E731
    assert fam("baseline", "mtp", "tp8", "chunked-512", "w8a8-fp8") == dict(paged=False, swap=False, pools=False)
    assert fam("baseline", "paged") == dict(paged=True, swap=False, pools=False)
    assert fam("paged-swap") == dict(paged=True, swap=True, pools=False)
    assert fam("disagg-1p1d") == dict(paged=True, swap=False, pools=True)
    assert families([resolve(cl, lv["baseline"])], True)["paged"]


@given(st.integers(1, 64), st.integers(6, 17), st.integers(0, 11))
def test_a_program_holds_every_layout_its_classes_give_it(turns, log_sessions, smaller):
    """A program's turns hold the lane layout it is chosen for (bucket x turns requests, request k x bucket +
    s), are a power of 2 without the prefix cache, and at least the workload's turns with it."""
    sessions = 2 ** log_sessions
    bucket = max(sessions >> smaller, 64)
    t = sizes.turns_class(turns, sessions, bucket)
    assert t * sessions >= bucket * turns and t & (t - 1) == 0
    assert t * sessions >= sizes.MIN_REQUESTS
    assert sizes.prefix_turns_class(turns, sessions) >= turns
