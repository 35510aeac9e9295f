"""Before and after on the serving engine: one ``run_configs`` call, metrics, a request timeline.

Both configurations run at the same offered load in ONE :func:`sweepkit.serving.lanes.run_configs` call
(two configurations, one load each), so they share a compiled program and the same requests (common random
numbers); the metrics are :func:`sweepkit.serving.metrics.lane_metrics`, exactly as ``sweepkit simulate``
records them at the reference load.

Timeline of one request (from the final lane state: arrival, first token, finish):

    prefill_s = t_prefill(prompt)  (the request's prompt as one target pass on its instance, alone)
    queue_s   = max(TTFT - prefill_s, 0),   TTFT = first_s - arrival_s
    decode_s  = finish_s - first_s,         handoff_s = 0 (colocated: the KV stays on the instance)

so queue + prefill + hand-off = TTFT; ``prefill_s`` is the cost model's price of the prompt alone, so any
batching delay counts as queueing.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.catalogue import get_device
from sweepkit.costmodel.passes import chunk_work
from sweepkit.costmodel.steps import target_pass
from sweepkit.serving.capacity import search
from sweepkit.serving.cluster import Cluster
from sweepkit.serving.config import Config, check, policy
from sweepkit.serving.lanes import OFFLINE_RATE, WARMUP_FRACTION, run_configs
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.workloads import Workload

TIMELINE_REQUESTS = 24
"""Consecutive requests (by arrival, from the start of the measured window) in the timeline."""
METRICS = ("ttft_p50_s", "ttft_p99_s", "tpot_p99_s", "itl_p99_s", "output_tok_s", "energy_per_token_j",
           "attainment", "goodput_req_s_per_gpu", "usd_per_mtok")
"""Metrics compared side by side (base units in the names; attainment 0..1)."""
HIGHER_IS_BETTER = {"output_tok_s", "attainment", "goodput_req_s_per_gpu"}
SAME_PCT = 2.0
"""|change| <= this (%) is "same" (the matrix's band)."""


@jax.jit
def _prefill_s(inst, prompt_tokens):
    """Seconds of one target pass over each prompt alone ([N] tokens -> [N] s)."""
    one = lambda n: target_pass(inst, chunk_work(jnp.zeros_like(n), n))[0]  # noqa: E731
    return jax.vmap(one)(prompt_tokens)


def _prompts(lanes) -> np.ndarray:
    ses = lanes.sessions
    return np.asarray(ses.prompt, np.float64).T.reshape(-1)


def timeline(lanes, c: int, cluster: Cluster, cfg: Config, n: int = TIMELINE_REQUESTS) -> dict:
    """Per-request phases of ``n`` consecutive requests and the mean of each phase over the window.

    Args:
      lanes: the run.  c: configuration index.  cluster, cfg: for the prefill price.  n: requests shown.

    Returns:
      dict with ``requests`` (list of id, arrival_s, first_s, finish_s, queue_s, prefill_s, handoff_s,
      decode_s; times relative to the first shown arrival, s) and ``mean_s`` (phase -> mean seconds over the
      measured window's finished requests).
    """
    st = lanes.state(c, 0)
    arr, first, fin = (np.asarray(x, np.float64) for x in (st.arrival_s, st.first_s, st.finish_s))
    came = np.flatnonzero(np.isfinite(arr))
    order = came[np.argsort(arr[came], kind="stable")]
    window = order[int(WARMUP_FRACTION * order.size):]
    done = window[np.isfinite(fin[window])]
    with jax.enable_x64(True):
        pol = policy(cluster, cfg)
        prefill = np.asarray(_prefill_s(pol.inst, jnp.asarray(_prompts(lanes)[done], jnp.float64)))
    ttft = first[done] - arr[done]
    pre = np.minimum(prefill, ttft)
    phases = dict(queue_s=ttft - pre, prefill_s=pre, handoff_s=np.zeros_like(pre), decode_s=fin[done] - first[done])
    shown = done[:n]
    t0 = float(arr[shown[0]]) if shown.size else 0.0
    rows = [dict(id=int(r), arrival_s=float(arr[r] - t0), first_s=float(first[r] - t0),
                 finish_s=float(fin[r] - t0), **{k: float(v[i]) for k, v in phases.items()})
            for i, r in enumerate(shown)]
    return dict(requests=rows, mean_s={k: float(v.mean()) if v.size else 0.0 for k, v in phases.items()})


def change_pct(before: dict, after: dict) -> tuple[dict, dict]:
    """% change of every compared metric and its verdict (better / worse / same within +-SAME_PCT %).

    Example:
      >>> change_pct({"ttft_p99_s": 1.0}, {"ttft_p99_s": 0.5})[0]["ttft_p99_s"], _verdict("ttft_p99_s", -50.0)
      (-50.0, 'better')
    """
    pct, verdict = {}, {}
    for k in METRICS:
        b, a = before.get(k), after.get(k)
        ok = b is not None and a is not None and np.isfinite(b) and np.isfinite(a) and b != 0
        pct[k] = float((a - b) / abs(b) * 100.0) if ok else None
        verdict[k] = _verdict(k, pct[k])
    return pct, verdict


def _verdict(metric: str, pct: float | None) -> str | None:
    if pct is None:
        return None
    if abs(pct) <= SAME_PCT:
        return "same"
    return "better" if (pct > 0) == (metric in HIGHER_IS_BETTER) else "worse"


def _clean(m: dict) -> dict:
    return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in m.items()}


def run_whatif(w: Workload, cluster: Cluster, device: str, before, after, rate_per_s: float) -> dict:
    """Before and after at ``rate_per_s`` in one engine call; metrics, changes and timelines.

    Args:
      w, cluster: workload and cluster.  device: catalogue device.  before, after: :class:`Lever`.
      rate_per_s: offered load (sessions/s or requests/s; offline workloads: every request at once).

    Returns:
      dict with ``before`` / ``after`` (lever, metrics, timeline), ``change_pct``, ``verdict``.

    Raises:
      InputError: a combination the engine cannot model (its one-line reason).
    """
    cfgs = [Config(device, before), Config(device, after)]
    for side, cfg in zip(("before", "after"), cfgs):
        check(cluster, cfg, side)
    dev = get_device(device)
    lanes = run_configs(w, cluster, cfgs, np.full((2, 1), rate_per_s), early_stop=False)
    ms = [lane_metrics(lanes, c, 0, w, cluster.gpus, dev.idle_w, dev.price_usd_per_gpu_hour) for c in range(2)]
    pct, verdict = change_pct(ms[0], ms[1])
    sides = {side: dict(lever=dataclasses.asdict(cfg.lever), metrics=_clean(ms[c]),
                        timeline=timeline(lanes, c, cluster, cfg))
             for c, (side, cfg) in enumerate(zip(("before", "after"), cfgs))}
    return dict(**sides, change_pct=pct, verdict=verdict, same_pct=SAME_PCT, sessions=int(lanes.n_sessions))


def run_capacity(w: Workload, cluster: Cluster, device: str, lever, progress=None, start_per_s: float = 1.0) -> dict:
    """Capacity search of one configuration: capacity and goodput/GPU, $/M tok, J/token at capacity.

    Args:
      progress: callable(simulations done in a round), from the search.
      start_per_s: the first probe, per second (``sweepkit simulate`` starts at twice the reference load).
    """
    cfg = Config(device, lever)
    check(cluster, cfg, "lever")
    dev = get_device(device)
    if w.offline:   # saturated: every request at once, as `sweepkit simulate` measures offline capacity
        lanes = run_configs(w, cluster, [cfg], np.full((1, 1), OFFLINE_RATE), early_stop=False)
        m = lane_metrics(lanes, 0, 0, w, cluster.gpus, dev.idle_w, dev.price_usd_per_gpu_hour)
        caps, rows = [float("nan")], [m]
    else:
        caps, best, rows = search(w, cluster, [cfg], [dev.price_usd_per_gpu_hour], [dev.idle_w],
                                  start=start_per_s, progress=progress)
        m = best[0] or {}
    get = lambda k: _clean({k: float(m.get(k, float("nan")))})[k]  # noqa: E731
    return dict(capacity_per_s=_clean({"c": float(caps[0])})["c"], saturated=w.offline, load_unit=w.load_unit, goodput_req_s_per_gpu=get("goodput_req_s_per_gpu"),
                usd_per_mtok=get("usd_per_mtok"), energy_per_token_j=get("energy_per_token_j"),
                attainment=get("attainment"), simulated_loads=len(rows))
