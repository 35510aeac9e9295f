"""Latency percentiles over the steady set: completed requests by arrival, the first 10% dropped, the drain kept.

The reference simulator (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim, ``metrics.summarise``)
computes TTFT, TPOT and ITL percentiles over ``done[int(0.1 len(done)):]`` (completed requests sorted by
arrival); only attainment and goodput use the window that also drops arrivals after the last session start.
Its published H100 chat baseline at the reference load (1.9375 sessions/s): TTFT p99 355.5 ms, TPOT p99
33.3 ms, ITL p99 217.2 ms (the reference's tradeoffs matrix; benchmarks/data/reference-baseline-h100.csv).
"""

import numpy as np
import pytest

from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.levers import load_levers
from sweepkit.serving.metrics import _steady, lane_metrics
from sweepkit.serving.workloads import load_workloads


def test_steady_set_drops_the_first_tenth_of_completed_requests_and_keeps_the_drain():
    # 20 requests arriving at t = 0..19; #3 never finishes; each takes 1 s to its first token, 4 tokens, 3 s more
    arr = np.arange(20.0)
    first, fin = arr + 1.0, arr + 4.0
    fin[3] = np.inf
    out = np.full(20, 4.0)
    out[19] = 1.0                               # a one-token request has no TPOT
    ttft, tpot = _steady(arr, first, fin, out, np.isfinite(arr), whole=False)
    # 19 completed -> int(1.9) = 1 dropped (request 0); 18 kept, the last arrivals (the drain) among them
    assert ttft.size == 18 and tpot.size == 17
    np.testing.assert_allclose(tpot, 1.0)
    ttft_all, _ = _steady(arr, first, fin, out, np.isfinite(arr), whole=True)
    assert ttft_all.size == 19


@pytest.fixture(scope="module")
def chat_at_reference_load():
    w = load_workloads()["chat"]
    cl = load_cluster()
    lanes = run_configs(w, cl, [Config("H100", load_levers()["baseline"])], np.array([[1.9375]]), early_stop=False)
    return lane_metrics(lanes, 0, 0, w, cl.gpus, 100.0, 3.0)


def test_chat_h100_baseline_latencies_are_the_references(chat_at_reference_load):
    m = chat_at_reference_load
    assert m["ttft_p99_s"] == pytest.approx(0.3555, rel=1e-3)
    assert m["tpot_p99_s"] == pytest.approx(0.0333, rel=2e-3)
    # the ITL histogram's bins are +-0.46% wide; over the window without the drain the engine gives 223.9 ms
    assert m["itl_p99_s"] == pytest.approx(0.2172, rel=0.005)
