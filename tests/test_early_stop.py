"""The capacity search's early stop: a lane stops only once attainment < 0.9 is certain for the full run.

The stop counts the certain misses of requests surely in the measured window (after the n_drop-th arrival, at
or before the last session start): TTFT misses at the first token, TPOT misses at the finish, requests still
waiting past the TTFT SLO, and requests whose TPOT already exceeds its SLO before they finish. It stops when
they exceed 0.1 x the largest window the run can have (n - n_drop). Every test runs real lanes.
"""

import dataclasses

import numpy as np
import pytest

from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config
from sweepkit.serving.lanes import WARMUP_FRACTION, run_configs
from sweepkit.serving.levers import load_levers
from sweepkit.serving.metrics import SLO_ATTAINMENT, lane_metrics
from sweepkit.serving.workloads import load_workloads

CL = load_cluster()
LV = load_levers()


def _lanes(w, lever, rates, early_stop):
    lanes = run_configs(w, CL, [Config("H100", LV[lever])], np.asarray([rates], float), early_stop=early_stop)
    return lanes, [lane_metrics(lanes, 0, r, w, CL.gpus, 100.0, 3.0) for r in range(len(rates))]


@pytest.fixture(scope="module")
def voice_near_capacity():
    """Realtime voice (200 sessions, 1,200 requests) on the H100 baseline around its capacity (~0.49/s)."""
    w = load_workloads()["realtime-voice"]
    rates = [0.39, 0.49, 0.52, 0.56, 0.8]
    stopping, m_stop = _lanes(w, "baseline", rates, True)
    full, m_full = _lanes(w, "baseline", rates, False)
    return w, rates, stopping, m_stop, full, m_full


def _passes(m):
    return m["attainment"] >= SLO_ATTAINMENT and not m["stopped_early"]


def test_the_stop_never_changes_a_verdict(voice_near_capacity):
    _, rates, _, m_stop, _, m_full = voice_near_capacity
    assert [_passes(m) for m in m_stop] == [_passes(m) for m in m_full]
    assert any(m["stopped_early"] for m in m_stop) and not any(m["stopped_early"] for m in m_full)
    assert any(_passes(m) for m in m_full) and not all(_passes(m) for m in m_full)
    for a, b in zip(m_stop, m_full):
        if not a["stopped_early"]:                  # a lane that ran to the end is the same lane
            assert a == b


def test_a_stopped_lane_counted_only_misses_of_its_window(voice_near_capacity):
    """At the stop, the window's start is the n_drop-th arrival, and the misses counted are at most the full
    run's misses in its measured window (they are a subset of them)."""
    w, rates, stopping, m_stop, full, m_full = voice_near_capacity
    stopped = [r for r, m in enumerate(m_stop) if m["stopped_early"]]
    for r in stopped:
        st, load = stopping.state(0, r), stopping.loads[0, r]
        n_drop = int(load["warmup_requests"])
        arrived = np.sort(st.arrival_s[np.isfinite(st.arrival_s)])
        assert n_drop == int(WARMUP_FRACTION * m_full[r]["requests"])
        assert int(st.arrived) == arrived.size
        assert float(st.window_from_s) == arrived[n_drop - 1]
        missed_full = round((1.0 - m_full[r]["attainment"]) * m_full[r]["window_requests"])
        assert int(st.misses) <= missed_full
        assert load["miss_limit"] == pytest.approx(0.1 * (m_full[r]["requests"] - n_drop))


def test_a_lane_too_slow_for_its_tpot_slo_stops_before_its_requests_finish():
    """Every request misses a TPOT SLO no decode step can meet; TTFT is loose, so no request is ever late
    for its first token: the stop comes from TPOTs already past the SLO while the requests decode."""
    base = load_workloads()["long-context-rag"]
    w = dataclasses.replace(base, name="tpot-bound", prompt_cv=0.0, output_mean_tokens=1000, output_cv=0.0,
                            min_sessions=60, ttft_slo_s=100.0, tpot_slo_s=1e-4)
    lanes, (m,) = _lanes(w, "baseline", [2.0], True)
    _, (full,) = _lanes(w, "baseline", [2.0], False)
    assert full["attainment"] == 0.0 and full["completed"] == full["requests"]
    assert m["stopped_early"] and m["completed"] < 0.25 * full["requests"]
    assert lanes.state(0, 0).misses <= lanes.loads[0, 0]["miss_limit"]   # the TPOTs still running stopped it
