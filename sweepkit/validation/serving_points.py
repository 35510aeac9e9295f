"""Measured throughput and latency points priced by the serving engine at the measured load.

A point's cluster is its row's layout (:func:`sweepkit.validation.row_layout.row_layout`: instances of tp x dp
x pp GPUs, ep expert ranks, several nodes where a replica exceeds the device's scale-up domain) of its
device, serving its model in its formats; its
workload is N = min(``requests``, :data:`REQUESTS`) fixed-length requests (``input_tokens`` in,
``output_tokens`` out, no spread: the benchmark tools' fixed-length datasets). The loads (every request at
t = 0, Poisson at ``request_rate``, a closed loop of ``concurrency`` users) and the statistics read from a
run are in sweepkit.validation.serving_runs, which simulates many points at once; under p99 limits
without a rate (MLPerf Server) the value is lambda* x output, lambda* the highest Poisson rate with p99 TTFT
<= ``ttft_limit_s`` and p99 TPOT <= ``tpot_limit_s`` over a run of MLPerf's Server length (to ~1 %;
:func:`constrained_rate`, :func:`limits_requests`).

The scheduler is assumed, not measured (the sources do not state it): paged KV, mixed (chunked) batches of
at most :data:`TOKEN_BUDGET` tokens, at most :data:`MAX_BATCH` running requests per instance, the device's
per-pass overhead as the step overhead, and arrivals sent to the instance holding the fewest requests in any
phase (``router = "least-outstanding"``: a load balancer in front of replicas sees each request until it
ends; the lever matrix's reference router leaves prompts mid-prefill out of the count, which piles arrivals
onto the replicas that are prefilling: 8 x TP1 H200 under MLPerf's Server limits met them at 0.62 of the
rate one replica alone met per GPU).

Target passes are priced by the row's efficiency profile (:func:`engine_profile`: the one given where it names
the row's framework or none, else the fitted profile shipped for the row's framework; "reference" or a
framework without one: the reference constants), whose host overheads then replace the device's
(:mod:`sweepkit.serving.profile`).

References:
  MLPerf Inference rules, Server scenario (github.com/mlcommons/inference_policies, inference_rules.adoc).
  trtllm-bench throughput (github.com/NVIDIA/TensorRT-LLM, docs/source/performance/perf-benchmarking.md).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from sweepkit.catalogue import get_device
from sweepkit.catalogue.efficiency import SHIPPED, Profile, framework_key, profile_for
from sweepkit.costmodel.layout import IMBALANCE_EPLB
from sweepkit.errors import InputError
from sweepkit.serving.cluster import MAX_BATCH_CAP, Cluster, make_cluster
from sweepkit.serving.config import Config, check
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.levers import Lever
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.profile import REFERENCE
from sweepkit.serving.workloads import Workload, fixed_workload
from sweepkit.validation.decode_kernel import with_decode_kernel
from sweepkit.validation.measurements import LATENCIES, Measurement
from sweepkit.validation.row_layout import moe_exchange, row_layout

REQUESTS = 1024
"""Most requests simulated per point (the public sources ran 1,000-30,000; fixed lengths make a run's waves
alike, so a longer run changes the figures little; the default when a row gives no ``requests``)."""
MAX_BATCH = 1024
"""Running requests per instance (assumed; NVIDIA's MLPerf v5.0 H100 Llama-2-70B runs use a GPU batch of 1,024)."""
TOKEN_BUDGET = 8192
"""Tokens per mixed step (assumed: trtllm-bench's and vLLM's default max_num_tokens / max_num_batched_tokens)."""
MODELLED = "modelled"
SERVER_MIN_DURATION_S = 600.0
"""An MLPerf Server run issues queries for at least 10 minutes (mlcommons/inference, mlperf.conf:
``*.Server.min_duration = 600000``, milliseconds)."""
LIMITS_REQUESTS_MAX = 32768
"""Most requests of one simulated Server run: 600 s of arrivals wherever 2 r_sat <= 54.6 requests/s; beyond, a
shorter run (MLPerf Llama-2-70B on 8 H100: 444 s at the rate found; 65,536 requests find a rate 1.9 % lower in
2.5x the time)."""


def _has_load(m: Measurement) -> bool:
    return m.request_rate is not None or m.concurrency is not None


def serving_status(m: Measurement) -> str:
    """MODELLED when the serving engine can price ``m``, else why not (one short phrase)."""
    if m.input_tokens is None or m.output_tokens is None:
        return "not modelled: needs input_tokens and output_tokens"
    if m.metric in ("output_throughput", "total_throughput") and not (
            _has_load(m) or m.ttft_limit_s or m.tpot_limit_s):
        return "not modelled: needs request_rate, concurrency or p99 limits"
    if m.metric in LATENCIES and not _has_load(m):
        return "not modelled: needs request_rate or concurrency"
    try:
        cluster, cfg = point_config(m)
        check(cluster, cfg, "point")
        users = -(-m.concurrency // row_layout(m).instances) if m.concurrency else 0
    except InputError as exc:
        return "not modelled: " + str(exc).split(": ", 1)[-1]
    closed = m.metric != "max_output_throughput" and m.request_rate is None
    if closed and users > MAX_BATCH_CAP:
        return (f"not modelled: a closed loop of {users} users per instance (the serving engine runs at most "
                f"{MAX_BATCH_CAP} requests per instance)")
    return MODELLED


def engine_profile(m: Measurement, profile: Profile | str | None = None) -> Profile | None:
    """The efficiency profile pricing ``m``'s target passes in the serving engine: ``profile`` where it is a
    :class:`~sweepkit.catalogue.efficiency.Profile` naming the row's framework or none, else the profile shipped
    for the row's framework (:func:`sweepkit.catalogue.efficiency.profile_for`); None (the reference
    constants) for ``profile = "reference"`` or a framework without one.

    Example:
      >>> from sweepkit.validation import parse_measurements
      >>> m = parse_measurements("source,device,model,metric,value,unit,framework\\n"
      ...                        "s,H100,llama-3.1-8b,ttft,1,s,TensorRT-LLM\\n", "demo.csv")[0]
      >>> (engine_profile(m).framework, engine_profile(m, "reference"))
      ('TensorRT-LLM', None)
    """
    if profile == REFERENCE:
        return None
    if isinstance(profile, Profile) and (not profile.framework
                                         or framework_key(profile.framework) == framework_key(m.framework)):
        return with_decode_kernel(profile, m)
    return with_decode_kernel(profile_for(m.framework), m) if framework_key(m.framework) in SHIPPED else None


def point_config(m: Measurement, max_batch: int = MAX_BATCH, profile: Profile | None = None
                 ) -> tuple[Cluster, Config]:
    """The cluster and (device, lever) configuration of a measured point (module docstring), its target
    passes priced by ``profile`` (None: the reference constants; :func:`engine_profile` chooses it)."""
    dev = get_device(m.device)
    lay = row_layout(m)
    extra = {"nodes": lay.nodes} if lay.nodes else {}
    if lay.redundant_experts:               # EPLB replicas (row_layout), balanced as EPLB balances them
        extra.update(redundant_experts=lay.redundant_experts, expert_imbalance=IMBALANCE_EPLB)
    cluster = make_cluster(
        f"{m.source} row {m.row}", description=m.setup, source=m.source, model=m.model,
        gpus=m.gpus, instances=lay.instances, tp=lay.tp, ep=lay.ep, dp=lay.dp, pp=lay.pp,
        batch_cap=max_batch, prefill_token_budget=TOKEN_BUDGET, step_overhead_s=dev.pass_overhead_s,
        weight_format=m.weight_format, kv_format=m.kv_format, compute_format=m.compute_format,
        devices=[m.device], **extra)
    cluster = dataclasses.replace(cluster, profile=profile)
    lever = Lever(name="measured", description="the measured system's layout and formats", kv="paged",
                  batching="chunked", router="least-outstanding",
                  moe_exchange=moe_exchange(m) if lay.dp > 1 and lay.ep > 1 else None)
    return cluster, Config(device=m.device, lever=lever)


def point_workload(m: Measurement, requests: int = REQUESTS, offline: bool | None = None) -> Workload:
    """N = ``requests`` fixed-length requests of the point, all at t = 0 for max_output_throughput
    (or as ``offline`` says)."""
    offline = m.metric == "max_output_throughput" if offline is None else offline
    return fixed_workload(f"row-{m.row}", m.input_tokens, m.output_tokens, requests, offline=offline,
                          source=m.source)


def _runner(m: Measurement, requests: int, max_batch: int, offline: bool | None = None,
            profile: Profile | None = None):
    """A function rates -> lane metrics (one compiled engine call per list of rates)."""
    cluster, cfg = point_config(m, max_batch, profile)
    check(cluster, cfg, f"{m.source} row {m.row}")
    w = point_workload(m, requests, offline)
    dev = get_device(m.device)

    def run(rates) -> list[dict]:
        lanes = run_configs(w, cluster, [cfg], np.asarray([rates], np.float64), early_stop=False)
        return [lane_metrics(lanes, 0, k, w, cluster.gpus, dev.idle_w, dev.price_usd_per_gpu_hour)
                for k in range(len(rates))]

    return run


def _meets(m: Measurement, metrics: dict, requests: int) -> bool:
    ok = metrics["completed"] >= requests
    if m.ttft_limit_s is not None:
        ok &= metrics["ttft_p99_s"] <= m.ttft_limit_s
    if m.tpot_limit_s is not None:
        ok &= metrics["tpot_p99_s"] <= m.tpot_limit_s
    return bool(ok)


def limits_requests(saturated_req_s: float) -> int:
    """Requests of a simulated Server run: N = clip(ceil(2 r_sat x 600 s), 1,024, 32,768).

    The highest rate :func:`constrained_rate` tries, 2 r_sat, then issues queries for MLPerf's 600 s
    (:data:`SERVER_MIN_DURATION_S`); slower rates run longer. A short run would pass a rate above capacity:
    its queue, growing at (lambda - capacity), is still short when the last request arrives.

    Example:
      >>> limits_requests(10.0), limits_requests(78.0), limits_requests(0.5)
      (12000, 32768, 1024)
    """
    n = math.ceil(2.0 * saturated_req_s * SERVER_MIN_DURATION_S)
    return int(min(max(n, REQUESTS), LIMITS_REQUESTS_MAX))


def constrained_rate(m: Measurement, run, saturated_req_s: float, requests: int) -> float:
    """Highest Poisson rate (requests/s) meeting the row's p99 limits.

    The search brackets r_sat, the request rate of a run with every request queued at t = 0: 6 rates over
    r_sat x 2^[-1.5, 1], then up to two rounds of 5 inside the bracket [the highest rate that met the limits
    below the lowest that did not, that one) (a 1.41x bracket to 1.41^(1/36), 1 %, reported at its low end;
    2 r_sat when every rate met them, 0 when none did). It reaches above r_sat because
    fixed-length requests queued at once run in synchronised waves (each wave's prompts, then its decode),
    which a Poisson stream, its prompts spread over every step, outruns. A rate above capacity fails through
    its queue over a run of :func:`limits_requests`. The measured value is not used.

    Args:
      m: the row (its ``ttft_limit_s``, ``tpot_limit_s``).  run: rates -> lane metrics (one engine call).
      saturated_req_s: r_sat (requests/s).  requests: N, the requests of each run.

    Returns:
      the highest rate tried that meets the limits, requests/s.
    """
    rates = saturated_req_s * 2.0 ** np.linspace(-1.5, 1.0, 6)
    passed, hi = [0.0], np.inf
    for _ in range(3):
        ok = np.array([_meets(m, x, requests) for x in run(list(rates))])
        hi = min([hi, *rates[~ok]])
        passed += [float(r) for r in rates[ok]]
        if not np.isfinite(hi):
            break                                    # every rate tried meets the limits
        lo = max([r for r in passed if r < hi])      # the bracket [lo, hi): lo met them, hi did not
        rates = np.geomspace(lo if lo > 0 else hi / 8.0, hi, 7)[1:-1]
    return max([r for r in passed if r < hi])
