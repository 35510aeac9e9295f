"""Programs built ahead of their lanes: one build per shape, on a build thread, shared by the lanes after it."""

from __future__ import annotations

import dataclasses
import threading

import jax
import numpy as np

from sweepkit.serving import programs
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config
from sweepkit.serving.lanes import lane_inputs
from sweepkit.serving.levers import load_levers
from sweepkit.serving.workloads import load_workloads


def test_a_program_built_ahead_serves_every_lane_of_its_shape(monkeypatch):
    w, cluster, levers = load_workloads()["chat"], load_cluster(), load_levers()
    with jax.enable_x64(True):
        pol, req, loads, shape = lane_inputs(w, cluster, Config("H100", levers["baseline"]), [0.25, 0.5])
    with programs._LOCK:
        programs._COMPILED.clear()
    built = []
    real = programs.compile_cached

    def counted(*args, **kwargs):
        built.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(programs, "compile_cached", counted)
    fields = [{f.name: getattr(ld, f.name) for f in dataclasses.fields(ld)} for ld in loads]
    with jax.enable_x64(True):
        programs.build_ahead(pol, req, loads[0], shape)
        programs.build_ahead(pol, req, loads[1], shape)        # the same shape: being built already
        lanes = programs.submit_lanes([pol], [fields], req, shape)
        states = programs.collect(lanes)
        again = programs.collect(programs.submit_lanes([pol], [[fields[1]]], req, shape))
    assert len(built) == len(programs.lane_devices())          # one build per device, none by a lane
    assert all(name.startswith("sweepkit-build") for name in built)
    assert states.iters.shape == (1, 2) and np.all(states.iters > 0)
    assert all(np.array_equal(a[0, 1], b[0, 0], equal_nan=True)
               for a, b in zip(jax.tree_util.tree_leaves(states), jax.tree_util.tree_leaves(again)))


def test_lanes_of_a_ready_program_run_while_another_program_builds(monkeypatch):
    """A lane is queued only once its program is ready: while one program's build is held up, the lanes of a
    program built before run to the end on the lane threads (none of them is held by a lane waiting for the
    other build; with one core too), and the held-up lanes run once their build is done."""
    from concurrent.futures import wait

    w, cluster, levers = load_workloads()["chat"], load_cluster(), load_levers()
    with jax.enable_x64(True):
        pol, req, loads, shape = lane_inputs(w, cluster, Config("H100", levers["baseline"]), [0.25, 0.5])
    slow_shape = shape._replace(max_iters=shape.max_iters - 1)      # another program of the same inputs
    gate, real = threading.Event(), programs.compile_cached

    def gated(name, key, *args, **kwargs):
        if key[0] == slow_shape:
            gate.wait(300)
        return real(name, key, *args, **kwargs)

    monkeypatch.setattr(programs, "compile_cached", gated)
    fields = [{f.name: getattr(ld, f.name) for f in dataclasses.fields(ld)} for ld in loads]
    many = [fields * programs.lane_threads()]                  # more held-up lanes than lane threads
    try:
        with jax.enable_x64(True):
            programs.collect(programs.submit_lanes([pol], [fields[:1]], req, shape))    # built before the gate
            slow = programs.submit_lanes([pol], many, req, slow_shape)
            fast = programs.submit_lanes([pol], [fields], req, shape)
            done, pending = wait(fast[0], timeout=240)
        assert not pending and not any(f.done() for f in slow[0])
    finally:
        gate.set()
    held = programs.collect(slow)
    ran = programs.collect(fast)
    assert np.array_equal(held.iters[0, :2], ran.iters[0]) and np.all(ran.iters > 0)


def test_a_failed_build_fails_every_lane_of_its_program_once(monkeypatch):
    """A program whose build fails is not built again by each of its lanes: every lane gets the build's error."""
    w, cluster, levers = load_workloads()["chat"], load_cluster(), load_levers()
    with jax.enable_x64(True):
        pol, req, loads, shape = lane_inputs(w, cluster, Config("H100", levers["baseline"]), [0.25, 0.5])
    broken_shape = shape._replace(max_iters=shape.max_iters - 2)
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("no room to build")

    monkeypatch.setattr(programs, "compile_cached", broken)
    fields = [{f.name: getattr(ld, f.name) for f in dataclasses.fields(ld)} for ld in loads]
    with jax.enable_x64(True):
        lanes = programs.submit_lanes([pol], [fields], req, broken_shape)
    for lane in lanes[0]:
        assert "no room to build" in str(lane.exception(timeout=60))
    assert len(calls) == len(programs.lane_devices())


def test_a_program_entry_lets_go_of_the_lanes_queued_on_it():
    """A program's entry (a future kept as long as the program) holds no call's lanes once they are queued."""
    import gc
    import weakref
    from concurrent.futures import Future

    class Lanes:
        ran = 0

        def __call__(self):
            Lanes.ran += 1

    entry, lanes = Future(), Lanes()
    gone = weakref.ref(lanes)
    programs._after([entry], lanes)
    del lanes
    assert gone() is not None                                  # waiting for the build: held
    entry.set_result("program")
    gc.collect()
    assert Lanes.ran == 1 and gone() is None                   # queued: let go, though the entry lives on
