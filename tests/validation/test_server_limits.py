"""MLPerf Server rows (p99 TTFT and TPOT limits, no rate): the rate search and the length of its runs
(sweepkit.validation.serving_points.constrained_rate and limits_requests; serving_runs._limits_value)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sweepkit.validation.serving_points as sp
from sweepkit.validation import parse_measurements
from sweepkit.validation.serving_runs import _limits_value, _runner, server_rate

HEAD = ("source,device,model,metric,value,unit,weight_format,kv_format,compute_format,input_tokens,output_tokens,"
        "requests,ttft_limit_s,tpot_limit_s,framework,split\n")


def _server_row(ttft_limit_s: float, tpot_limit_s: float = 0.2):
    text = HEAD + (f"tiny,H100,meta-llama/Llama-3.1-8B,output_throughput,1,tok/s,fp8,fp8,fp8,128,32,24576,"
                   f"{ttft_limit_s},{tpot_limit_s},TensorRT-LLM v0.17,check\n")
    return parse_measurements(text, "server.csv")[0]


def test_a_server_run_issues_queries_for_mlperfs_ten_minutes():
    # mlcommons/inference mlperf.conf: *.Server.min_duration = 600000 (ms); the fastest rate tried is 2 r_sat
    assert sp.SERVER_MIN_DURATION_S == 600.0
    assert sp.limits_requests(10.0) == 12000
    assert sp.limits_requests(0.1) == sp.REQUESTS                    # at least the default run
    assert sp.limits_requests(1e4) == sp.LIMITS_REQUESTS_MAX


def _synthetic(capacity_req_s: float, requests: int):
    """A run whose p99 TTFT stays under 2 s exactly up to ``capacity_req_s`` (a stand-in for the engine)."""
    def run(rates):
        return [dict(completed=requests, ttft_p99_s=0.5 if r <= capacity_req_s else 9.0, tpot_p99_s=0.05)
                for r in rates]
    return run


@settings(max_examples=60, deadline=None)
@given(capacity=st.floats(1.0, 500.0), ratio=st.floats(0.4, 1.9))
def test_the_search_finds_the_capacity_to_one_percent_above_or_below_the_all_queued_rate(capacity, ratio):
    # r_sat = capacity / ratio: the all-queued run may understate (ratio > 1) or overstate (ratio < 1) it
    m, n = _server_row(2.0), 4096
    found = sp.constrained_rate(m, _synthetic(capacity, n), capacity / ratio, n)
    assert found <= capacity * (1 + 1e-12)
    assert found >= capacity / math.sqrt(2.0) ** (1 / 36) * (1 - 1e-9)


def test_the_search_reports_its_top_rate_or_zero_at_the_ends():
    m, n = _server_row(2.0), 4096
    assert sp.constrained_rate(m, _synthetic(1e9, n), 10.0, n) == pytest.approx(20.0)      # 2 r_sat, all pass
    assert sp.constrained_rate(m, _synthetic(0.0, n), 10.0, n) == 0.0                       # none passes
    unfinished = lambda rates: [dict(completed=n - 1, ttft_p99_s=0.1, tpot_p99_s=0.01) for _ in rates]  # noqa: E731
    assert sp.constrained_rate(m, unfinished, 10.0, n) == 0.0


def test_a_server_row_on_the_engine_meets_its_limits_and_a_tighter_limit_never_raises_it(monkeypatch):
    # the engine itself, over 2 s of arrivals instead of 600 s (N = 2 r_sat x 2 s: 1,756 requests) to keep it short
    monkeypatch.setattr(sp, "SERVER_MIN_DURATION_S", 2.0)
    loose, tight = _server_row(2.0), _server_row(0.1)
    v_loose, v_tight = _limits_value(loose, sp.engine_profile(loose)), _limits_value(tight, sp.engine_profile(tight))
    assert 0.0 < v_tight <= v_loose
    rate, n = server_rate(loose, sp.engine_profile(loose))
    assert rate * loose.output_tokens == pytest.approx(v_loose) and n >= sp.REQUESTS
    (met,) = _runner(loose, n, sp.MAX_BATCH, profile=sp.engine_profile(loose))([rate])
    assert met["ttft_p99_s"] <= 2.0 and met["tpot_p99_s"] <= 0.2 and met["completed"] == n
