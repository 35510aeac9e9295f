"""A plan's programs: a lane gives the same results in a program of more rows per instance and more sessions
than its own (so a plan's calls of several batch caps and loads share one), and a plan's search runs every
call in the one program :func:`sweepkit.plan.search.program_cover` sizes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from sweepkit.serving import lanes as lanes_mod
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config
from sweepkit.serving.levers import load_levers
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.workloads import load_workloads

GRIDS = Path(__file__).resolve().parents[1] / "grids"


def test_a_lane_is_the_same_in_a_program_of_more_slots_and_sessions():
    """Batch cap 4 at a load that queues (16 sessions at once): the same finish times and metrics in its own
    program (4 rows per instance, 64 sessions) and in one of 32 rows and 512 sessions; a cap of 32 in that
    program gives other finish times (the cap binds, so rows past it really are never admitted)."""
    w = load_workloads(GRIDS / "tiny-workloads.toml")["tiny"]            # 16 sessions at any load
    cl = load_cluster(GRIDS / "tiny-cluster.toml")
    cap4 = dataclasses.replace(cl, batch_cap=4)
    cfg, rate = [Config("H100", load_levers()["baseline"])], np.full((1, 1), 200.0)
    own = lanes_mod.run_configs(w, cap4, cfg, rate, early_stop=False)
    big = lanes_mod.run_configs(w, cap4, cfg, rate, early_stop=False, slots=32, sessions=512)
    wide = lanes_mod.run_configs(w, cl, cfg, rate, early_stop=False, sessions=512)
    held = lambda out: (out.state(0, 0, trim=False).rows.rid.shape[-1],  # noqa: E731  rows per instance,
                        out.state(0, 0, trim=False).buf_s.shape[-1])      # sessions
    assert held(own) == (4, 64) and held(big) == held(wide) == (32, 512)
    a, b, c = (out.state(0, 0) for out in (own, big, wide))
    assert np.isfinite(a.finish_s).sum() == w.min_sessions
    np.testing.assert_array_equal(a.first_s, b.first_s)
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    assert not np.array_equal(b.finish_s, c.finish_s)
    ma, mb = (lane_metrics(out, 0, 0, w, cl.gpus, 0.0, 1.0) for out in (own, big))
    for k, v in ma.items():
        if isinstance(v, float) and np.isfinite(v):
            assert mb[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k


def test_a_plans_calls_share_one_program(monkeypatch):
    """Llama-3.2-1B on one H100, realtime-voice, one candidate a round: the best bound (no draft) and the next
    (MTP, one draft pass) would need a program each; under the plan's cover every call of both capacity
    searches, at every load they probe, runs in the one program sized for both (draft passes, rows, sessions)."""
    from sweepkit.plan.build import run_screen
    from sweepkit.plan.search import order, plan_workload, program_cover, run_search
    from sweepkit.plan.space import enumerate_space, make_space
    from sweepkit.serving.workloads import get_workload

    fixed = dict(tp=1, kv="paged", weight_format="bf16", kv_format="bf16", batching="chunked", token_budget=2048,
                 batch_cap=64, spec=["none", "mtp:1"])
    table = enumerate_space(make_space("llama-3.2-1b", ["H100"], 1, fixed))
    w = get_workload("realtime-voice")
    bound = run_screen(table, "llama-3.2-1b", w, None, None)
    shapes, calls = [], []
    program = lanes_mod._program

    def spy(*args, **kwargs):
        out = program(*args, **kwargs)
        shapes.append(out[1])
        return out

    monkeypatch.setattr(lanes_mod, "_program", spy)
    res = run_search(table, bound, "llama-3.2-1b", w, per_round=1, max_simulated=2, stop="bound",
                     progress=calls.append)
    assert sorted(table["spec"][s.row] for s in res.simulated) == ["mtp:1", "none"] and len(calls) == 2
    assert all(s.objective > 0 for s in res.simulated)
    cover = program_cover(table, bound, order(bound, bound["tok_s_per_gpu"]), plan_workload(w), 2)
    assert len(shapes) > 2 and len(set(shapes)) == 1
    (shape,) = set(shapes)
    assert (shape.gamma_max, shape.slots, shape.sessions) == (1, 64, lanes_mod.sizes.session_capacity(
        lanes_mod.sizes.bucket_of(cover.sessions), False))


def test_a_call_is_padded_at_most_twice_its_own_rows_and_instances():
    """The cover pads a call's rows per instance to the largest cover batch cap up to 2x its own and 128, and
    holds only cover configurations of up to 2x its instances (a larger program costs every lane more per
    step)."""
    from sweepkit.plan.search import PAD, PADDED_ROWS, Cover, config_of
    from sweepkit.plan.space import enumerate_space, make_space

    table = enumerate_space(make_space("llama-3.1-8b", ["H100"], 8, dict(mode="colocated", pp=1)))
    by_inst = {int(table["instances"][i]): i for i in range(len(table["tp"]))}
    rows = [by_inst[n] for n in (1, 2, 4, 8)]
    cover = Cover(rows, [config_of(table, i) for i in rows], (64, 128, 512), 0)
    assert (PAD, PADDED_ROWS) == (2, 128)
    assert [cover.for_call(table, [by_inst[1]], 8, cap)[1] for cap in (32, 64, 128, 256, 512)] == [
        64, 128, 128, 256, 512]                                  # rows padded up to 128 at most
    held = lambda n: sorted(c.lever.instances for c in cover.for_call(table, [by_inst[n]], 8, 64)[0])  # noqa: E731
    assert held(1) == [1, 2] and held(4) == [1, 2, 4, 8] and cover.for_call(table, [by_inst[1]], 16, 64)[0] == []
