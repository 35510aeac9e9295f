"""Serving metrics of one simulated load: window, SLO attainment, latencies, goodput, cost and energy.

Definitions (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim; TPOT as DistServe, Zhong et al., OSDI 2024,
and the MLPerf Inference rules define it):

* TTFT = first-token time - arrival; TPOT = (finish - first token) / (output tokens - 1) (requests with >= 2
  output tokens); ITL = the gap before each generated token after the first (the tokens of one verify pass
  after the first get a zero gap).
* Steady set: completed requests sorted by arrival, the first 10% dropped (ramp-up). TTFT, TPOT and ITL
  percentiles are over it, drain included, as the reference simulator's summary computes them (the engine
  records ITL gaps of the requests that arrive after the first 10% of arrivals, which is the same set unless
  requests are rejected).
* Measured window: requests sorted by arrival, the first 10% dropped, arrivals after the last session start
  dropped (ramp-up and drain). Attainment = share of the window meeting TTFT <= ttft_slo and (output < 2 or
  TPOT <= tpot_slo); rejected or unfinished requests miss.
* goodput_req_s = (len(window) - 1) / (arrival span of the window); tok_s = output tokens of window[:-1] / span.
  Offline (saturated): completed requests / horizon and output tokens / horizon. Per GPU: / gpus.
* energy_j = idle_w x gpus x horizon + dynamic energy of every pass (compute, HBM, TP all-reduce); J/token =
  energy / output tokens of all completed requests. $/M tokens = price x gpus / 3600 / tok_s x 1e6.
* Percentiles: linear interpolation (numpy default) for TTFT/TPOT; ITL from a 2,000-bin log histogram
  (bin-centre value, +-0.46%).
"""

from __future__ import annotations

import numpy as np

from sweepkit.serving.engine import bin_centres_s
from sweepkit.serving.config import Config
from sweepkit.serving.lanes import WARMUP_FRACTION
from sweepkit.serving.workloads import Workload

SLO_ATTAINMENT = 0.90
"""Share of the measured window that must meet both SLOs (DistServe's goodput rule)."""


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if x.size else float("nan")


def hist_percentile(hist: np.ndarray, zeros: float, q: float) -> float:
    """q-th percentile of ITL values from the histogram counts plus ``zeros`` exact zero gaps."""
    total = hist.sum() + zeros
    if total <= 0:
        return float("nan")
    target = q / 100.0 * total
    if target <= zeros:
        return 0.0
    cum = np.cumsum(hist) + zeros
    k = int(np.searchsorted(cum, target, side="left"))
    return float(bin_centres_s(hist.shape[0])[min(k, hist.shape[0] - 1)])


def lane_metrics(lanes, c: int, r: int, w, gpus: int, idle_w: float, price: float, whole: bool = False) -> dict:
    """Metrics of configuration ``c`` at load ``r`` (all instances of the cluster together).

    Args:
      lanes: :class:`sweepkit.serving.lanes.Lanes` of a run.  w: the workload.  gpus: cluster GPUs.
      idle_w: per-GPU idle power, W.  price: USD per GPU-hour.
      whole: measure every request (no window; the coarse capacity round).

    Returns:
      dict of metrics in base units (see the module docstring).
    """
    st = lanes.state(c, r)
    load = lanes.loads[c, r]
    out = _outputs(lanes)
    arr, first, fin, rej = st.arrival_s, st.first_s, st.finish_s, st.rejected
    came = np.isfinite(arr)
    order = np.argsort(arr[came], kind="stable")
    a, f1, f2, o = arr[came][order], first[came][order], fin[came][order], out[came][order]
    n_drop = 0 if whole else int(WARMUP_FRACTION * a.size)
    last_start = np.inf if whole else float(load["eligible_to_s"])
    sel = (np.arange(a.size) >= n_drop) & (a <= last_start + 1e-12)
    a, f1, f2, o = a[sel], f1[sel], f2[sel], o[sel]
    with np.errstate(invalid="ignore"):
        ttft = f1 - a
        tpot = np.where(o >= 2, (f2 - f1) / np.maximum(o - 1.0, 1.0), 0.0)
    ok = np.isfinite(f2) & (ttft <= w.ttft_slo_s) & ((o < 2) | (tpot <= w.tpot_slo_s))
    done_all = np.isfinite(fin) & came
    ends = np.concatenate([fin[done_all], arr[rej & came]])
    horizon = float(np.max(ends)) if ends.size else float("nan")
    if w.offline:
        goodput, tok_s = done_all.sum() / horizon, out[done_all].sum() / horizon
    else:
        span = a[-1] - a[0] if a.size > 1 else float("nan")
        goodput, tok_s = (a.size - 1) / span, o[:-1].sum() / span
    s = {k: np.asarray(v) for k, v in vars(st.stats).items()}
    energy = idle_w * gpus * horizon + float(s["energy_j"].sum() + s["swap_j"].sum()) + float(st.link_j)
    sent = np.isfinite(np.asarray(st.xfer_land_s)) & np.isfinite(first)
    tokens_done = out[done_all].sum()
    steps = float(s["steps"].sum())
    busy = float(s["busy_s"].sum())
    steady_ttft, steady_tpot = _steady(arr, first, fin, out, came, whole)
    m = dict(
        requests=int(came.sum()), window_requests=int(a.size), completed=int(done_all.sum()),
        rejected=int((rej & came).sum()), attainment=float(ok.mean()) if a.size else 0.0,
        stopped_early=bool(st.stopped or st.truncated), goodput_req_s=float(goodput),
        goodput_req_s_per_gpu=float(goodput) / gpus, output_tok_s=float(tok_s), output_tok_s_per_gpu=float(tok_s) / gpus,
        usd_per_mtok=price * gpus / 3600.0 / float(tok_s) * 1e6, energy_j=energy,
        energy_per_token_j=energy / tokens_done if tokens_done else float("nan"), horizon_s=horizon,
        **{f"ttft_p{q}_s": _pct(steady_ttft, q) for q in (50, 90, 99)},
        **{f"tpot_p{q}_s": _pct(steady_tpot, q) for q in (50, 90, 99)},
        **{f"itl_p{q}_s": hist_percentile(st.hist, float(st.zeros), q) for q in (50, 90, 99)},
        steps=steps, decode_rows=float(s["decode_rows"].sum()),
        mean_running_batch=float(s["batch_area"].sum() / busy) if busy else 0.0,
        tokens_per_pass=float((out[done_all] - 1.0).sum() / max(float(s["decode_rows"].sum()), 1.0)),
        preemptions=float(s["preemptions"].sum()), recompute_tokens=float(s["recompute_tokens"].sum()),
        swap_out_bytes=float(s["swap_out_bytes"].sum()), swap_in_bytes=float(s["swap_in_bytes"].sum()),
        prefix_hit_rate=float(s["hit_tokens"].sum() / max(float(s["first_prompt_tokens"].sum()), 1.0)),
        kv_transfer_wait_s=float(np.mean(st.xfer_start_s[sent] - first[sent])) if sent.any() else 0.0,
        kv_transfer_s=float(np.mean(st.xfer_land_s[sent] - first[sent])) if sent.any() else 0.0,
        kv_mean_fraction=float(s["kv_area"].sum() / busy) if busy else 0.0,
        kv_peak_fraction=float(s["kv_peak"].max()),
        busy_fraction=busy / (horizon * lanes.instances[c]),
        little_l=float(st.little_area / horizon),
        little_lambda_w=float(np.sum(fin[done_all] - arr[done_all]) / horizon),
        iterations=int(st.iters),
    )
    return m


def _steady(arr, first, fin, out, came, whole):
    """(TTFT [n], TPOT [m]) of the steady set: completed requests by arrival, the first 10% dropped."""
    done = came & np.isfinite(fin)
    order = np.argsort(arr[done], kind="stable")
    a, f1, f2, o = arr[done][order], first[done][order], fin[done][order], out[done][order]
    keep = slice(0 if whole else int(WARMUP_FRACTION * a.size), None)
    a, f1, f2, o = a[keep], f1[keep], f2[keep], o[keep]
    two = o >= 2
    return f1 - a, (f2[two] - f1[two]) / (o[two] - 1.0)


def _outputs(lanes) -> np.ndarray:
    ses = lanes.sessions
    return np.asarray(ses.output, np.float64).T.reshape(-1)


def capacity_row(w: Workload, cfg: Config, cap: float, ref_load: float, at_cap: dict | None, at_ref: dict,
                 saturated: bool) -> dict:
    """One ``capacity`` row: capacity metrics from ``at_cap`` (None: nothing passed), latencies from ``at_ref``.

    When no load meets the SLOs (capacity 0, or a saturated run with attainment below 0.9), goodput and
    tokens per GPU at capacity are 0 and cost and energy per token are undefined (NaN).
    """
    nan = float("nan")
    if saturated and at_cap is not None and at_cap.get("attainment", 1.0) < SLO_ATTAINMENT:
        at_cap = None                      # a saturated run that misses its SLOs has no goodput
    passed = at_cap is not None
    at_cap = at_cap or {}
    zero = {"goodput_req_s", "goodput_req_s_per_gpu", "output_tok_s_per_gpu"}
    get = lambda k: float(at_cap.get(k, 0.0 if (k in zero and not passed) else nan))  # noqa: E731
    return dict(
        device=cfg.device, lever=cfg.lever.name, workload=w.name, draft=cfg.lever.draft, gamma=cfg.lever.gamma,
        alpha=cfg.lever.alpha, saturated=saturated, load_unit=w.load_unit, capacity_per_s=cap,
        reference_load_per_s=ref_load, goodput_req_s=get("goodput_req_s"),
        goodput_per_gpu_per_s=get("goodput_req_s_per_gpu"), tokens_per_gpu_per_s=get("output_tok_s_per_gpu"),
        cost_per_mtok_usd=get("usd_per_mtok"), energy_per_token_j=get("energy_per_token_j"),
        attainment_at_capacity=get("attainment"), tokens_per_pass=get("tokens_per_pass"),
        **{f"{k}_at_ref": float(at_ref[k]) for k in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s",
                                                      "tpot_p90_s", "tpot_p99_s", "itl_p50_s", "itl_p90_s",
                                                      "itl_p99_s", "attainment")},
    )
