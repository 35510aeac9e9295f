"""How many requests one replica of a steady-state row runs at once, and the budgets that bound it.

C (:func:`kv_positions`), n (:func:`running`), N_tok (:func:`token_budget`) and b_max (:func:`batch_cap`) of
:mod:`sweepkit.validation.steady` (its module docstring gives the formulas and sources), each written for ONE
row of :class:`~sweepkit.validation.steady_rows.RowInputs` and vmapped over a file's rows.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.layout import layout_kv_capacity_tokens
from sweepkit.costmodel.memory import kv_bytes_per_token, kv_capacity_tokens, resident_bytes, state_positions
from sweepkit.validation.steady_rows import RowInputs


def kv_positions(row: RowInputs) -> jax.Array:
    """C: the KV token positions one replica holds (module docstring)."""
    absent = jax.tree_util.tree_map(jnp.zeros_like, row.model)
    engine = kv_capacity_tokens(row.device, row.tp, row.model, absent, row.weight_bytes, row.kv_bytes)
    free = row.device.hbm_capacity_bytes * row.tp - resident_bytes(row.model, absent, row.weight_bytes)
    framework = row.kv_free_fraction * free / kv_bytes_per_token(row.model, absent, row.kv_bytes)
    cap = jnp.where(row.kv_free_fraction > 0, jnp.maximum(framework, 0.0), engine)
    laid = layout_kv_capacity_tokens(row.layout, row.device, row.tp * row.layout.dp, row.model, absent,
                                     row.weight_bytes, row.kv_bytes)
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
