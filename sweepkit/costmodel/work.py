"""The work of one forward pass (or mixed step) as :mod:`sweepkit.costmodel.passes` prices it: token positions,
attention pairs, KV tokens read, prompt pairs and prefix positions, and sequences advanced, per kind of pass
(the formulas: :mod:`sweepkit.costmodel.passes`; notation: docs/notation.md)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Work:
    """Token positions T, attention pairs A and KV tokens read K of one pass (or of a mixed step); of those,
    the pairs A_p of prompt chunks and the cached prefix positions P those chunks attend to (0 for decode
    and verify rows: the attention form an MLA model runs differs, :func:`~sweepkit.costmodel.passes.attention_flops`); R, the sequences
    the pass advances (decode or verify rows, one per prompt chunk), each reading and writing its
    linear-attention state once (0: no state traffic; it matters only on hybrid models)."""

    tokens: jax.Array
    attn_pairs: jax.Array
    kv_tokens: jax.Array
    prefill_pairs: jax.Array = 0.0
    prefix_tokens: jax.Array = 0.0
    rows: jax.Array = 0.0


def decode_work(ctx: jax.Array, batch: jax.Array) -> Work:
    """Decode step: ``batch`` rows, ``ctx`` cached tokens over all rows. T = b, A = 2 (ctx + b), K = ctx + b, R = b."""
    return Work(tokens=batch, attn_pairs=2.0 * (ctx + batch), kv_tokens=ctx + batch, rows=batch)


def verify_work(ctx: jax.Array, batch: jax.Array, positions: jax.Array) -> Work:
    """Verify pass of c = gamma + 1 positions per row: T = b c, A = c (2 ctx + b (c + 1)), K = ctx + b c, R = b."""
    c = positions
    return Work(tokens=batch * c, attn_pairs=c * (2.0 * ctx + batch * (c + 1.0)), kv_tokens=ctx + batch * c,
                rows=batch)


def chunk_work(cached: jax.Array, new: jax.Array) -> Work:
    """Prefill chunk of ``new`` tokens after ``cached`` ones: T = c, A = A_p = c (2 p0 + c + 1), K = p0 + c,
    P = p0 (every pair a prompt pair, the p0 cached positions up-projected on an MLA model), R = 1 (0 if
    c = 0)."""
    pairs = new * (2.0 * cached + new + 1.0)
    one = jnp.where(new > 0, 1.0, 0.0)
    return Work(tokens=new, attn_pairs=pairs, kv_tokens=cached + new, prefill_pairs=pairs,
                prefix_tokens=cached * one, rows=one)


def as_prefill(work: Work) -> Work:
    """``work`` with every pair a prompt pair (A_p = A; P kept): prompt chunks given as T, A, K alone."""
    return dataclasses.replace(work, prefill_pairs=work.attn_pairs)


def combine(*parts: Work) -> Work:
    """A mixed step: the parts' T, A, K, A_p, P and R add (the weights are read once: :func:`~sweepkit.costmodel.passes.flops_and_bytes`)."""
    return Work(tokens=sum(p.tokens for p in parts), attn_pairs=sum(p.attn_pairs for p in parts),
                kv_tokens=sum(p.kv_tokens for p in parts), prefill_pairs=sum(p.prefill_pairs for p in parts),
                prefix_tokens=sum(p.prefix_tokens for p in parts), rows=sum(p.rows for p in parts))
