"""The speculative-decoding mechanism, pass by pass, for a few requests (``sweepkit trace``).

The serving simulator (:mod:`sweepkit.serving`) prices runs of decode steps at once with each row's *mean*
tokens per pass, so it has no per-pass record. This module replays the same scheduling rules one pass at a
time, with random acceptance, and records every pass (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim, "Website mechanism scenario"):

* All requests arrive at ``arrival_s``. At each step boundary the waiting requests that have arrived are
  admitted first-come first-served while their prompts fit the prefill token budget (the first always fits)
  and the batch cap: a **prefill step** prices whole prompts as one target pass (plus the draft's prefill
  over the same tokens) and emits each admitted request's first token at its end. Running rows wait.
* Otherwise every running row takes part in one **decode step**. Plain: one target pass
  ``decode_work(C, B)``. Speculative: gamma sequential draft passes ``decode_work(C + j B, B)``, j < gamma,
  priced without the pass overhead, then one target verify pass ``verify_work(C, B, gamma + 1)``.
  C = the cached tokens of the running rows (prompt + tokens emitted by decode passes), B = rows.
* In each verify pass a row accepts drafted tokens i.i.d. with probability alpha until the first rejection
  (k accepted, k <= gamma) and emits min(k + 1, remaining) tokens: the k accepted ones plus the target's own
  token (a *correction* after a rejection, a *bonus* when all gamma were accepted); capped rows emit fewer.

Acceptance draws come from a JAX PRNG key: u[r, p, i] = uniform(fold_in(fold_in(key(seed), r), p))[i] for
request r, its decode pass p and draft position i, so a seed gives the same trace every time. Every pass is
priced by the pricing API the decode grid and the serving engine use (:func:`sweepkit.costmodel.steps.target_pass_cost`
and :func:`~sweepkit.costmodel.steps.draft_pass_cost` on one :class:`~sweepkit.costmodel.steps.Instance`), in
float64; a pass's energy includes the instance's idle power over the pass.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.catalogue import get_device, get_draft, get_format, get_model
from sweepkit.costmodel.passes import Work, as_prefill, decode_work, verify_work
from sweepkit.costmodel.roofline import BOUNDS
from sweepkit.costmodel.steps import Instance, draft_pass_cost, instance, target_pass_cost
from sweepkit.checks import check_alpha, check_int, check_tp
from sweepkit.errors import bad_value

MAX_REQUESTS, MAX_PROMPT_TOKENS, MAX_OUTPUT_TOKENS, MAX_TOTAL_OUTPUT_TOKENS = 1024, 131_072, 4_096, 1 << 18
"""A trace is a few requests, pass by pass: at most 1,024 requests, 131,072 prompt and 4,096 output tokens
each, 262,144 output tokens in all (at most that many passes per mode in trace_steps)."""
MAX_SEED = 2**32 - 1
"""Largest PRNG seed (JAX's keys are 32-bit words)."""
MODES = ("plain", "speculative")
"""A trace runs the same requests twice: without a draft, then with it."""


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A few requests on one instance. Defaults: the seed's mechanism scenario (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim).

    Attributes:
      device, model, draft: catalogue names (draft ``mtp`` or a model sharing the vocab).
      gamma: drafted tokens per verify pass (>= 1).  alpha: acceptance per drafted token, in [0, 1].
      prompt_tokens, output_tokens: per request.  arrival_s: per request (default all at 0 s).
      seed: PRNG seed of the acceptance draws.  tp: devices of the instance.
      prefill_token_budget: prompt tokens per prefill step.  batch_cap: running rows.
    """

    device: str = "H100"
    model: str = "llama-3-8b"
    draft: str = "mtp"
    gamma: int = 3
    alpha: float = 0.7
    prompt_tokens: tuple[int, ...] = (512, 384)
    output_tokens: tuple[int, ...] = (40, 40)
    arrival_s: tuple[float, ...] | None = None
    seed: int = 0
    tp: int = 1
    weight_format: str = "bf16"
    kv_format: str = "bf16"
    compute_format: str = "bf16"
    prefill_token_budget: int = 8192
    batch_cap: int = 256

    def checked(self) -> Scenario:
        """Validate every field (one-line :class:`~sweepkit.errors.InputError`); returns the scenario."""
        target = get_model(self.model)
        if self.draft == "none":
            raise bad_value("draft", self.draft, "mtp or a draft model (the trace compares against plain itself)")
        get_draft(self.draft, target)
        get_device(self.device)
        for f in ("weight_format", "kv_format", "compute_format"):
            get_format(getattr(self, f), f)
        check_int("gamma", self.gamma, 1, 64)
        check_alpha(self.alpha)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_tp(check_int("tp", self.tp, 1, 1024), target)
        check_int("prefill_token_budget", self.prefill_token_budget, 1, 1 << 20)
        check_int("batch_cap", self.batch_cap, 1, 4096)
        if not self.prompt_tokens or len(self.prompt_tokens) > MAX_REQUESTS:
            raise bad_value("prompts", ",".join(map(str, self.prompt_tokens))[:60],
                            f"1 to {MAX_REQUESTS} prompt lengths (a trace shows a few requests pass by pass)")
        for p in self.prompt_tokens:
            check_int("prompts", p, 1, MAX_PROMPT_TOKENS)
        if len(self.output_tokens) != len(self.prompt_tokens):
            raise bad_value("outputs", ",".join(map(str, self.output_tokens)),
                            f"one length, or {len(self.prompt_tokens)} (one per prompt)")
        for o in self.output_tokens:
            check_int("outputs", o, 1, MAX_OUTPUT_TOKENS)
        if sum(self.output_tokens) > MAX_TOTAL_OUTPUT_TOKENS:
            raise bad_value("outputs", f"{sum(self.output_tokens):,} tokens in all",
                            f"at most {MAX_TOTAL_OUTPUT_TOKENS:,} output tokens over all requests")
        if self.arrival_s is not None and (len(self.arrival_s) != len(self.prompt_tokens)
                                           or any(not (a >= 0.0) for a in self.arrival_s)):
            raise bad_value("arrival_s", self.arrival_s, "one time >= 0 s per prompt")
        return self

    @property
    def arrivals(self) -> tuple[float, ...]:
        return self.arrival_s if self.arrival_s is not None else (0.0,) * len(self.prompt_tokens)


@partial(jax.jit, static_argnames=("n_requests", "max_passes", "gamma"))
def _uniforms(seed, n_requests: int, max_passes: int, gamma: int):
    key = jax.random.PRNGKey(seed)

    def one(r, p):
        return jax.random.uniform(jax.random.fold_in(jax.random.fold_in(key, r), p), (gamma,))

    return jax.vmap(jax.vmap(one, in_axes=(None, 0)), in_axes=(0, None))(jnp.arange(n_requests),
                                                                         jnp.arange(max_passes))


def accepted_drafts(seed: int, n_requests: int, max_passes: int, gamma: int, alpha: float) -> np.ndarray:
    """Accepted drafts k[r, p] of request r's decode pass p: leading draws u < alpha, at most gamma.

    u[r, p, i] = uniform(fold_in(fold_in(PRNGKey(seed), r), p))[i]: request r's draws do not depend on how
    many requests run with it.
    """
    with jax.enable_x64(True):
        u = np.asarray(_uniforms(seed, n_requests, max(max_passes, 1), gamma))
    return np.cumprod(u < alpha, axis=2).sum(axis=2).astype(np.int64)


def _instance(sc: Scenario, speculative: bool) -> Instance:
    """The priced replica (float64): the scenario's draft and gamma, or none."""
    target = get_model(sc.model)
    draft = get_draft(sc.draft if speculative else "none", target)
    return instance(get_device(sc.device), target, draft, sc.tp, sc.weight_format, sc.kv_format, sc.compute_format,
                    sc.gamma if speculative else 0, jnp.float64, pipelined=False)


@partial(jax.jit, static_argnames="gamma")
def _decode_step(inst: Instance, ctx, batch, gamma: int):
    """(draft pass times [gamma], draft energies [gamma], verify PassCost) of one decode step."""
    j = jnp.arange(max(gamma, 1), dtype=ctx.dtype)
    d = jax.vmap(lambda jj: draft_pass_cost(inst, decode_work(ctx + jj * batch, batch)))(j)
    v = target_pass_cost(inst, verify_work(ctx, batch, gamma + 1.0))
    return d.t_s[:gamma], d.energy_j[:gamma], v


@jax.jit
def _prefill_step(inst: Instance, tokens, attn_pairs, prompts):
    """(target PassCost, draft PassCost) of a prefill step of ``prompts`` whole prompts."""
    work = as_prefill(Work(tokens=tokens, attn_pairs=attn_pairs, kv_tokens=tokens, rows=prompts))
    return target_pass_cost(inst, work), draft_pass_cost(inst, work)


def run_mode(sc: Scenario, speculative: bool) -> dict[str, np.ndarray]:
    """Simulate the scenario without (``speculative=False``) or with its draft; one record per pass x row.

    Returns:
      Columns (numpy arrays of equal length), see :data:`sweepkit.store.trace_steps.COLUMNS`.
    """
    gamma = sc.gamma if speculative else 0
    prompts = np.asarray(sc.prompt_tokens, np.int64)
    outputs = np.asarray(sc.output_tokens, np.int64)
    arrivals = np.asarray(sc.arrivals, np.float64)
    n = len(prompts)
    k_draw = accepted_drafts(sc.seed, n, int(outputs.max()), gamma, sc.alpha) if speculative else None
    rows: list[tuple] = []
    with jax.enable_x64(True):
        inst = _instance(sc, speculative)
        t = 0.0
        waiting = list(np.argsort(arrivals, kind="stable"))
        running: list[int] = []
        done = np.zeros(n, np.int64)      # output tokens emitted so far
        passes = np.zeros(n, np.int64)    # decode passes taken so far
        index = 0
        while waiting or running:
            ready = [r for r in waiting if arrivals[r] <= t]
            admit, budget = [], 0
            for r in ready:
                if len(running) + len(admit) >= sc.batch_cap:
                    break
                if admit and budget + prompts[r] > sc.prefill_token_budget:
                    break
                admit.append(r)
                budget += prompts[r]
            if admit:
                p = prompts[admit].astype(np.float64)
                ct, cd = _prefill_step(inst, jnp.asarray(p.sum()), jnp.asarray((p * (p + 1.0)).sum()),
                                        jnp.asarray(float(p.size)))
                t_d, t_v = float(cd.t_s), float(ct.t_s)
                energy = float(ct.energy_j) + float(cd.energy_j)
                for r in admit:
                    done[r] = 1
                    rows.append((index, "prefill", r, len(admit), int(p.sum()), 0, 0, 0, 1, "first",
                                 int(done[r]), t, t + t_d, t + t_d + t_v, BOUNDS[int(ct.bound)], energy))
                    waiting.remove(r)
                running += admit
                t += t_d + t_v
            elif running:
                b = len(running)
                ctx = float(sum(prompts[r] + done[r] - 1 for r in running))
                td, ed, v = _decode_step(inst, jnp.asarray(ctx), jnp.asarray(float(b)), gamma)
                t_d = float(np.sum(td)) if gamma else 0.0
                t_v = float(v.t_s)
                energy = float(v.energy_j) + (float(np.sum(ed)) if gamma else 0.0)
                for r in list(running):
                    remaining = outputs[r] - done[r]
                    k = int(k_draw[r, passes[r]]) if speculative else 0
                    emitted = int(min(k + 1, remaining))
                    kind = "plain" if not speculative else (
                        "none" if k + 1 > remaining else ("bonus" if k == gamma else "correction"))
                    done[r] += emitted
                    passes[r] += 1
                    rows.append((index, "decode", r, b, int(ctx), gamma, k, gamma - k, emitted, kind,
                                 int(done[r]), t, t + t_d, t + t_d + t_v, BOUNDS[int(v.bound)], energy))
                running = [r for r in running if done[r] < outputs[r]]
                t += t_d + t_v
            else:
                t = float(min(arrivals[r] for r in waiting))
                continue
            running = [r for r in running if done[r] < outputs[r]]
            index += 1
    names = ("pass_index", "pass_kind", "request", "batch", "context_tokens", "drafted_tokens",
             "accepted_tokens", "rejected_tokens", "emitted_tokens", "target_token", "tokens_done",
             "start_s", "verify_start_s", "end_s", "bound", "pass_energy_j")
    cols = {name: np.asarray([row[i] for row in rows]) for i, name in enumerate(names)}
    cols["prompt_tokens"] = prompts[cols["request"]]
    cols["output_tokens"] = outputs[cols["request"]]
    cols["arrival_s"] = arrivals[cols["request"]]
    return cols


def summary(cols: dict[str, np.ndarray]) -> dict[str, float]:
    """Tokens per decode row-pass, TTFT and TPOT p99 (s) of one mode's records (numpy; SQL: trace_summary)."""
    dec = cols["pass_kind"] == "decode"
    first, last = {}, {}
    for r, kind, end in zip(cols["request"], cols["pass_kind"], cols["end_s"]):
        if kind == "prefill":
            first[int(r)] = end
        last[int(r)] = max(last.get(int(r), 0.0), end)
    out_len = {int(r): int(o) for r, o in zip(cols["request"], cols["output_tokens"])}
    arr = {int(r): float(a) for r, a in zip(cols["request"], cols["arrival_s"])}
    tpot = [(last[r] - first[r]) / (out_len[r] - 1) for r in first if out_len[r] > 1]
    return {
        "tokens_per_pass": float(cols["emitted_tokens"][dec].mean()) if dec.any() else float("nan"),
        "tpot_p99_s": float(np.percentile(tpot, 99)) if tpot else float("nan"),
        "ttft_p99_s": float(np.percentile([first[r] - arr[r] for r in first], 99)),
    }
