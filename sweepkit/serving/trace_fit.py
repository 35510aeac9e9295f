"""Summarise a replayed trace into a synthetic workload: lengths, sessions, rate, burstiness and reuse.

The synthetic model (:mod:`sweepkit.serving.requests`) draws lognormal lengths, fixed turns per session,
exponential think times and Poisson session starts. The fit takes from the replay (:class:`Replay`):

* new input per turn x = prompt - chain (what a turn adds beyond its session's cached chain) and output y:
  mean, coefficient of variation cv = std / mean and maximum (the lognormal's moments, github.com/
  BrendanJamesLynskey/Disaggregated_Inference_Sim ``LengthDist``);
* turns = round(requests / sessions) (at least 1); think_mean_s = the mean gap between a session's turns;
* system prompts: the replay's distinct first blocks, each ``block_tokens`` long;
* rate: sessions per second of the trace's span; burstiness: the CV of the gaps between session starts
  (1 for a Poisson process; above 1 burstier than the synthetic arrivals, which are Poisson);
* reuse: the trace's repeated blocks and the replay's chained share (:class:`sweepkit.serving.traces.Reuse`).

Rate, burstiness and reuse have no field in a workload; the entry carries them as comments, so the fitted
workload and the replay can be compared at the same load.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from sweepkit.serving.traces import Replay

MAX_PROMPT_TOKENS = 1_000_000
MAX_OUTPUT_TOKENS = 65_536
MAX_CV = 10.0
"""Largest length cv a workload file accepts (a fitted cv is clipped to it)."""


@dataclasses.dataclass(frozen=True)
class Fit:
    """A trace's synthetic summary (base units in every name; see the module docstring)."""

    requests: int
    sessions: int
    span_s: float
    rate_per_s: float
    start_gap_cv: float
    prompt_mean_tokens: float
    prompt_cv: float
    prompt_max_tokens: int
    output_mean_tokens: float
    output_cv: float
    output_max_tokens: int
    turns: int
    think_mean_s: float
    system_prompts: int
    system_prompt_tokens: int
    block_share: float
    chained_share: float


def _cv(v: np.ndarray) -> float:
    m = float(np.mean(v)) if v.size else 0.0
    return float(np.std(v) / m) if m > 0 else 0.0


def fit(rp: Replay) -> Fit:
    """The synthetic summary of a replay.

    Example:
      >>> import numpy as np
      >>> from sweepkit.serving.traces import Replay, Reuse
      >>> z = lambda *v: np.array(v)
      >>> rp = Replay("t", "generic", z(0.0, 2.0, 4.0), z([100, 300], [200, 0], [300, 0]), z([10, 30], [20, 0], [30, 0]),
      ...             z([0, 110], [0, 0], [0, 0]), z([110, 0], [0, 0], [0, 0]), z([0, 5.0], [0, np.inf], [0, np.inf]),
      ...             z(0, 0, 0), z(0), z(2, 1, 1), 512, Reuse(0, 0, 900, 0, 110))
      >>> f = fit(rp); f.turns, f.prompt_mean_tokens, f.think_mean_s, f.rate_per_s, f.start_gap_cv
      (1, 197.5, 5.0, 0.6, 0.0)
    """
    has = np.arange(rp.prompt.shape[1])[None, :] < rp.turns[:, None]
    x = np.maximum(rp.prompt - rp.chain, 1)[has]
    y = rp.output[has]
    gaps = rp.think_s[:, 1:][has[:, 1:]]
    starts = np.diff(rp.start_s)
    n_sys = int(np.sum(rp.system_tokens > 0))
    return Fit(requests=rp.requests, sessions=rp.sessions, span_s=rp.span_s, rate_per_s=rp.rate_per_s,
               start_gap_cv=_cv(starts), prompt_mean_tokens=float(x.mean()), prompt_cv=min(_cv(x), MAX_CV),
               prompt_max_tokens=int(min(x.max(), MAX_PROMPT_TOKENS)), output_mean_tokens=float(y.mean()),
               output_cv=min(_cv(y), MAX_CV), output_max_tokens=int(min(y.max(), MAX_OUTPUT_TOKENS)),
               turns=max(int(round(rp.requests / rp.sessions)), 1),
               think_mean_s=float(gaps.mean()) if gaps.size else 0.0, system_prompts=n_sys,
               system_prompt_tokens=int(rp.block_tokens) if n_sys else 0, block_share=rp.reuse.block_share,
               chained_share=rp.reuse.chained_share)


def toml_entry(f: Fit, name: str, source: str, ttft_slo_s: float, tpot_slo_s: float) -> str:
    """A ``[workloads.<name>]`` table of the fit (sweepkit/serving/data/workloads.toml's fields), with the
    trace's rate, burstiness and reuse as comments.

    Example:
      >>> f = Fit(10, 5, 100.0, 0.05, 1.3, 200.0, 1.0, 900, 50.0, 0.5, 90, 2, 3.0, 1, 512, 0.3, 0.25)
      >>> print(toml_entry(f, "t", "a trace", 5.0, 0.05).splitlines()[5])
      [workloads.t]
    """
    g = lambda v: json.dumps(round(float(v), 6))  # noqa: E731
    lines = [
        f"# Fitted from {source}: {f.requests:,} requests in {f.sessions:,} sessions over {f.span_s:,.1f} s.",
        f"# rate: {f.rate_per_s:.6g} sessions/s (the replay's own load); burstiness: CV of session-start gaps "
        f"{f.start_gap_cv:.3f} (Poisson: 1).",
        f"# reuse: {f.block_share:.4f} of prefix blocks repeat (arrival order, unbounded cache); the replay's "
        f"chains hold {f.chained_share:.4f} of prompt tokens.",
        "# Lengths are lognormal (mean, cv) clipped to the trace's maxima; sessions start as a Poisson process.",
        "",
        f"[workloads.{name}]",
        f"description = {json.dumps(f'Synthetic fit of {source}')}",
        f"source = {json.dumps(f'sweepkit workload fit {source}')}",
        f"prompt_mean_tokens = {g(f.prompt_mean_tokens)}",
        f"prompt_cv = {g(f.prompt_cv)}",
        f"prompt_max_tokens = {f.prompt_max_tokens}",
        f"output_mean_tokens = {g(f.output_mean_tokens)}",
        f"output_cv = {g(f.output_cv)}",
        f"output_max_tokens = {f.output_max_tokens}",
        f"turns = {f.turns}",
        f"think_mean_s = {g(f.think_mean_s)}",
        f"system_prompts = {f.system_prompts}",
        f"system_prompt_tokens = {f.system_prompt_tokens}",
        f"ttft_slo_s = {g(ttft_slo_s)}",
        f"tpot_slo_s = {g(tpot_slo_s)}",
        "offline = false",
        "min_sessions = 200",
    ]
    return "\n".join(lines) + "\n"
