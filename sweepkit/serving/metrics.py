"""Serving metrics of one simulated load: window, SLO attainment, latencies, goodput, cost and energy.

Definitions (seed-system.md sec. 1; published.md "Metric definitions to use"):

* TTFT = first-token time - arrival; TPOT = (finish - first token) / (output tokens - 1) (requests with >= 2
  output tokens); ITL = the gap before each generated token after the first, over all tokens of the window's
  requests (the tokens of one verify pass after the first get a zero gap).
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

from sweepkit.serving.engine import WARMUP_FRACTION
from sweepkit.serving.state import bin_centres_s


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


def lane_metrics(st, lay: dict, c: int, r: int, w, gpus: int, tp: int, idle_w: float, price: float,
                 whole: bool = False) -> dict:
    """Metrics of configuration ``c`` at load ``r`` (all instances of the cluster merged).

    Args:
      st: final simulator states as numpy arrays with leading axes [C, R, I].
      lay: the request layout of :func:`sweepkit.serving.engine.layout` (with ``passes`` and ``loads``).
      w: the workload.  gpus, tp: cluster GPUs and GPUs per instance.  idle_w: per-GPU idle power, W.
      price: USD per GPU-hour.
      whole: measure every request (no window); used by the coarse capacity round, whose capped session
        count would otherwise leave only the ramp-up in the window at high loads.

    Returns:
      dict of metrics in base units (see the module docstring).
    """
    arr = st.arrival_s[c, r].ravel()
    first = st.first_s[c, r].ravel()
    fin = st.finish_s[c, r].ravel()
    out = lay["output"].ravel().astype(np.float64)
    passes = lay["passes"][c].ravel().astype(np.float64)
    load = lay["loads"][c][r]
    came = np.isfinite(arr)
    order = np.argsort(arr[came], kind="stable")
    a, f1, f2, o = arr[came][order], first[came][order], fin[came][order], out[came][order]
    n_drop = 0 if whole else int(WARMUP_FRACTION * a.size)
    last_start = np.inf if whole else float(load["eligible_to_s"][0])
    sel = np.arange(a.size) >= n_drop
    sel &= a <= last_start + 1e-12
    a, f1, f2, o = a[sel], f1[sel], f2[sel], o[sel]
    with np.errstate(invalid="ignore"):  # unfinished requests (early-stopped loads): inf - inf
        ttft = f1 - a
        tpot = np.where(o >= 2, (f2 - f1) / np.maximum(o - 1.0, 1.0), 0.0)
    ok = np.isfinite(f2) & (ttft <= w.ttft_slo_s) & ((o < 2) | (tpot <= w.tpot_slo_s))
    done_all = np.isfinite(fin) & came
    horizon = float(np.max(fin[done_all])) if done_all.any() else float("nan")
    stopped = bool(np.any(st.stopped[c, r]) or np.any(st.truncated[c, r]))
    if w.offline:
        goodput = done_all.sum() / horizon
        tok_s = out[done_all].sum() / horizon
    else:
        span = a[-1] - a[0] if a.size > 1 else float("nan")
        goodput = (a.size - 1) / span
        tok_s = o[:-1].sum() / span
    energy = idle_w * gpus * horizon + float(st.energy_j[c, r].sum())
    tokens_done = out[done_all].sum()
    fin_ok = np.isfinite(f2)
    hist = st.hist[c, r].sum(axis=0)
    zeros = float(st.zeros[c, r].sum())
    row_passes = float(st.row_passes[c, r].sum())
    decode_steps = float(st.decode_steps[c, r].sum())
    completed_arr = arr[done_all]
    return dict(
        requests=int(came.sum()), window_requests=int(a.size), completed=int(done_all.sum()),
        attainment=float(ok.mean()) if a.size else 0.0, stopped_early=stopped,
        goodput_req_s=float(goodput), goodput_req_s_per_gpu=float(goodput) / gpus,
        output_tok_s=float(tok_s), output_tok_s_per_gpu=float(tok_s) / gpus,
        usd_per_mtok=price * gpus / 3600.0 / float(tok_s) * 1e6,
        energy_j=energy, energy_per_token_j=energy / tokens_done if tokens_done else float("nan"),
        horizon_s=horizon,
        ttft_p50_s=_pct(ttft[fin_ok | np.isfinite(f1)], 50), ttft_p90_s=_pct(ttft[np.isfinite(f1)], 90),
        ttft_p99_s=_pct(ttft[np.isfinite(f1)], 99),
        tpot_p50_s=_pct(tpot[fin_ok & (o >= 2)], 50), tpot_p90_s=_pct(tpot[fin_ok & (o >= 2)], 90),
        tpot_p99_s=_pct(tpot[fin_ok & (o >= 2)], 99),
        itl_p50_s=hist_percentile(hist, zeros, 50), itl_p90_s=hist_percentile(hist, zeros, 90),
        itl_p99_s=hist_percentile(hist, zeros, 99),
        decode_steps=decode_steps, prefill_steps=float(st.prefill_steps[c, r].sum()),
        mean_decode_batch=row_passes / decode_steps if decode_steps else 0.0,
        tokens_per_pass=float((out[done_all] - 1.0).sum() / passes[done_all].sum()) if passes[done_all].sum() else 1.0,
        kv_peak_tokens=float(st.kv_peak[c, r].max()),
        busy_fraction=float(st.busy_s[c, r].sum() / (horizon * st.busy_s.shape[-1])),
        little_l=float(st.area[c, r].sum() / horizon),
        little_lambda_w=float(np.sum(fin[done_all] - completed_arr) / horizon),
        iterations=int(st.iters[c, r].max()),
    )
