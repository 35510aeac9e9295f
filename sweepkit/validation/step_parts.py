"""Where a steady-state step's time goes: the operator classes of :func:`sweepkit.validation.steady._step`.

For a row of :class:`~sweepkit.validation.steady_rows.RowInputs` under an efficiency profile, the step over
decode rows and prompt chunks is (:func:`sweepkit.costmodel.profiled.measured_pass_s`, pp = 1, one slot)

    t = t_gemm + t_moe + t_attn,decode + t_attn,prefill + t_allreduce + t_kernels + t_a2a + t_layout + t_host

with each class as :func:`sweepkit.costmodel.efficiency.step_time_by_class` prices it on the replica's tp x dp
GPUs (the busiest attention-DP rank's prompt chunks, :mod:`sweepkit.costmodel.rank_balance`), t_a2a = L_a2a x
one MoE layer's all-to-alls (:func:`sweepkit.costmodel.moe_comm.moe_all_to_all`), t_layout the layout's extra
FLOPs and weight bytes (the expert imbalance's FLOPs are t_moe's, on the busiest EP rank) and
t_host = t_0 + t_tok T_busiest / dp. :func:`step_parts` returns these terms; their sum is the step
(tests/validation/test_step_parts.py), except under two-batch overlap or asynchronous scheduling, where the
step overlaps them (:func:`sweepkit.costmodel.moe_comm.overlapped`, ``host_overlap``) and the terms are what
is overlapped.

Example:
  DeepSeek-R1 NVFP4 on 8 B200 (DEP8, FP8 KV) at 896 running requests a rank: the parts of the mean step
  (benchmarks/bench_step_breakdown.py --source trtllm-blog-dsr1-best-perf, docs/validation.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.allreduce import tp_allreduces
from sweepkit.costmodel.efficiency import Efficiency, step_time_by_class
from sweepkit.costmodel.layout import effective_imbalance, layout_work
from sweepkit.costmodel.moe_comm import moe_all_to_all
from sweepkit.costmodel.passes import Work, combine
from sweepkit.costmodel.profiled import layout_s
from sweepkit.costmodel.rank_balance import busiest_rank_scale, rank_tokens, scaled
from sweepkit.validation.steady import _layout
from sweepkit.validation.steady_rows import RowInputs

PARTS = ("gemm", "moe", "attn_decode", "attn_prefill", "allreduce", "kernels", "a2a", "layout", "host")
"""The terms of :func:`step_parts`, in the order the module docstring sums them."""


def step_parts(row: RowInputs, eff: Efficiency, decode: Work, prefill: Work) -> dict[str, jax.Array]:
    """Seconds of each term of the row's step over ``decode`` rows and ``prefill`` chunks (module docstring).

    Args:
      row: one row (no leading axis).  eff: its profile's efficiencies.
      decode, prefill: the step's decode rows and prompt chunks (:func:`sweepkit.validation.steady.step_work`).

    Returns:
      {term: seconds} for the terms of :data:`PARTS`, each >= 0.
    """
    lay, net, dev = _layout(row), row.model, row.device      # the layout with its rank budget
    tp, dp = row.tp, lay.dp
    n = tp * dp
    tokens = decode.tokens + prefill.tokens
    busiest = scaled(prefill, busiest_rank_scale(dp, prefill, lay.rank_budget))
    a2a_layers = jnp.where(dp > 1.0, lay.moe_layers, 0.0)
    sends = rank_tokens(dp, decode, prefill, lay.rank_budget)
    a2a_s, _ = moe_all_to_all(lay, dev, net, sends / n, jnp.where(prefill.tokens > 0.0, 1.0, 0.0), tokens / n)
    parts = step_time_by_class(decode, busiest, net, dev, eff, n, row.weight_bytes, row.kv_bytes,
                               row.compute_speedup, allreduces=tp_allreduces(net, a2a_layers), ring=tp,
                               ring_share=1.0 / dp, dp=dp, expert_tokens=tokens,
                               expert_imbalance=effective_imbalance(lay))
    extra = layout_work(lay, net, combine(decode, prefill), row.weight_bytes, row.kv_bytes)
    t_layout = layout_s(lay, net, dev, eff, extra, tokens, row.weight_bytes, row.compute_speedup, n, dp)
    host = eff.step_overhead_s + eff.token_overhead_s * (decode.tokens + busiest.tokens) / dp
    out = dict(gemm=parts["gemm"], moe=parts["moe"], attn_decode=parts["attn_decode"],
               attn_prefill=parts["attn_prefill"], allreduce=parts["comm"], kernels=parts["kernels"],
               a2a=a2a_layers * a2a_s, layout=t_layout, host=host)
    return {k: v * net.present for k, v in out.items()}
