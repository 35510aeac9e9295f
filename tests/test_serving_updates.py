"""The engine's scatter-free updates equal JAX's scatters, and its loop compiles into one function.

By default (``sliced=True`` here; ``SWEEPKIT_XLA_OPTIONS=0`` turns it off) ``sweepkit.serving.engine.updates`` writes
``a.at[idx].set/add/min/max(v, mode="drop")`` as dynamic-update-slices on XLA:CPU; ``row_order.arrival_order`` ranks rows by counting instead of sorting; ``first_true`` replaces
``jnp.nonzero(size=...)``. Each is checked against the JAX operation it replaces on random inputs
(negative, out-of-range and repeated indices included), the engine's compiled loop is checked to be one
function (XLA's ``xla_cpu_small_call``) with no scatter or sort left in it, and lanes of both engines are
checked to end in the same states.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit import xla_options
from sweepkit.serving.engine.row_order import arrival_order, masked_cumsum, masked_rank, ordered_cumsum
from sweepkit.serving.engine.updates import add_at, first_true, max_at, min_at, rows_updated, set_at

N = 7
_index = st.integers(-N - 2, N + 2)
OUT = 10 ** 6
"""An index out of every array's range: rows padded with it are skipped (the inputs of a Hypothesis example are
padded to one of a few lengths, so that every example runs one compiled program)."""


def _padded(values, length, fill):
    """``values`` (a list) padded to ``length`` with ``fill``."""
    return list(values) + [fill] * (length - len(values))


_UPDATE = {"set": set_at, "add": add_at, "min": min_at, "max": max_at}


@functools.partial(jax.jit, static_argnames=("op", "sliced"))
def _update_jit(a, i, v, op, sliced):
    return _UPDATE[op](a, i, v, sliced=sliced)


@settings(max_examples=60, deadline=None)
@given(st.lists(_index, min_size=1, max_size=6), st.lists(st.floats(-5, 5), min_size=6, max_size=6),
       st.sampled_from(["set", "add", "min", "max"]))
def test_vector_updates_equal_jax_scatters_with_drop(idx, vals, op):
    a = jnp.arange(N, dtype=jnp.float32) * 1.5 - 3.0
    i = jnp.asarray(idx, jnp.int32)
    v = jnp.asarray(vals[:len(idx)], jnp.float32)
    # one index (one slice update) or padded to 6 with an index out of range (a loop; the padding skipped)
    length = 1 if len(idx) == 1 else 6
    ours = _update_jit(a, jnp.asarray(_padded(idx, length, N), jnp.int32),
                       jnp.asarray(_padded(vals[:len(idx)], length, 4.0), jnp.float32), op=op, sliced=True)
    ref = getattr(a.at[i], op)(v, mode="drop")
    if op == "set" and len(set(k % N if -N <= k < N else k for k in idx)) < len(idx):
        # repeated indices: XLA:CPU's scatter applies them in order, the last write wins (as ours)
        ref = a
        for k, x in zip(idx, v):
            ref = ref.at[k].set(x, mode="drop")
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.integers(-4, 5), st.integers(-3, 8), st.booleans())
def test_row_and_2d_updates_equal_jax(i, j, scalar):
    a = jnp.arange(4 * 6, dtype=jnp.int32).reshape(4, 6)
    i32 = jnp.int32(i)
    if scalar:   # a whole row at a scalar index
        row = jnp.full((6,), -1, jnp.int32)
        assert (_update_jit(a, i32, row, op="set", sliced=True) == a.at[i].set(row, mode="drop")).all()
    else:        # one entry per column index, at row i
        cols = jnp.asarray([j, j + 1, 0], jnp.int32)
        vals = jnp.asarray([7, 8, 9], jnp.int32)
        assert (_update_jit(a, (i32, cols), vals, op="set", sliced=True) == a.at[i, cols].set(vals, mode="drop")).all()


def test_boolean_and_scalar_values_broadcast():
    a = jnp.zeros((5,), bool)
    for sliced in (True, False):
        assert set_at(a, jnp.asarray([1, 9, 3]), True, sliced).tolist() == [False, True, False, True, False]
        assert add_at(jnp.zeros((3,)), 2, 1.5, sliced).tolist() == [0.0, 0.0, 1.5]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=20), st.integers(1, 8))
def test_first_true_equals_nonzero_with_size(mask, size):
    # the mask padded with false entries to 20: the same indices, the same fill past the last true one
    ours, ref = _first_true_jit(jnp.asarray(_padded(mask, 20, False)), jnp.int32(len(mask)), size=size)
    want = np.concatenate([np.flatnonzero(mask), np.full(size, len(mask))])[:size]
    assert ours.tolist() == ref.tolist() == want.tolist()


@functools.partial(jax.jit, static_argnames="size")
def _first_true_jit(mask, fill, size):
    return first_true(mask, size, fill, sliced=True), jnp.nonzero(mask, size=size, fill_value=fill)[0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, np.inf]), min_size=1, max_size=16))
def test_arrival_order_is_a_stable_argsort(times):
    # padded to 16 rows arriving at infinity: after every row (ties by slot), in slot order
    n, padded = len(times), _padded(times, 16, np.inf)
    arr = jnp.asarray(padded, jnp.float64) if jax.config.jax_enable_x64 else jnp.asarray(padded)
    ref = np.argsort(np.asarray(times), kind="stable")
    for sliced in (True, False):
        order, inverse = _arrival_order_jit(arr, sliced=sliced)
        assert order.tolist() == ref.tolist() + list(range(n, 16))
        assert inverse.tolist() == np.argsort(ref, kind="stable").tolist() + list(range(n, 16))


@functools.partial(jax.jit, static_argnames="sliced")
def _arrival_order_jit(arr, sliced):
    return arrival_order(arr, sliced)



@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_index, min_size=3, max_size=3), min_size=1, max_size=6),
       st.sampled_from(["set", "add", "min", "max"]), st.sampled_from([1, 3]), st.booleans())
def test_rows_updated_equals_scatters_in_row_major_order(rows, op, width, sliced):
    """Several arrays updated over one list of rows (a boundary's events: [K] or [K, P] indices) equal one
    scatter per array of the flattened indices, repeated indices applied in row-major order."""
    # padded to 6 rows of indices out of range (skipped)
    idx = jnp.asarray(_padded([r[:width] for r in rows], 6, [OUT] * width), jnp.int32)
    idx = idx[:, 0] if width == 1 else idx
    vals = jnp.arange(idx.size, dtype=jnp.float32).reshape(idx.shape) * 0.75 - 2.0
    a = jnp.arange(N, dtype=jnp.float32) * 1.5 - 3.0
    b = jnp.arange(N + 3, dtype=jnp.int32)
    ours_a, ours_b = _rows_updated_jit(a, b, idx, vals, op=op, sliced=sliced)
    ref_a, ref_b = a, b
    for k, x in zip(np.asarray(idx).ravel().tolist(), np.asarray(vals).ravel().tolist()):
        ref_a = getattr(ref_a.at[k], op)(x, mode="drop")
        ref_b = ref_b.at[k].add(5, mode="drop")
    np.testing.assert_allclose(np.asarray(ours_a), np.asarray(ref_a), rtol=1e-6)
    assert ours_b.tolist() == ref_b.tolist()


@functools.partial(jax.jit, static_argnames=("op", "sliced"))
def _rows_updated_jit(a, b, idx, vals, op, sliced):
    return rows_updated([(a, idx, vals, op), (b, idx, 5, "add")], sliced=sliced)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.5, np.inf]), st.integers(0, 40), st.booleans()),
                min_size=1, max_size=24))
def test_masked_ordered_sums_equal_the_sums_over_the_sorted_rows(rows):
    """Cumulative sums and ranks in arrival order (ties by slot), whether few rows are masked (counted row by
    row) or many (the order of all rows), equal those of a stable sort of the rows. The rows are
    padded to 24 with unmasked rows arriving at 0 (the earliest time) that hold large values: they
    move no sum and no rank, and every unmasked row's rank is the number of rows, 24."""
    S = 24
    arr = jnp.asarray(_padded([r[0] for r in rows], S, 0.0), jnp.float32)
    vals = jnp.asarray(_padded([float(r[1]) for r in rows], S, 1000.0), jnp.float32)
    mask = jnp.asarray(_padded([r[2] for r in rows], S, False))
    ref_order = np.argsort(np.asarray([r[0] for r in rows], np.float32), kind="stable")
    running, ref_cum, ref_rank = 0.0, np.zeros(S), np.full(S, S)
    for rank, i in enumerate(k for k in ref_order if rows[k][2]):
        running += rows[i][1]
        ref_cum[i], ref_rank[i] = running, rank
    cum, ordered, ranks = (np.asarray(x) for x in _ordered_sums_jit(vals, arr, mask))
    m = np.asarray(mask)
    np.testing.assert_array_equal(cum[m], ref_cum[m])
    np.testing.assert_array_equal(cum[m], ordered[m])
    assert ranks.tolist() == ref_rank.tolist()


@jax.jit
def _ordered_sums_jit(vals, arr, mask):
    order = lambda: arrival_order(arr)   # noqa: E731
    return masked_cumsum(vals, arr, mask, order), ordered_cumsum(vals, order(), mask), masked_rank(arr, mask, order)


def test_the_engines_loop_compiles_into_one_function_without_scatters():
    """Run in a fresh process with the default setting, so the backend options are read as sweepkit sets them
    at import. The process keeps its compilation in the tests' cache (``$SWEEPKIT_JAX_CACHE``, keyed by the
    XLA flags and compile options), where the other tests of chat's baseline program find it."""
    if not xla_options.checked_jaxlib(metadata.version("jaxlib")):
        pytest.skip("the backend options are added only for the jaxlib releases they were checked on")
    code = textwrap.dedent("""
        import numpy as np, jax
        import sweepkit
        from sweepkit.jaxcache import enable_persistent_cache
        from sweepkit.serving import programs
        from sweepkit.serving.cluster import load_cluster
        from sweepkit.serving.config import Config
        from sweepkit.serving.lanes import lane_inputs
        from sweepkit.serving.levers import load_levers
        from sweepkit.serving.workloads import load_workloads
        enable_persistent_cache()
        w = load_workloads()["chat"]
        pol, req, (load,), shape = lane_inputs(w, load_cluster(), Config("H100", load_levers()["baseline"]), 0.25)
        with jax.enable_x64(True):
            text = programs._run.lower(pol, req, load, shape=shape).compile(
                programs.engine_compile_options("cpu")).as_text()
        print(text.count("xla_cpu_small_call"), text.count(" scatter("), text.count(" sort("))
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "SWEEPKIT_XLA_OPTIONS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    calls, scatters, sorts = map(int, out.stdout.split()[-3:])
    assert calls >= 1 and scatters == 0 and sorts == 0


def test_backend_options_are_on_by_default_and_added_only_where_xla_flags_has_none():
    checked = xla_options.checked_jaxlib(metadata.version("jaxlib"))
    off = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2", "SWEEPKIT_XLA_OPTIONS": "0"}
    try:
        assert not xla_options.apply(off) and off["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
        for value in (None, "1", " 1 "):
            env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
            if value is not None:
                env["SWEEPKIT_XLA_OPTIONS"] = value
            assert xla_options.apply(env) == checked
            if checked:
                assert env["XLA_FLAGS"] == ("--xla_force_host_platform_device_count=2 --xla_backend_extra_options="
                                            + ",".join(xla_options.BACKEND_OPTIONS))
                assert xla_options.apply(env) and env["XLA_FLAGS"].count("xla_backend_extra_options") == 1
        own = {"XLA_FLAGS": "--xla_backend_extra_options=xla_cpu_disable_loop_unrolling"}
        assert not xla_options.apply(own) and own["XLA_FLAGS"].endswith("unrolling")
    finally:
        xla_options._ON = xla_options.BACKEND_OPTIONS[0] in os.environ.get("XLA_FLAGS", "")   # this process's own


BOTH_ENGINES = ("baseline", "mtp", "disagg-1p1d", "modern-spec", "prefix-cache", "paged-swap", "disagg-levers")
"""The levers of the program :func:`_every_phase` builds: colocated, MTP, the disaggregated push and pull
hand-offs (the push's updates once copied whole arrays inside nested branches), paged KV with swap, the prefix
cache, and modern-spec (chunked batching, paged FP8 KV, the prefix cache and MTP: the few-row ordered sums and
the prefix cache's pins visited row by row)."""


@functools.cache
def _every_phase():
    """Chat's program sized for every lever of :data:`BOTH_ENGINES` (the prefix cache's arrays, paged KV, swap
    and pools: every phase of the engine), each lever's policy, a load of 60 sessions at 0.5 sessions/s (no
    early stop), and the program compiled once as the engine compiles it in this process: ``(pols, req, load,
    shape, compiled)``."""
    from sweepkit.serving import lanes, programs
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config, policy, resolve
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads

    w, cl, lv = load_workloads()["chat"], load_cluster(), load_levers()
    levers = [lv[n] for n in BOTH_ENGINES]
    with jax.enable_x64(True):
        sized = [resolve(cl, lever) for lever in levers]
        cap, shape, req = lanes._program(w, cl, 64, True, sized, levers)
        pols = [policy(cl, Config("H100", lever), res, w.name, shape.gamma_max, shape.instances)
                for lever, res in zip(levers, sized)]
        ses = lanes._sessions(w, 64)
        load = programs.as_load(lanes._padded(lanes.load_for(w, ses, 0.5, 60, False), cap))
        compiled = programs._run.lower(pols[0], req, load, shape=shape).compile(
            programs.engine_compile_options("cpu"))
    pols, req, load = jax.tree_util.tree_map(np.asarray, (pols, req, load))
    return pols, req, load, shape, compiled


def test_both_engines_end_in_the_same_states(tmp_path):
    """Lanes of the default engine (one function, no scatters; this process's) and of
    ``SWEEPKIT_XLA_OPTIONS=0`` (kernel by kernel, scatters; a fresh process, which compiles the same program
    from the same inputs) end in the same states: integers and flags equal, times and accumulators to rounding
    (LLVM orders some float sums differently). Every lever of :data:`BOTH_ENGINES` runs in one program that
    holds every phase (a lever's switches are data: a phase it does not use is skipped at run time)."""
    if not xla_options.loop_options_on():
        pytest.skip("this process runs without the backend options (jaxlib outside CHECKED_JAXLIB or XLA_FLAGS)")
    import pickle

    pols, req, load, shape, compiled = _every_phase()
    with jax.enable_x64(True):
        states = [jax.tree_util.tree_map(np.asarray, compiled(pol, req, load)) for pol in pols]
    assert all(np.isfinite(st.finish_s).sum() > 100 and not st.stopped for st in states)   # every lane ran
    ours = [x for st in states for x in jax.tree_util.tree_leaves(st)]
    inputs = tmp_path / "inputs.pkl"
    inputs.write_bytes(pickle.dumps((pols, req, load, shape)))
    code = textwrap.dedent("""
        import pickle, sys, numpy as np, jax
        import sweepkit
        from sweepkit.serving import programs
        pols, req, load, shape = pickle.loads(open(sys.argv[1], "rb").read())
        with jax.enable_x64(True):
            run = programs._run.lower(pols[0], req, load, shape=shape).compile(programs.engine_compile_options("cpu"))
            leaves = [jax.tree_util.tree_leaves(jax.tree_util.tree_map(np.asarray, run(p, req, load))) for p in pols]
        np.savez(sys.argv[2], *[x for lane in leaves for x in lane])
    """)
    path = tmp_path / "kernels.npz"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(SWEEPKIT_XLA_OPTIONS="0", SWEEPKIT_JAX_CACHE="off")
    run = subprocess.run([sys.executable, "-c", code, str(inputs), str(path)], capture_output=True, text=True,
                         env=env, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    with np.load(path) as data:
        theirs = [data[k] for k in sorted(data.files, key=lambda f: int(f.split("_")[1]))]
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs):
        if np.issubdtype(a.dtype, np.floating):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        else:
            assert np.array_equal(a, b)


@pytest.mark.parametrize("value", ["yes", "2"])
def test_a_mistyped_setting_is_refused_in_one_line(value, tmp_path, monkeypatch):
    """Any other value than 1, 0 or unset leaves the options off and the serving engine refuses to run:
    one line naming the variable, its value and what is allowed, exit status 2 from the CLI."""
    env = {"XLA_FLAGS": "", "SWEEPKIT_XLA_OPTIONS": value}
    assert not xla_options.apply(env) and env["XLA_FLAGS"] == ""
    assert f"SWEEPKIT_XLA_OPTIONS = {value!r} is not allowed" in xla_options.setting_problem(env)
    for ok in ("", "0", "1", " 1 "):
        assert xla_options.setting_problem({"SWEEPKIT_XLA_OPTIONS": ok}) is None
    cli = Path(sys.executable).with_name("sweepkit")
    out = subprocess.run([str(cli), "simulate", "grids/serving-small.toml", "--warehouse", str(tmp_path / "wh")],
                         capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[1],
                         env={**os.environ, "SWEEPKIT_XLA_OPTIONS": value})
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        f"Error: SWEEPKIT_XLA_OPTIONS = {value!r} is not allowed; expected 1 or unset (on), 0 (off)"]
    assert not (tmp_path / "wh").exists()
    from sweepkit.errors import InputError                   # the engine refuses Python callers too
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.lanes import run_configs
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads
    monkeypatch.setenv("SWEEPKIT_XLA_OPTIONS", value)
    with pytest.raises(InputError, match=f"SWEEPKIT_XLA_OPTIONS = {value!r} is not allowed"):
        run_configs(load_workloads()["chat"], load_cluster(), [Config("H100", load_levers()["baseline"])], [1.0])


def test_region_analysis_drops_copies_and_changes_no_result():
    """The engine compiles with copy insertion's region analysis (where this jaxlib was checked): fewer copies
    in the program, and the final state of a chat lane equal leaf for leaf to the program compiled without it.
    The program is chat's baseline at 0.25 requests/s, the one the fresh process above and the programs'
    tests build."""
    from sweepkit.serving import programs
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.lanes import lane_inputs
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads

    options = xla_options.engine_compile_options("cpu")
    if not xla_options.checked_jaxlib(metadata.version("jaxlib")):
        assert options is None
        pytest.skip("jaxlib outside CHECKED_JAXLIB: the engine compiles with XLA's defaults")
    assert options == dict(xla_options.DEFAULT_COMPILE_OPTIONS, **(xla_options.ENGINE_COMPILE_OPTIONS
                                                                   if xla_options.loop_options_on() else {}))
    assert xla_options.engine_compile_options("gpu") is None
    w = load_workloads()["chat"]
    with jax.enable_x64(True):
        pol, req, (load,), shape = lane_inputs(w, load_cluster(), Config("H100", load_levers()["baseline"]), 0.25)
        lowered = programs._run.lower(pol, req, load, shape=shape)
        plain = lowered.compile(dict(options, xla_cpu_copy_insertion_use_region_analysis=False))
        region = lowered.compile(options)
        copies = [ex.as_text().count(" copy(") for ex in (plain, region)]
        states = [jax.tree_util.tree_leaves(jax.tree_util.tree_map(np.asarray, ex(pol, req, load)))
                  for ex in (plain, region)]
    assert copies[1] < 0.75 * copies[0]                        # measured on this program: 212 -> 118
    assert int(states[0][0].size) > 0 and len(states[0]) == len(states[1])
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(*states))


def test_a_boundary_updates_the_prefix_cache_arrays_in_place():
    """A boundary takes the prefix cache's arrays [I, M] whole, flat, from its instance's offset, and updates
    them in place: the optimised program of every phase (paged KV and swap, the prefix cache, disaggregated
    pools) holds no copy of one. A copy would pass over every instance's segments at every boundary (an
    eviction not ordered after the plan's reads of the cached flags was found to cost one). The program is
    :func:`_every_phase`'s, which the two engines' lanes above run."""
    if not xla_options.loop_options_on():
        pytest.skip("this process runs without the backend options (jaxlib outside CHECKED_JAXLIB or XLA_FLAGS)")
    import re

    *_, shape, compiled = _every_phase()
    text = compiled.as_text()
    I, M = shape.instances, shape.systems + shape.requests
    assert shape.prefix and shape.paged and shape.swap and shape.pools and I > 1
    assert text.count(f"[{I},{M}]") > 0                                  # the arrays are in the program
    assert re.findall(rf"= \w+\[(?:{I * M}|{I},{M})\]\{{[0-9,]*\}} copy\(", text) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_index, st.integers(0, 30), st.integers(0, 30)), min_size=1, max_size=6),
       st.sampled_from(["set", "add", "min", "max"]), st.sampled_from([1, 3]), st.booleans())
def test_a_tally_sees_each_entry_s_value_just_before_its_update(rows, op, repeats, sliced):
    """A tally summed over the entries equals one computed entry by entry in row-major order from the value
    just before each entry's update (and the entry's ``gathered`` value), where indices repeat in the first
    ``repeats`` columns (a shared system prompt in every row's chain) and the other columns hold distinct
    indices (session segments)."""
    K, KMAX = len(rows), 6
    if repeats == 3:                    # any column may repeat an index (negative ones count from the end)
        idx = [[r[0], r[1] % (N + 4) - 2, r[2] % N] for r in rows]
    else:                               # past column 0, distinct indices (10**6: out of range, skipped)
        idx = [[r[0] % (N + 3), N + 3 + k, N + 3 + K + k if r[1] % 2 else OUT] for k, r in enumerate(rows)]
    idx = _padded(idx, KMAX, [OUT] * 3)  # padded to 6 rows out of range (skipped)
    with jax.enable_x64(True):
        idx = jnp.asarray(idx, jnp.int32)
        a = jnp.arange(N + 3 + 2 * KMAX, dtype=jnp.float64) * 2.0 - 5.0
        vals = (jnp.arange(idx.size, dtype=jnp.float64).reshape(idx.shape) % 7) - 3.0

        extra = (jnp.arange(idx.size, dtype=jnp.float64).reshape(idx.shape) % 5) * 10.0   # read before, per entry
        ours, sums = _tallied_jit(a, idx, vals, extra, op=op, sliced=sliced, repeats=repeats)
        ref, want = a, [0.0, 0.0]
        for k, x, g in zip(*(np.asarray(z).ravel().tolist() for z in (idx, vals, extra))):
            j = k + a.shape[0] if k < 0 else k
            if 0 <= j < a.shape[0]:
                old = float(ref[j])
                want = [want[0] + old * (j % 3 + 1) + x + g, want[1] + (old > 0)]
            ref = getattr(ref.at[k], op)(x, mode="drop")
    assert ours.tolist() == ref.tolist()
    assert [float(s) for s in sums] == want


def _tally(i, old, v, g):
    return old * (i % 3 + 1) + v + g, jnp.where(old > 0, 1.0, 0.0)


@functools.partial(jax.jit, static_argnames=("op", "sliced", "repeats"))
def _tallied_jit(a, idx, vals, extra, op, sliced, repeats):
    (ours,), sums = rows_updated([(a, idx, vals, op)], sliced=sliced, tally=_tally, repeats=repeats,
                                 gathered=(extra,))
    return ours, sums
