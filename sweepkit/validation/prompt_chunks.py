"""The prompts of a mixed-batching steady state: computed in chunks of the step's token budget, not spread thin.

In the steady state of n running requests of I prompt and O output tokens (:mod:`sweepkit.validation.steady`)
n / O prompts start per step on average, n I / O prompt tokens. A chunked-prefill scheduler does not spread
them over the steps: each step it schedules every running request's decode token first and then gives the
waiting prompt min(its tokens left, the budget left) tokens (vLLM's V1 scheduler, the serving engine's
:func:`sweepkit.serving.engine.schedule.token_budget_split`). A prompt is so computed in chunks of

    c_p = min(I, max(N_tok - n, 1))

beside the n decode rows, and the steps between carry the decode rows alone. Where the steps need more prompt
tokens than one chunk (n I / O > c_p: many requests, short outputs) every step carries n I / O of them, as
before. So a share f of the steps carries p prompt tokens and the rest none:

    p = max(c_p, n I / O),   f = n I / (O p)   (0 < f <= 1;  f p = n I / O, the prompt tokens per step)

    t_step = f t(n decode rows, p prompt tokens) + (1 - f) t(n decode rows, no prompt)

Under attention data parallelism over D ranks each rank schedules its own requests (n / D of them) within its
own budget N_tok / D, so it prefills a chunk of c_r = min(I, max(N_tok / D - n / D, 1)) tokens in a share
f_r = min(1, n I / (D O c_r)) of the steps, independently of the other ranks (each rank's requests finish on
their own schedule). Every rank meets the others at each MoE layer, so a step is slow when ANY rank prefills:

    f = 1 - (1 - f_r)^D,   p = n I / (O f)      (the replica's prompt tokens in a step that carries any)

and the busiest rank of such a step holds one chunk (:mod:`sweepkit.costmodel.rank_balance`). D = 1 gives the
single-scheduler rule above exactly. TensorRT-LLM's DeepSeek-R1 DEP8 run at 384 requests a rank and 1,024 /
2,048 tokens: f_r = 0.1875, f = 0.81 (the D = 1 rule, spread over the replica's budget, gave f = 1).

The prompt work per step is the same n I / O tokens (n / O prompts of I (I + 1) attention pairs); what a chunk
changes is that it is priced in its own step: a step's roofline, max(compute, memory) per operator class, is
convex in its tokens, so a chunk costs at least what the same tokens spread over 1 / f bandwidth-bound decode
steps cost (the weights those read are idle compute), while the distinct experts a mixture-of-experts step
reads grow slower than its tokens. f = 1 (p = n I / O) is the spread step of
:func:`sweepkit.validation.steady.step_work`.

Example:
  Qwen3-32B on one H100 under vLLM's 8,192-token budget, 2,000 in / 100 out: n = 11.77 (the KV cache), 235.4
  prompt tokens per step on average, computed as one whole 2,000-token prompt in f = 11.8 % of the steps
  (tests/validation/test_prompt_chunks.py).

References:
  vLLM, vllm/v1/core/sched/scheduler.py (``Scheduler.schedule``: running requests first, then each waiting
  request with ``num_new_tokens = min(num_new_tokens, token_budget)``; ``long_prefill_token_threshold`` 0 by
  default, vllm/config/scheduler.py), github.com/vllm-project/vllm, v0.10-v0.11; vLLM docs, "Performance and
  Tuning", chunked prefill (every pending decode is batched before any prefill; pending prefills take the
  token budget left, the last one chunked to fit), docs.vllm.ai/en/v0.4.2/models/performance.html, and
  "Optimization and Tuning", docs.vllm.ai/en/v0.8.3/performance/optimization.html (V1: chunked prefill always
  on); Agrawal et al., "Sarathi-Serve", OSDI 2024,
  arXiv:2403.02310 (a prompt's chunks fill each step's token budget beside the decodes); NVIDIA TensorRT-LLM,
  "ADP Balance Strategy" (docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md, github.com/NVIDIA/TensorRT-LLM:
  an attention-DP iteration lasts as long as its slowest rank; ranks prefill on their own schedules).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from sweepkit.costmodel.passes import Work, as_prefill


def prompt_chunks(n: jax.Array, isl: jax.Array, osl: jax.Array, token_budget: jax.Array,
                  ranks: jax.Array = 1.0) -> tuple[jax.Array, jax.Array]:
    """(p, f): the replica's prompt tokens in a step that computes prompts, and the share of the steady state's
    steps that do (module docstring).

    .. math::
        c_r = \\min(I, \\max(N_{tok} / D - n / D, 1)),\\quad f_r = \\min(1, \\frac{n I}{D O c_r}),\\quad
        f = 1 - (1 - f_r)^D,\\quad p = \\frac{n I}{O f}

    Args:
      n: running requests of the replica (>= 1).  isl, osl: I and O, tokens per request (O >= 1).
      token_budget: N_tok, tokens per step of the replica (decode rows and prompt chunks together).
      ranks: D, attention-DP ranks scheduling n / D requests and N_tok / D tokens each (1: one scheduler).

    Returns:
      (p in tokens, f in (0, 1]); f p = n I / O.

    Example:
      >>> p, f = prompt_chunks(10.0, 2000.0, 80.0, 8192.0)      # 250 tokens per step, as 2,000 in 1 step of 8
      >>> (float(p), float(f))
      (2000.0, 0.125)
      >>> [float(x) for x in prompt_chunks(390.0, 2000.0, 100.0, 8192.0)]   # 7,800 per step: every step
      [7800.0, 1.0]
      >>> round(float(prompt_chunks(3072.0, 1024.0, 2048.0, 12288.0, 8.0)[1]), 4)   # DEP8, 384 a rank
      0.8101
    """
    chunk = jnp.clip((token_budget - n) / ranks, 1.0, isl)
    per_step = n * isl / osl
    f_rank = jnp.minimum(per_step / (ranks * chunk), 1.0)
    f = jnp.where(ranks > 1.0, 1.0 - (1.0 - f_rank) ** ranks, f_rank)
    some = f > 0.0                          # no prompt tokens at all (n I / O = 0): one chunk in no step
    return jnp.where(some, per_step / jnp.where(some, f, 1.0), chunk), f


def chunked_step_s(step: Callable[[Work, Work], jax.Array], decode: Work, n: jax.Array, isl: jax.Array,
                   osl: jax.Array, token_budget: jax.Array, ranks: jax.Array = 1.0) -> jax.Array:
    """The mean step (s) of n decode rows whose prompts come in chunks: f step(decode, p prompt tokens) + (1 - f)
    step(decode, none), (p, f) from :func:`prompt_chunks`; a chunk's p tokens carry p (I + 1) attention pairs,
    p / I prompts' worth (the pairs of whole prompts, I (I + 1) each, in every n I / O tokens).

    Args:
      step: seconds of one step of (decode rows, prompt chunks) Work.
      decode: the n decode rows' Work.  n, isl, osl, token_budget, ranks: as :func:`prompt_chunks`.

    Returns:
      Seconds; ``step`` of the spread step (n I / O prompt tokens in every step) where f = 1.

    Example:
      A step priced linearly in its tokens costs the same spread or in chunks; a convex one (max of compute and
      weight reading) at least as much in chunks (tests/validation/test_prompt_chunks.py).
    """
    p, f = prompt_chunks(n, isl, osl, token_budget, ranks)
    chunk = as_prefill(Work(tokens=p, attn_pairs=p * (isl + 1.0), kv_tokens=p, rows=p / isl))
    none = Work(tokens=0.0 * p, attn_pairs=0.0 * p, kv_tokens=0.0 * p)
    return f * step(decode, chunk) + (1.0 - f) * step(decode, none)
