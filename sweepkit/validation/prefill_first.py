"""A burst under a prefill-first scheduler: waves of prompts prefilled whole before any of them decodes.

SGLang's scheduler runs a new prefill batch whenever one can be formed and decodes only when none can
(``get_next_batch_to_run``: "Run prefill first if possible"; prompt chunks join decode steps only with
``--enable-mixed-chunk``, off by default). vLLM's schedules the running requests' decode tokens first and fills
the rest of the step's token budget with prompt chunks (the mixed steps of :func:`sweepkit.validation.steady.burst`).

With R_r requests of I prompt and O output tokens queued at once on one replica, n_w of them admitted at a
time (the batch cap and the KV positions, C / (I + O); not the token budget) and prefill steps of at most
N_tok prompt tokens, the run is W = R_r / n_w waves, each

    P = max(n_w I / N_tok, 1) prefill steps of n_w I / P prompt tokens (time t_p each), no decode rows
    O - 1 decode steps of n_w rows at a mean context of I + O / 2 (time t_d each; a prefill step samples
    each prompt's first token)

so, for the whole system (replicas x R_r = R requests),

    output tokens/s = R O / (W (P t_p + (O - 1) t_d))
    TPOT            = t_d + (P - s) t_p / (2 (O - 1)),  s = max(I / N_tok, 1)     (O > 1; t_d at O = 1)

The TPOT term is the prefill steps a request waits through after its own first token, (P - s) / 2 on average:
with prompts no longer than a step (s = 1) the prompts finished in the k-th of P steps wait P - k of them;
a longer prompt takes s steps, and the j-th of n_w waits (n_w - j) s. Fixed lengths keep a wave together: its
requests finish in the same step, and the next wave's prefill starts then.

The same waves, one request each (n_w = 1, no wait), are what any scheduler runs when the replica's KV cache
holds fewer than two requests (C < 2 (I + O)): no prompt can be prefilled beside a decoding request, so the
requests run one after another, each prefill before its decode (:func:`serial`).

References:
  SGLang, python/sglang/srt/managers/scheduler.py (get_next_batch_to_run) and server_args.py
  (enable_mixed_chunk = False), github.com/sgl-project/sglang;
  vLLM, vllm/v1/core/sched/scheduler.py (running requests scheduled before waiting ones within the token
  budget), github.com/vllm-project/vllm.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def prefill_steps(n_w: jax.Array, isl: jax.Array, token_budget: jax.Array) -> jax.Array:
    """P = max(n_w I / N_tok, 1): prefill steps of one wave (fractional: a partly filled last step counts
    its share).

    Example:
      1,000 prompts of 128 tokens in steps of 8,192 tokens: 15.625 steps; 10 prompts: 1 step.
    """
    return jnp.maximum(n_w * isl / token_budget, 1.0)


def serial(kv_positions: jax.Array, isl: jax.Array, osl: jax.Array) -> jax.Array:
    """Whether a replica of ``kv_positions`` KV token positions runs requests of I + O positions one at a time
    (C < 2 (I + O): the module docstring's last paragraph).

    Example:
      24,600 positions and requests of 32,000 + 100 tokens: True; 80,000 positions: False.
    """
    return kv_positions < 2.0 * (isl + osl)


def prefill_first_burst(requests: jax.Array, n_w: jax.Array, isl: jax.Array, osl: jax.Array,
                        token_budget: jax.Array, t_prefill_s: jax.Array,
                        t_decode_s: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(output tokens/s, mean TPOT in s) of a burst under a prefill-first scheduler (module docstring).

    Args:
      requests: R_r, requests per replica (the system's output rate scales with the replicas; this is one
        replica's).
      n_w: requests admitted per wave (>= 1).  isl, osl: I and O, tokens per request.
      token_budget: N_tok, prompt tokens per prefill step.
      t_prefill_s: seconds of one prefill step of n_w I / P prompt tokens.
      t_decode_s: seconds of one decode step of n_w rows.

    Returns:
      (output tokens/s of the replica, mean TPOT in seconds).

    Example:
      R_r = n_w = 1,000, I = 128, O = 4, N_tok = 8,192 (P = 15.625), t_p = 0.25 s, t_d = 0.03 s: one wave of
      15.625 x 0.25 + 3 x 0.03 = 3.99625 s, 4,000 / 3.99625 = 1,000.9 tok/s; TPOT = 0.03 + 14.625 x 0.25 / 6
      = 0.639 s (tests/validation/test_prefill_first.py).
    """
    p = prefill_steps(n_w, isl, token_budget)
    own = jnp.maximum(isl / token_budget, 1.0)
    decode_steps = jnp.maximum(osl - 1.0, 0.0)
    waves = requests / n_w
    total_s = waves * (p * t_prefill_s + decode_steps * t_decode_s)
    wait = jnp.maximum(p - own, 0.0) * t_prefill_s / (2.0 * jnp.maximum(decode_steps, 1.0))
    tpot = t_decode_s + jnp.where(decode_steps > 0, wait, 0.0)
    return requests * osl / total_s, tpot
