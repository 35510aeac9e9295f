"""How many requests one replica of a steady-state row runs at once, and the budgets that bound it.

C (:func:`kv_positions`), n (:func:`running`), N_tok (:func:`token_budget`) and b_max (:func:`batch_cap`) of
:mod:`sweepkit.validation.steady` (its module docstring gives the formulas and sources), each written for ONE
row of :class:`~sweepkit.validation.steady_rows.RowInputs` and vmapped over a file's rows.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.layout import layout_kv_capacity_tokens, layout_resident_bytes
from sweepkit.costmodel.memory import kv_bytes_per_token, kv_capacity_tokens, resident_bytes, state_positions
from sweepkit.validation.steady_rows import RowInputs


def kv_positions(row: RowInputs) -> jax.Array:
    """C: the KV token positions one replica holds (module docstring).

    Under a layout (``laid``) the replica's tp x dp GPUs hold its weights as the layout places them
    (:func:`sweepkit.costmodel.layout.layout_resident_bytes`: the non-expert weights once per DP rank) and r_kv
    copies of each position's KV; a framework that sizes its pool as f_free of the memory left (TensorRT-LLM,
    per GPU) then holds

        C = f_free (HBM x tp x dp - W_layout) / (r_kv kv_token)

    and any other the engine's rule (:func:`sweepkit.costmodel.layout.layout_kv_capacity_tokens`).

    Example:
      DeepSeek-R1 NVFP4 on 8 B200 as DEP8, FP8 KV (35,136 B a position), f_free = 0.93: 0.93 x (8 x 180 GB -
      420.1 GB) / 35,136 B = 27.0 M positions, 1,099 requests of 3,072 per rank (tests/validation/
      test_kv_free_fraction.py).
    """
    absent = jax.tree_util.tree_map(jnp.zeros_like, row.model)
    engine = kv_capacity_tokens(row.device, row.tp, row.model, absent, row.weight_bytes, row.kv_bytes)
    free = row.device.hbm_capacity_bytes * row.tp - resident_bytes(row.model, absent, row.weight_bytes)
    framework = row.kv_free_fraction * free / kv_bytes_per_token(row.model, absent, row.kv_bytes)
    cap = jnp.where(row.kv_free_fraction > 0, jnp.maximum(framework, 0.0), engine)
    gpus = row.tp * row.layout.dp
    engine_laid = layout_kv_capacity_tokens(row.layout, row.device, gpus, row.model, absent, row.weight_bytes,
                                            row.kv_bytes)
    free_laid = row.device.hbm_capacity_bytes * gpus - layout_resident_bytes(row.layout, row.model, absent,
                                                                             row.weight_bytes)
    framework_laid = row.kv_free_fraction * free_laid / (kv_bytes_per_token(row.model, absent, row.kv_bytes)
                                                         * row.layout.kv_replicas)
    laid = jnp.where(row.kv_free_fraction > 0, jnp.maximum(framework_laid, 0.0), engine_laid)
    return jnp.where(row.laid > 0, laid, cap)


def request_positions(row: RowInputs) -> jax.Array:
    """I + O + s: the capacity positions one request holds at its end, s its linear-attention state
    (:func:`sweepkit.costmodel.memory.state_positions`; 0 without Gated DeltaNet layers)."""
    absent = jax.tree_util.tree_map(jnp.zeros_like, row.model)
    copies = jnp.where(row.laid > 0, row.layout.kv_replicas, 1.0)     # a laid row's C counts r_kv KV copies
    return row.isl + row.osl + state_positions(row.model, absent, row.kv_bytes) / copies


def running(row: RowInputs) -> jax.Array:
    """n = min(b_max, C / (I + O + s), N_tok / (1 + I / O), c / replicas): requests one replica runs at once
    (>= 1)."""
    cap = kv_positions(row)
    n = jnp.minimum(jnp.minimum(batch_cap(row), cap / request_positions(row)),
                    token_budget(row) / (1.0 + row.isl / row.osl))
    node = (row.decode_only > 0) | (row.prefill_only > 0)
    n = jnp.where(node, row.concurrency / row.replicas, jnp.minimum(n, row.concurrency / row.replicas))
    return jnp.maximum(n, 1.0)


def token_budget(row: RowInputs) -> jax.Array:
    """N_tok: the framework's default on the row's device where known (``framework_budget`` > 0), else the
    profile's (``token_budget``), times the row's stated ratio (``budget_scale``)."""
    return jnp.where(row.framework_budget > 0, row.framework_budget, row.token_budget) * row.budget_scale


def batch_cap(row: RowInputs) -> jax.Array:
    """b_max: the framework's default where known (``framework_cap`` > 0), else ``batch_cap``, times
    ``cap_scale``."""
    return jnp.where(row.framework_cap > 0, row.framework_cap, row.batch_cap) * row.cap_scale
