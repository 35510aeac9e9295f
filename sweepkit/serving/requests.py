"""Request sampling: lengths, sessions and arrivals drawn once per workload, common across loads and levers.

Lengths (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim): lognormal with sigma^2 = ln(1 + cv^2),
mu = ln(mean) - sigma^2 / 2, rounded and clipped to [1, max]; or resampled rows of a trace file. Session ``s``
turn ``k`` has new input x_k and output y_k; its prompt carries the system prompt and the whole history:

    prompt_k = system + sum_{j<k} (x_j + y_j) + x_k

Sessions start as a Poisson process: start_s = (E_1 + ... + E_{s+1}) / rate with E_i ~ Exp(1) drawn once, so a
change of rate rescales the same arrivals (common random numbers). Turn k > 0 arrives closed-loop,
think_mean_s x Exp(1) after turn k - 1 finishes (its think time is drawn up front, its arrival known only
inside the simulation).

Workloads with lognormal lengths, single- or multi-turn, are drawn exactly as the seed draws them, from one
Python ``random.Random(seed)`` in its order (:func:`_seed_sessions`), so they simulate the seed's own
requests. Trace-file workloads draw from ``numpy.random.default_rng([seed, block])`` in blocks of 1,024
sessions. Either way session ``s`` is the same whatever the number of sessions simulated.

Speculative acceptance uses a counter-based hash ``u(seed, request, pass)``: drafted tokens accepted in verify
pass p of request r are k = min(floor(ln u / ln alpha), gamma), i.e. accepted i.i.d. with probability alpha
until the first rejection (a truncated geometric). The same u serve every lever and load, and
:func:`verify_passes` turns them into the number of passes each request needs for its output.
"""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np

from sweepkit.serving.workloads import Workload

BLOCK = 1024
"""Sessions per PRNG block (session s is drawn from block s // BLOCK)."""


@dataclasses.dataclass(frozen=True)
class Sessions:
    """Sampled sessions of one workload (numpy; ``S`` sessions x ``T`` turns).

    Attributes:
      start_unit: [S] session start times at rate 1 (divide by the rate), seconds x rate.
      new_input: [S, T] new input tokens per turn.  output: [S, T] output tokens per turn.
      prompt: [S, T] full prompt tokens per turn (system prompt + history + new input).
      think_s: [S, T] think time before turn k (unused for k = 0), seconds.
      system_id: [S] which shared system prompt the session uses.
      segment: [S, T] tokens each turn adds to its session's prefix chain (None: new input + output).
      system_tokens: [systems] each shared prompt's tokens (None: the workload's ``system_prompt_tokens``).
    """

    start_unit: np.ndarray
    new_input: np.ndarray
    output: np.ndarray
    prompt: np.ndarray
    think_s: np.ndarray
    system_id: np.ndarray
    segment: np.ndarray | None = None
    system_tokens: np.ndarray | None = None

    @property
    def n_sessions(self) -> int:
        return int(self.start_unit.shape[0])

    @property
    def turns(self) -> int:
        return int(self.output.shape[1])


def _block(w: Workload, seed: int, block: int) -> dict[str, np.ndarray]:
    """Sessions ``block`` x BLOCK onwards of a trace-file workload: start gaps, rows of the trace resampled
    per turn, think times and system prompts, from ``numpy.random.default_rng([seed, block])``."""
    rng = np.random.default_rng([seed, block])
    t = w.turns
    gaps = rng.exponential(1.0, size=BLOCK)
    idx = rng.integers(0, len(w.trace_inputs), size=(BLOCK, t))
    x = np.asarray(w.trace_inputs, dtype=np.int64)[idx]
    y = np.asarray(w.trace_outputs, dtype=np.int64)[idx]
    think = rng.exponential(1.0, size=(BLOCK, t)) * w.think_mean_s
    sys_id = rng.integers(0, max(w.system_prompts, 1), size=BLOCK)
    return dict(gaps=gaps, x=x, y=y, think=think, sys_id=sys_id)


def _seed_sessions(w: Workload, n: int, seed: int) -> Sessions:
    """Sessions drawn exactly as the seed draws them: one ``random.Random(seed)``; per session, in order, the
    start gap ``expovariate`` (here at rate 1; a load divides it), the system prompt
    ``randrange(system_prompts)`` (only with system prompts of > 0 tokens), then per turn k the new input
    and the output, each ``round(lognormvariate(mu, sigma))`` clipped to [1, max] (a length with cv = 0 is
    its mean and draws nothing), and for k > 0 the think time ``think_mean_s x expovariate(1)``.
    Sequential, so session s is the same whatever n; ``expovariate(rate) == expovariate(1) / rate``, so a
    load only rescales ``start_unit``. Why: the seed's sample, not just its distribution, sets the tails of
    its runs (a single-turn run is 400 requests, a voice run 1,200): with it the seed's H100 offline-batch
    baseline is reproduced to within 0.1%, and its voice baseline's capacity exactly, its latencies at the
    reference load to within 0.5% (docs/serving.md).

    References:
      ``chat_sessions`` and ``LengthDist.sample`` of github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim
      (src/disagg_sim/workload.py, commit 0caa090).
    """
    rng, T = random.Random(seed), w.turns

    def length(mean: float, cv: float, hi: int) -> int:
        if cv <= 0:
            return min(max(round(mean), 1), hi)
        s2 = math.log(1 + cv ** 2)
        return min(max(round(rng.lognormvariate(math.log(mean) - s2 / 2, math.sqrt(s2))), 1), hi)

    gaps, sys_id = np.empty(n), np.zeros(n, np.int64)
    x, y, think = np.empty((n, T), np.int64), np.empty((n, T), np.int64), np.zeros((n, T))
    with_system = w.system_prompts > 0 and w.system_prompt_tokens > 0
    for i in range(n):
        gaps[i] = rng.expovariate(1.0)
        if with_system:
            sys_id[i] = rng.randrange(w.system_prompts)
        for k in range(T):
            x[i, k] = length(w.prompt_mean_tokens, w.prompt_cv, w.prompt_max_tokens)
            y[i, k] = length(w.output_mean_tokens, w.output_cv, w.output_max_tokens)
            if k and w.think_mean_s > 0:
                think[i, k] = w.think_mean_s * rng.expovariate(1.0)
    return _sessions(w, np.cumsum(gaps), x, y, think, sys_id)


def _sessions(w: Workload, start_unit, x, y, think, sys_id) -> Sessions:
    """Sessions from their draws; turn k's prompt = system prompt + earlier turns' input and output + x_k."""
    history = np.cumsum(x + y, axis=1) - (x + y)
    sys_tokens = w.system_prompt_tokens if w.system_prompts > 0 else 0
    return Sessions(start_unit=start_unit, new_input=x, output=y, prompt=sys_tokens + history + x,
                    think_s=think, system_id=sys_id)


def sample_sessions(w: Workload, n_sessions: int, seed: int = 1) -> Sessions:
    """The first ``n_sessions`` sessions of workload ``w`` under ``seed`` (workload seed 1 in the seed's sweep):
    the seed's own draws (:func:`_seed_sessions`) for lognormal lengths, numpy blocks for a trace's rows, a
    replayed trace's own sessions (:func:`replayed_sessions`; ``seed`` unused)."""
    if w.replay is not None:
        return replayed_sessions(w.replay, n_sessions)
    if not w.trace_inputs:
        return _seed_sessions(w, n_sessions, seed)
    blocks = [_block(w, seed, b) for b in range(-(-n_sessions // BLOCK))]
    cat = {k: np.concatenate([b[k] for b in blocks])[:n_sessions] for k in blocks[0]}
    return _sessions(w, np.cumsum(cat["gaps"]), cat["x"], cat["y"], cat["think"], cat["sys_id"])


def replayed_sessions(rp, n_sessions: int) -> Sessions:
    """The first ``n_sessions`` sessions of a :class:`sweepkit.serving.traces.Replay` (padded with one-token
    sessions that never continue past ``rp.sessions``); start times in units of its rate (``start_s x
    rp.rate_per_s``: a load of ``rp.rate_per_s`` replays the trace's own times)."""
    S, n = rp.sessions, int(n_sessions)
    take = lambda a, fill: np.concatenate([a[:n], np.full((max(n - S, 0),) + a.shape[1:], fill, a.dtype)])  # noqa: E731
    rate = rp.rate_per_s if np.isfinite(rp.rate_per_s) else 1.0
    start = take(rp.start_s * rate, rp.start_s[-1] * rate)
    prompt, output, chain = take(rp.prompt, 1), take(rp.output, 1), take(rp.chain, 0)
    return Sessions(start_unit=start, new_input=np.maximum(prompt - chain, 0), output=output, prompt=prompt,
                    think_s=take(rp.think_s, np.inf), system_id=take(rp.system_id, 0),
                    segment=take(rp.segment, 0), system_tokens=rp.system_tokens)


def uniform_hash(seed: int, request: np.ndarray, pass_no: np.ndarray) -> np.ndarray:
    """u in (0, 1) from a counter-based integer hash of (seed, request id, pass number) (murmur3 finaliser)."""
    with np.errstate(over="ignore"):
        x = (np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
             ^ request.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
             ^ pass_no.astype(np.uint64) * np.uint64(0x94D049BB133111EB))
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xFF51AFD7ED558CCD)
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xC4CEB9FE1A85EC53)
        x ^= x >> np.uint64(33)
    return ((x >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def accepted_drafts(u: np.ndarray, alpha: float, gamma: int) -> np.ndarray:
    """Drafts accepted in a pass: k = min(floor(ln u / ln alpha), gamma); P(k >= j) = alpha^j for j <= gamma."""
    if gamma <= 0 or alpha <= 0.0:
        return np.zeros_like(u, dtype=np.int64)
    if alpha >= 1.0:
        return np.full(u.shape, gamma, dtype=np.int64)
    return np.minimum(np.floor(np.log(u) / np.log(alpha)), gamma).astype(np.int64)


def verify_passes(request_ids: np.ndarray, output: np.ndarray, alpha: float, gamma: int, seed: int = 0,
                  chunk: int = 4096) -> np.ndarray:
    """Decode passes each request needs after its prefill to emit its ``output - 1`` remaining tokens.

    Pass p of request r emits min(k_{r,p} + 1, remaining) tokens (k from :func:`accepted_drafts`), so the
    passes are the first P with sum_{p<P} (k_{r,p} + 1) >= output - 1. Without a draft P = output - 1.

    Args:
      request_ids: [N] global request ids (the hash counter; stable across loads).
      output: [N] output tokens (>= 1).
      alpha, gamma: acceptance per drafted token and draft length.
      seed: the lever's speculation seed (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim: spec seed 0).

    Returns:
      [N] int64 passes.
    """
    need = np.maximum(output.astype(np.int64) - 1, 0)
    if gamma <= 0 or alpha <= 0.0 or need.size == 0:
        return need
    out = np.empty_like(need)
    width = int(need.max()) if need.size else 0
    for lo in range(0, need.size, chunk):
        ids = request_ids[lo:lo + chunk]
        p = np.arange(max(width, 1), dtype=np.int64)
        u = uniform_hash(seed, ids[:, None], p[None, :])
        emitted = np.cumsum(accepted_drafts(u, alpha, gamma) + 1, axis=1)
        n = need[lo:lo + chunk]
        out[lo:lo + chunk] = np.where(n > 0, (emitted < n[:, None]).sum(axis=1) + 1, 0)
    return out
