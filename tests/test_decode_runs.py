"""A run of decode steps that goes on past a finished row gives what boundaries after every finish give.

A planned run (``sweepkit.serving.decode_run``) goes on past a row's finish when nothing could take its place
(empty queue, every busy row decoding, no prefix cache): the rows left are priced step by step, the finished
row's finish time is its step's end, the router counts it as gone from then, and the run ends before its
session's next turn is released. The same lanes run with the run ending at every finish (the engine before
it went on) give the same requests' times, histogram and accumulators, in fewer iterations.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("x64")


def _final(lever: str, rate: float, extend: bool, monkeypatch):
    from sweepkit.serving import cluster_sim, decode_run, schedule
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.lanes import lane_inputs
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads

    plan = decode_run.decode_run
    monkeypatch.setattr(schedule, "decode_run",
                        lambda *a: plan(*a[:-2], a[-2] & extend, a[-1]))   # extend: the argument before shape
    pol, req, (load,), shape = lane_inputs(load_workloads()["chat"], load_cluster(),
                                           Config("H100", load_levers()[lever]), rate)
    run = jax.jit(lambda p, r, w: cluster_sim.simulate(p, r, w, shape))     # a new function: traced afresh
    return jax.device_get(run(pol, req, load))


@pytest.mark.parametrize("lever", ["mtp", "disagg-levers"])
def test_a_run_past_finishes_equals_boundaries_at_every_finish(lever, monkeypatch):
    """Chat (three turns, least-loaded routing over two instances; MTP drafts; and 1P1D with paged KV and the
    pull hand-off, whose decode instance runs past finishes while the prefill side routes to it)."""
    step_by_step = _final(lever, 1.0, False, monkeypatch)
    extended = _final(lever, 1.0, True, monkeypatch)
    assert not extended.stopped and not extended.truncated
    assert extended.iters < 0.95 * step_by_step.iters
    for name in ("arrival_s", "first_s", "finish_s", "xfer_start_s", "xfer_land_s"):
        a, b = getattr(step_by_step, name), getattr(extended, name)
        np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
        np.testing.assert_allclose(a[np.isfinite(a)], b[np.isfinite(b)], rtol=1e-12, atol=1e-9, err_msg=name)
    np.testing.assert_array_equal(step_by_step.rejected, extended.rejected)
    np.testing.assert_array_equal(step_by_step.hist, extended.hist)
    for k, v in step_by_step.stats.items():
        np.testing.assert_allclose(v, extended.stats[k], rtol=1e-9, atol=1e-9, err_msg=k)
    np.testing.assert_allclose(step_by_step.little_area, extended.little_area, rtol=1e-9)
