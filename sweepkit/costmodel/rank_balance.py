"""The busiest attention-DP rank of a step: a prompt chunk runs on the one rank that holds its request.

Under attention data parallelism (dp ranks) each rank runs attention, the dense layers and its scheduler on
its own requests, and every rank meets the others at each MoE layer's all-to-all, so a step lasts as long as
its busiest rank. Decode rows spread evenly over the ranks (n / dp each), but a prompt chunk belongs to one
request and runs on that request's rank. A step with P prompt tokens in R_p chunks of mean size
c = P / R_p puts on its busiest rank

    P_max = max(P / dp, min(P, c, N_r))

prompt tokens: all of them when the step holds less than one chunk on average (the steady state's n / O
prompts per step: the steps that prefill put the whole chunk on one rank), one chunk while there are fewer
chunks than ranks, and an even share once every rank has chunks. No rank holds more than N_r = N_tok / dp,
the tokens one rank schedules per step (``Layout.rank_budget``: TensorRT-LLM's ``--max_num_tokens`` is per
rank, SGLang divides its chunked-prefill size over the DP ranks), so a chunk that the replica-wide budget
makes larger stands for several ranks' chunks. The rank-local work of the step (attention,
dense GEMMs, the attention-TP all-reduces, the host's per-token work and the rank's all-to-all sends) is
then that of dp copies of the busiest rank, i.e. the step's prompt chunks scaled by

    s = dp P_max / P          (1 <= s <= dp; s = 1 at dp = 1 or P = 0)

while the routed experts still process the step's own T tokens (their balance is the layout's expert
imbalance I). In the reference roofline this is the extra work

    dF = (s - 1) (2 P_rep T_p + F_attn(prefill)),     dO = (s - 1) (T_p D w + KV_read(prefill))

(P_rep = P_mm - k P_e; T_p the prompt tokens; :func:`~sweepkit.costmodel.passes.attention_flops`,
:func:`~sweepkit.costmodel.passes.kv_bytes_read`), which scale linearly with the chunks' work.

Example:
  DeepSeek-R1 on 8 H200 with attention DP 8 at 1,024 running requests of 1,024 in / 2,048 out: the mean step
  prefills n / O = 0.5 prompts of 1,024 tokens, P = 512, so P_max = max(64, min(512, 1,024)) = 512 and
  s = 8: the step's prompt work runs on one rank (tests/costmodel/test_rank_balance.py).

References:
  NVIDIA TensorRT-LLM, "ADP Balance Strategy" (docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md,
  github.com/NVIDIA/TensorRT-LLM): the attention time of an iteration is the maximum over the DP ranks;
  round-robin placement of context requests leaves ranks prefilling while others decode (DeepSeek-V3 on
  8 GB200, DP 8 + EP 8: mean balance ratio avg / max tokens 54 %, 25,664 vs 39,552 tokens/s balanced).
  SGLang (github.com/sgl-project/sglang), python/sglang/srt/managers/scheduler.py ``prepare_mlp_sync_batch``:
  every DP rank's token count is gathered each step and a rank without work runs an idle batch;
  python/sglang/srt/layers/dp_attention.py: the gathered MoE buffer is padded to the largest rank's tokens.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.costmodel.arrays import ModelArrays
from sweepkit.costmodel.passes import Work, attention_flops, kv_bytes_read


def busiest_rank_scale(dp: jax.Array, prefill: Work, rank_budget: jax.Array = jnp.inf) -> jax.Array:
    """s = dp P_max / P: how many times the step's prompt work the busiest of ``dp`` ranks' work amounts to,
    counted over all dp ranks (module docstring).

    Args:
      dp: attention data-parallel ranks (1 without attention DP).
      prefill: the step's prompt chunks (T_p = ``tokens``, R_p = ``rows``; R_p = 0, chunks not stated: s = 1).
      rank_budget: N_r, tokens one rank schedules per step (inf: not bounded).

    Returns:
      s, in [1, dp]; exactly 1 where dp = 1 or the step has no prompt tokens.

    Example:
      dp = 8, P = 3,584 tokens in 3.5 chunks of 1,024: P_max = max(448, min(3,584, 1,024)) = 1,024, s =
      8 x 1,024 / 3,584 = 2.286.
    """
    p, rows = prefill.tokens, prefill.rows
    chunk = jnp.where(rows > 0.0, p / jnp.where(rows > 0.0, rows, 1.0), 0.0)      # R_p = 0: P_max = P / dp
    p_max = jnp.maximum(p / dp, jnp.minimum(jnp.minimum(p, chunk), rank_budget))
    return jnp.where(p > 0.0, dp * p_max / jnp.where(p > 0.0, p, 1.0), 1.0)


def layout_rank_budget(layout) -> jax.Array:
    """N_r of an instance's :class:`~sweepkit.costmodel.layout.Layout` (inf without one)."""
    return jnp.inf if layout is None else layout.rank_budget


def rank_tokens(dp: jax.Array, decode: Work, prefill: Work, rank_budget: jax.Array = jnp.inf) -> jax.Array:
    """dp x the busiest rank's tokens: T_d + s T_p (T_d + T_p exactly at s = 1)."""
    return decode.tokens + prefill.tokens * busiest_rank_scale(dp, prefill, rank_budget)


def scaled(work: Work, s: jax.Array) -> Work:
    """``work`` with every field times s (the prompt work of dp copies of the busiest rank)."""
    return Work(**{f.name: getattr(work, f.name) * s for f in dataclasses.fields(work)})


def busiest_rank_extra(dp: jax.Array, model: ModelArrays, prefill: Work, weight_bytes: jax.Array,
                       kv_bytes: jax.Array, rank_budget: jax.Array = jnp.inf) -> tuple[jax.Array, jax.Array]:
    """(dF, dO): the FLOPs and non-weight bytes the busiest rank adds over an even spread, as whole-replica
    work (module docstring); (0, 0) at s = 1.

    Args:
      dp: attention data-parallel ranks.  model: the network.  prefill: the step's prompt chunks.
      weight_bytes: w, bytes per weight (activations are counted at w, as
        :func:`~sweepkit.costmodel.passes.flops_and_bytes` does).  kv_bytes: kv, bytes per KV value.
      rank_budget: N_r (:func:`busiest_rank_scale`).

    Returns:
      (FLOPs, bytes), over all dp ranks.
    """
    s = busiest_rank_scale(dp, prefill, rank_budget)
    dense = model.matmul_params - model.experts_per_token * model.routed_expert_params
    flops = 2.0 * dense * prefill.tokens + attention_flops(prefill, model)
    other = prefill.tokens * model.d_model * weight_bytes + kv_bytes_read(prefill, model, kv_bytes)
    return (s - 1.0) * flops * model.present, (s - 1.0) * other * model.present
