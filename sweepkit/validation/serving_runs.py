"""Many measured serving points at once: one simulation per measured setup and load, shared by its metrics.

A public benchmark reports several metrics of one run (TTFT, ITL, output and total tokens/s at one request
rate); :func:`evaluate_serving_points` simulates each (setup, load) once and reads every row's metric from
it, and runs all the Poisson rates of one setup in one engine call (one compiled program, one lane per rate).
Loads, per row (module sweepkit.validation.serving_points for the cluster and workload):

    max_output_throughput, request_rate = inf   every request at t = 0 (whole run measured)
    request_rate = lambda                        Poisson arrivals (the engine's measured window)
    concurrency = U                              a closed loop of U users without think time (below)
    p99 limits (MLPerf Server)                   the highest Poisson rate meeting them over 600 s of arrivals
                                                 (serving_points.constrained_rate, limits_requests)

A closed loop of U users, each sending its next request when the last one finishes, is the same schedule
as every request queued at t = 0 behind a cap of U running requests (FCFS, fixed lengths): request k
(k >= U) starts when the (k - U)-th request to finish finishes. The run is simulated that way (a cap of
ceil(U / instances) per instance) and each request's latency is measured from that start:

    start_k = 0 (k < U),  start_k = finish_(k - U) (sorted finish times, k >= U)
    TTFT_k = first_k - start_k,   E2E_k = finish_k - start_k

N = max(U, min(requests, 4 U, :data:`~sweepkit.validation.serving_points.REQUESTS`)) requests, so a loop
runs about four waves (one for a static batch of U = requests).

Statistics: ``mean`` or the 50/90/99th percentile over the measured requests; TPOT_k = (E2E_k - TTFT_k) /
(output - 1); ITL from the engine's inter-token histogram (mean = sum of bin centres x counts / gaps);
total_throughput = output tokens/s x (input + output) / output (fixed lengths). Under Poisson arrivals output
tokens/s is the benchmark's (:func:`benchmark_tok_s`: completed tokens over first arrival to last finish), so a
rate the server cannot keep up with is priced at what it delivers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from sweepkit.catalogue import get_device
from sweepkit.catalogue.efficiency import Profile
from sweepkit.serving.engine import bin_centres_s
from sweepkit.serving.config import check
from sweepkit.serving.lanes import WARMUP_FRACTION, run_configs
from sweepkit.serving.metrics import lane_metrics
from sweepkit.validation.measurements import Measurement
from sweepkit.validation.row_layout import row_layout
from sweepkit.validation.serving_points import (
    LIMITS_REQUESTS_MAX, MAX_BATCH, REQUESTS, _runner, constrained_rate, engine_profile, limits_requests,
    point_config, point_workload)

STATS = ("mean", "50", "90", "99")


def _stats(x: np.ndarray) -> dict[str, float]:
    x = x[np.isfinite(x)]
    if not x.size:
        return {s: float("nan") for s in STATS}
    return {"mean": float(x.mean()), **{s: float(np.percentile(x, int(s))) for s in STATS[1:]}}


def _itl_stats(st) -> dict[str, float]:
    hist, zeros = np.asarray(st.hist, np.float64), float(st.zeros)
    total = hist.sum() + zeros
    if total <= 0:
        return {s: float("nan") for s in STATS}
    centres = bin_centres_s(hist.shape[0])
    cum = np.cumsum(hist) + zeros
    out = {"mean": float((hist * centres).sum() / total)}
    for s in STATS[1:]:
        target = int(s) / 100.0 * total
        out[s] = 0.0 if target <= zeros else float(centres[min(int(np.searchsorted(cum, target)), hist.shape[0] - 1)])
    return out


def run_metrics(lanes, r: int, w, m: Measurement, whole: bool, closed: int | None = None) -> dict:
    """Per-request latency statistics and throughputs of lane ``r`` (configuration 0).

    Returns a dict: ``output_tok_s`` (Poisson arrivals: :func:`benchmark_tok_s`; else :func:`lane_metrics`'),
    everything else :func:`lane_metrics` gives, ``total_tok_s``, and
    ``{ttft,tpot,itl,e2e_latency}_{mean,50,90,99}`` in seconds. ``closed``: U, the users of a closed loop (module
    docstring), None for arrivals as simulated; ``whole``: every request measured (no warm-up window).
    """
    dev = get_device(m.device)
    try:
        base = lane_metrics(lanes, 0, r, w, m.gpus, dev.idle_w, dev.price_usd_per_gpu_hour, whole=whole)
    except ZeroDivisionError:                     # no output token in the measured window
        base = {"output_tok_s": float("nan")}
    st = lanes.state(0, r)
    arr, first, fin = (np.asarray(a, np.float64) for a in (st.arrival_s, st.first_s, st.finish_s))
    came = np.isfinite(arr)
    idx = np.flatnonzero(came)
    if closed is not None:
        done = np.sort(fin[idx])
        k = np.arange(idx.size)
        start = np.where(k >= closed, done[np.maximum(k - closed, 0)], 0.0)
        sel = np.ones(idx.size, bool)
    else:
        order = np.argsort(arr[idx], kind="stable")
        idx = idx[order]
        start = arr[idx]
        n_drop = 0 if whole else int(WARMUP_FRACTION * idx.size)
        last = np.inf if whole else float(lanes.loads[0, r]["eligible_to_s"])
        sel = (np.arange(idx.size) >= n_drop) & (start <= last + 1e-12)
    f1, f2, s0 = first[idx][sel], fin[idx][sel], start[sel]
    o = float(m.output_tokens)
    ttft, e2e = f1 - s0, f2 - s0
    tpot = (f2 - f1) / max(o - 1.0, 1.0) if o >= 2 else np.zeros_like(f1)
    out = dict(base)
    if closed is None and not whole:
        out["output_tok_s"] = benchmark_tok_s(arr[came], fin[came], o)
    out["total_tok_s"] = out["output_tok_s"] * (m.input_tokens + m.output_tokens) / m.output_tokens
    for name, x in (("ttft", ttft), ("tpot", tpot), ("e2e_latency", e2e)):
        out.update({f"{name}_{s}": v for s, v in _stats(x).items()})
    out.update({f"itl_{s}": v for s, v in _itl_stats(st).items()})
    return out


def benchmark_tok_s(arrival_s: np.ndarray, finish_s: np.ndarray, output_tokens: float) -> float:
    """Output tokens/s of a Poisson run as a serving benchmark reports it: the completed requests' output tokens
    over the run's duration, first arrival to last finish (n_done requests finished, f finish and a arrival times).

    .. math::
        \\text{tok/s} = \\frac{o \\, n_{done}}{\\max_k f_k - \\min_k a_k}

    Where the server keeps up this is the offered load less the drain of the last requests; where it does not,
    it is what the server delivers, not what was offered (the engine's windowed ``output_tok_s`` is the offered
    load over the measured window, the reference simulator's goodput rule).

    Args:
      arrival_s: arrival times of the run's requests, s.
      finish_s: their finish times, s (inf: not finished).
      output_tokens: o, output tokens per request (fixed lengths).

    Returns:
      Output tokens per second; NaN when no request finished.

    Example:
      >>> benchmark_tok_s(np.array([0.0, 1.0, 2.0]), np.array([3.0, 4.0, 6.0]), 100.0)   # 300 tokens in 6 s
      50.0

    References:
      vLLM, benchmarks/benchmark_serving.py (``output_throughput = total_output / dur_s``),
      github.com/vllm-project/vllm; GenAI-Perf's output token throughput over the benchmark's duration,
      github.com/triton-inference-server/perf_analyzer (genai-perf docs).
    """
    done = np.isfinite(finish_s)
    if not done.any():
        return float("nan")
    return float(output_tokens * done.sum() / (np.max(finish_s[done]) - np.min(arrival_s)))


def metric_value(m: Measurement, metrics: dict) -> float:
    """The row's metric (base SI) from :func:`run_metrics`' dict."""
    if m.metric in ("output_throughput", "max_output_throughput"):
        return float(metrics["output_tok_s"])
    if m.metric == "total_throughput":
        return float(metrics["total_tok_s"])
    return float(metrics[f"{m.metric}_{m.percentile}"])


def _setup_key(m: Measurement) -> tuple:
    return (m.device, m.model, m.tp, m.pp, m.ep, m.dp, m.gpus, m.weight_format, m.kv_format, m.compute_format,
            m.input_tokens, m.output_tokens)


def _load_kind(m: Measurement) -> tuple:
    """('offline', N) | ('poisson', N) | ('closed', U, N) | ('limits', row) for one row."""
    n = max(2, min(m.requests or REQUESTS, REQUESTS))
    if m.metric == "max_output_throughput" or m.request_rate == float("inf"):
        return ("offline", n)
    if m.request_rate is not None:
        return ("poisson", n)
    if m.concurrency is not None:
        c = m.concurrency
        return ("closed", c, max(c, min(m.requests or 4 * c, 4 * c, REQUESTS)))
    return ("limits", m.row, m.file)


def _simulate(m: Measurement, requests: int, offline: bool, rates: list[float], max_batch: int = MAX_BATCH,
              profile: Profile | None = None):
    """One engine call at ``rates``; the batch cap is at most the requests simulated (a larger cap is never
    reached, and a smaller program runs faster)."""
    cluster, cfg = point_config(m, min(max_batch, requests), profile)
    check(cluster, cfg, f"{m.source} row {m.row}")
    w = point_workload(m, requests, offline)
    lanes = run_configs(w, cluster, [cfg], np.asarray([rates], np.float64), early_stop=False)
    return lanes, w


def evaluate_serving_points(points: list[Measurement], progress: Callable[[int], None] | None = None,
                            profile: Profile | str | None = None) -> list[float]:
    """The serving engine's value (base SI) of every point (each ``serving_status`` MODELLED), in order.

    ``progress(n)`` is called after each simulated group with the number of rows it priced. Each row's
    target passes are priced by :func:`~sweepkit.validation.serving_points.engine_profile` of ``profile``
    (a :class:`~sweepkit.catalogue.efficiency.Profile`, "reference" for none, None for each row's framework's
    shipped profile).
    """
    out = [float("nan")] * len(points)
    groups: dict[tuple, list[int]] = {}
    chosen = [engine_profile(m, profile) for m in points]
    for i, m in enumerate(points):
        key = _setup_key(m) + _load_kind(m) + (id(chosen[i]),)
        groups.setdefault(key, []).append(i)
    for rows in groups.values():
        m0, prof = points[rows[0]], chosen[rows[0]]
        kind = _load_kind(m0)
        if kind[0] == "offline":
            lanes, w = _simulate(m0, kind[1], True, [1.0], profile=prof)
            met = run_metrics(lanes, 0, w, m0, whole=True)
            for i in rows:
                out[i] = metric_value(points[i], met)
        elif kind[0] == "poisson":
            rates = sorted({points[i].request_rate for i in rows})
            lanes, w = _simulate(m0, kind[1], False, rates, profile=prof)
            mets = {rate: run_metrics(lanes, k, w, m0, whole=False) for k, rate in enumerate(rates)}
            for i in rows:
                out[i] = metric_value(points[i], mets[points[i].request_rate])
        elif kind[0] == "closed":
            c, n = kind[1], kind[2]
            inst = row_layout(m0).instances
            lanes, w = _simulate(m0, n, True, [1.0], max_batch=max(1, math.ceil(c / inst)), profile=prof)
            met = run_metrics(lanes, 0, w, m0, whole=True, closed=c)
            for i in rows:
                out[i] = metric_value(points[i], met)
        else:
            for i in rows:
                out[i] = _limits_value(points[i], prof)
        if progress is not None:
            progress(len(rows))
    return out


def server_rate(m: Measurement, profile: Profile | None = None) -> tuple[float, int]:
    """(lambda*, N): the highest Poisson rate meeting the row's p99 limits (requests/s) and the requests of
    each run of the search (MLPerf Server).

    r_sat comes from a run with every request queued at t = 0, enough of them to fill each instance's
    :data:`MAX_BATCH` twice (at least :data:`REQUESTS`); the rate search runs :func:`limits_requests` of them.
    The row's ``requests`` (MLPerf's dataset size) is not the count a Server run issues, so it is not read."""
    n_sat = min(max(REQUESTS, 2 * row_layout(m).instances * MAX_BATCH), LIMITS_REQUESTS_MAX)
    saturated = _runner(m, n_sat, MAX_BATCH, offline=True, profile=profile)([1.0])[0]["goodput_req_s"]
    n = limits_requests(saturated)
    return constrained_rate(m, _runner(m, n, MAX_BATCH, profile=profile), saturated, n), n


def _limits_value(m: Measurement, profile: Profile | None = None) -> float:
    """Output tokens/s at :func:`server_rate`."""
    return server_rate(m, profile)[0] * m.output_tokens


def evaluate_serving(m: Measurement, requests: int | None = None, profile: Profile | str | None = None) -> float:
    """The serving engine's value of ``m`` (base SI: tokens/s or seconds); ``serving_status(m)`` is MODELLED.

    One row of :func:`sweepkit.validation.serving_runs.evaluate_serving_points` (its docstring gives the
    loads: all at once, Poisson, a closed loop of ``concurrency`` users, p99 limits).

    Example:
      >>> from sweepkit.validation import parse_measurements
      >>> csv = ("source,device,model,metric,value,unit,input_tokens,output_tokens,request_rate\\n"
      ...        "demo,H100,llama-3.1-8b,ttft,20,ms,128,16,1\\n")
      >>> 0 < evaluate_serving(parse_measurements(csv, "demo.csv")[0], requests=16) < 0.1
      True

    Args:
      requests: requests simulated (default min(the row's ``requests``, REQUESTS)).
      profile: as :func:`evaluate_serving_points`.
    """
    return evaluate_serving_points([dataclasses.replace(m, requests=requests or m.requests)], profile=profile)[0]
