"""Lean lanes (what a capacity search keeps of each lane): the same metrics as the whole final state, from a
few arrays of the run's size."""

from __future__ import annotations

import jax
import numpy as np

from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config
from sweepkit.serving.lanes import METRIC_FIELDS, run_configs
from sweepkit.serving.levers import load_levers
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.workloads import load_workloads


def _bytes(tree) -> int:
    return sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(tree))


def test_lean_lanes_give_every_metric_of_whole_ones_and_hold_less():
    w, cluster, levers = load_workloads()["chat"], load_cluster(), load_levers()
    configs = [Config("H100", levers["baseline"]), Config("H100", levers["chunked-512"])]   # one program
    rates = np.array([[0.25, 1.0], [0.5, 2.0]])
    whole = run_configs(w, cluster, configs, rates, sessions=512)      # padded past the run: 512 sessions held
    lean = run_configs(w, cluster, configs, rates, sessions=512, lean=True)
    for c in range(2):
        for r in range(2):
            a = lane_metrics(whole, c, r, w, cluster.gpus, 700.0, 2.0)
            b = lane_metrics(lean, c, r, w, cluster.gpus, 700.0, 2.0)
            assert a.keys() == b.keys()
            assert all(np.array_equal(a[k], b[k], equal_nan=True) for k in a), c
            st = lean.state(c, r)
            assert st.rows is None and st.plan is None and st.buf_s is None
            assert st.arrival_s.shape == whole.state(c, r).arrival_s.shape
    held = {f: getattr(lean.groups[0], f) for f in METRIC_FIELDS}
    assert _bytes(lean.groups) == _bytes(held)
    assert 4 * _bytes(lean.groups) < _bytes(whole.groups)
