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
