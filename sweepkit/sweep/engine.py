"""The sweep engine: a Cartesian grid built inside ``jit``, evaluated with ``vmap`` in fixed-size chunks.

Pipeline position: catalogue -> cost model -> **sweep** -> warehouse -> queries -> reports.

The full product of the axes is never materialised on the host. For each chunk the host passes the
mixed-radix digits of the chunk's first point (Python ints, so grids beyond 2^31 points are fine); inside
the compiled function the chunk's points are ``base + arange(C)`` in that radix, decoded axis by axis with
carries (int32 throughout), gathered from the axis vectors, and evaluated by ``vmap(decode_point)``.
Every chunk has the same static shape C (the last one is padded and masked), so a sweep compiles once.
Chunk k+1 is dispatched before chunk k is copied to the host, and the warehouse writer consumes chunks on
its own thread, so compute hides behind Parquet encoding.

Precision: float32 (|error| < 1e-5 relative to the float64 ``sweepkit.evaluate``; tested).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa

from sweepkit.catalogue import get_device, get_draft, get_format, get_model
from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays, device_arrays, model_arrays
from sweepkit.costmodel.decode import (DecodeInputs, finish_gamma, finish_outer, finish_point, hardware_stage,
                                       tokens_per_pass, verify_stage)
from sweepkit.costmodel.steps import Instance
from sweepkit.checks import gamma_bucket
from sweepkit.jaxcache import compile_cached
from sweepkit.sweep.background import started  # noqa: F401  (re-exported: engine.started)
from sweepkit.sweep.bands import BAND_COLUMNS, BANDED, QUANTILES
from sweepkit.sweep.batches import BatchBuilder
from sweepkit.sweep.grid import acceptance_models, n_acceptance_models

AXES = ("device", "model", "draft", "tp", "weight_format", "kv_format", "compute_format",
        "batch", "context", "gamma", "alpha")
"""Grid axes in nesting order (the last varies fastest). The last is the axis of acceptance models: every
alpha x decay, then every named table (``sweepkit.sweep.grid.acceptance_models``); each row carries its
``alpha`` (alpha_1), ``decay`` (null for a table) and ``acceptance`` (iid, decaying or the table's name)."""

ACCEPTANCE_COLUMNS = ("alpha", "decay", "acceptance")

STRING_AXES = ("device", "model", "draft", "weight_format", "kv_format", "compute_format")
FLOAT_OUTPUTS = ("tokens_per_pass", "t_plain_pass_s", "t_draft_s", "t_verify_pass_s", "s_per_token_plain",
                 "s_per_token_spec", "speedup", "energy_per_token_plain_j", "energy_per_token_spec_j",
                 "draft_cost_ratio", "kv_capacity_tokens", "weight_bytes_per_device")
OUTPUT_COLUMNS = (*FLOAT_OUTPUTS, "plain_bound", "verify_bound", "fits_in_memory")
COLUMNS = (*AXES[:-1], "alpha", "decay", "acceptance", *OUTPUT_COLUMNS, *BAND_COLUMNS)
"""The decode view's columns (less run_id), in order; the band columns are null without [bands]."""
DEFAULT_CHUNK_POINTS = 1 << 20


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class GridTables:
    """Per-axis value tables on the device (float32), indexed inside the compiled chunk function."""

    devices: DeviceArrays          # [n_device]
    targets: ModelArrays           # [n_model]
    drafts: ModelArrays            # [n_model, n_draft] (an MTP draft depends on its target)
    speedup: jax.Array             # [n_device, n_compute_format]
    weight_bytes: jax.Array        # [n_weight_format]
    kv_bytes: jax.Array            # [n_kv_format]
    tp: jax.Array
    batch: jax.Array
    context: jax.Array
    gamma: jax.Array
    alphas: jax.Array              # [n_acceptance_models, P]: conditional acceptance per draft position
    band_alpha: jax.Array | None = None            # [N] offsets on every alpha_i (grids with [bands])
    band_device: DeviceArrays | None = None        # [N] factors on the device's fields (None: none banded)


def build_tables(axes: Mapping[str, Sequence[Any]], dtype=jnp.float32, bands: Any = None) -> GridTables:
    """Resolve the axis names through the catalogue into stacked numeric tables (and the bands' draws).

    Built with numpy on the host and transferred in one ``device_put`` (per-leaf ``jnp`` ops would each
    dispatch, and compile on first use, before the first chunk).
    """
    dtype = np.dtype(dtype)
    devices = [get_device(d) for d in axes["device"]]
    targets = [get_model(m) for m in axes["model"]]
    drafts = [[get_draft(d, t) for d in axes["draft"]] for t in targets]
    per_target = [model_arrays(row, dtype, host=True) for row in drafts]
    stacked_drafts = jax.tree_util.tree_map(lambda *xs: np.stack(xs), *per_target)
    speedup = [[dev.speedup(f) for f in axes["compute_format"]] for dev in devices]

    def vec(values):
        return np.asarray(np.asarray(values, dtype=np.float64), dtype=dtype)

    host = GridTables(
        devices=device_arrays(devices, dtype, host=True), targets=model_arrays(targets, dtype, host=True),
        drafts=stacked_drafts, speedup=vec(speedup),
        weight_bytes=vec([get_format(f, "weight_format").bytes_per_value for f in axes["weight_format"]]),
        kv_bytes=vec([get_format(f, "kv_format").bytes_per_value for f in axes["kv_format"]]),
        tp=vec(axes["tp"]), batch=vec(axes["batch"]), context=vec(axes["context"]),
        gamma=vec(axes["gamma"]),
        alphas=vec([m.alphas_for(gamma_bucket(int(max(axes["gamma"])))) for m in acceptance_models(axes)]),
        **({} if bands is None else _band_tables(bands, vec)))
    return jax.device_put(host)


def _band_tables(bands, vec) -> dict:
    """The [N] draws of a grid's bands: alpha offsets and device factors (0 and 1 where not banded)."""
    draws = bands.samples()
    ones = vec(np.ones(bands.draws))
    fields = DeviceArrays.__dataclass_fields__
    device = {f: (vec(np.maximum(draws[f], 0.0)) if f in draws else ones) for f in fields}
    # Without device factors the draws leave the hardware stage alone: vmap then computes it once per point.
    return {"band_alpha": vec(draws.get("alpha", np.zeros(bands.draws))),
            "band_device": DeviceArrays(**device) if set(draws) & set(fields) else None}


def mixed_radix_digits(index: int, radices: Sequence[int]) -> list[int]:
    """Digits of a flat index (Python int, any size) in the grid's mixed radix, most significant first."""
    digits = []
    for r in reversed(radices):
        index, d = divmod(index, r)
        digits.append(d)
    return digits[::-1]


def _decode_chunk(base_digits: jax.Array, radices: tuple[int, ...], chunk: int) -> jax.Array:
    """Axis indices [n_axes, C] of points base + 0..C-1 (carry propagation, last axis fastest)."""
    carry = jnp.arange(chunk, dtype=jnp.int32)
    out = []
    for k in range(len(radices) - 1, -1, -1):
        v = base_digits[k] + carry
        out.append(v % radices[k])
        carry = v // radices[k]
    return jnp.stack(out[::-1])


OUTER = AXES[:-2]
"""Axes the gamma- and alpha-independent stage is computed over (once per outer point)."""


PER_OUTER = ("t_plain_pass_s", "s_per_token_plain", "plain_bound", "energy_per_token_plain_j", "draft_cost_ratio",
             "kv_capacity_tokens", "weight_bytes_per_device")
PER_GAMMA = ("t_draft_s", "t_verify_pass_s", "verify_bound", "fits_in_memory")
PER_POINT = ("tokens_per_pass", "s_per_token_spec", "speedup", "energy_per_token_spec_j")


@partial(jax.jit, static_argnames=("radices", "k", "gamma_max"))
def evaluate_chunk(tables: GridTables, base_digits: jax.Array, *, radices: tuple[int, ...], k: int,
                   gamma_max: int) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Evaluate k consecutive outer points, each against every (gamma, alpha) of the grid.

    The hardware stage runs once per outer point, the verify pass once per (outer point, gamma), and only the
    cheap final combination once per grid point: vmap(outer) o vmap(gamma) o vmap(alpha). Each output keeps
    its natural shape ([k], [k, n_gamma] or [k, n_gamma, n_alpha]: see PER_OUTER, PER_GAMMA, PER_POINT);
    ``sweepkit.sweep.batches`` broadcasts it to one value per grid point.

    Returns:
      (outer axis indices [len(OUTER), k], dict of outputs).
    """
    idx = _decode_chunk(base_digits, radices, k)
    tokens = _tokens(tables.alphas, tables.gamma)                                # [n_gamma, n_models], once
    banded = tables.band_alpha is not None                                      # static: the tables' structure
    if banded:
        drawn_tokens = jax.vmap(lambda off: _tokens(jnp.clip(tables.alphas + off, 0.0, 1.0), tables.gamma))(
            tables.band_alpha)                                                   # [N, n_gamma, n_models]

    def outer(*point_idx):
        p = _point_inputs(tables, *point_idx)
        out = _outer_point(p, tables.gamma, tokens, gamma_max)
        if banded:
            def draw(factors, tokens_d):
                device = p.inst.device if factors is None else jax.tree_util.tree_map(jnp.multiply, p.inst.device,
                                                                                       factors)
                drawn = replace(p, inst=replace(p.inst, device=device))
                return {m: v for m, v in _outer_point(drawn, tables.gamma, tokens_d, gamma_max).items()
                        if m in BANDED}
            out.update(_band_summary(jax.vmap(draw)(tables.band_device, drawn_tokens)))
        return out

    return idx, jax.vmap(outer)(*idx)


def _point_inputs(tables: GridTables, dv, md, dr, tp, wf, kf, cf, b, s) -> DecodeInputs:
    """The outer point of these axis indices: its :class:`Instance` (pp = 1, gamma chosen per gamma later)."""
    pick = lambda tree, *i: jax.tree_util.tree_map(lambda x: x[i], tree)  # noqa: E731
    zero, one = jnp.zeros((), tables.gamma.dtype), jnp.ones((), tables.gamma.dtype)
    inst = Instance(
        device=pick(tables.devices, dv), target=pick(tables.targets, md), draft=pick(tables.drafts, md, dr),
        tp=tables.tp[tp], pp=one, microbatches=one, weight_bytes=tables.weight_bytes[wf],
        kv_bytes=tables.kv_bytes[kf], compute_speedup=tables.speedup[dv, cf], gamma=zero, pipelined=False)
    return DecodeInputs(inst=inst, batch=tables.batch[b], context=tables.context[s], alphas=tables.alphas[0])


def _tokens(alphas: jax.Array, gamma: jax.Array) -> jax.Array:
    """E[tokens per pass], [n_gamma, n_models], of every acceptance model [n_models, P] at every gamma."""
    return jax.vmap(lambda g: jax.vmap(lambda a: tokens_per_pass(a, g))(alphas))(gamma)


def _outer_point(p: DecodeInputs, gammas: jax.Array, tokens: jax.Array, gamma_max: int) -> dict[str, jax.Array]:
    """Every output of one outer point: the hardware stage once, the verify pass per gamma, E per model."""
    hw = hardware_stage(p, gamma_max)
    per_outer = finish_outer(p, hw)

    def per_gamma(g, tokens_g):
        gamma_part = finish_gamma(p, hw, verify_stage(p, g), g)
        point = jax.vmap(lambda t: finish_point(p, per_outer, gamma_part, t))(tokens_g)
        return {k: v for k, v in gamma_part.items() if not k.startswith("_")}, point

    gamma_out, point_out = jax.vmap(per_gamma)(gammas, tokens)
    return {**per_outer, **gamma_out, **point_out}


def _band_summary(drawn: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """p10 / p50 / p90 over the draws (axis 0) of each banded output, and the share of draws with speed-up > 1."""
    q = jnp.asarray([v for _, v in QUANTILES], drawn["speedup"].dtype)
    out = {}
    for m in BANDED:
        values = jnp.quantile(jnp.moveaxis(drawn[m], 0, -1), q, axis=-1)      # [3, ...]: sorted on the minor axis
        out.update({f"{m}_{name}": values[i] for i, (name, _) in enumerate(QUANTILES)})
    out["share_spec_faster"] = jnp.mean((drawn["speedup"] > 1.0).astype(q.dtype), axis=0)
    return out


CPU_COMPILER_OPTIONS = {"xla_backend_optimization_level": 2}
"""On the CPU backend, LLVM optimisation level 2 instead of XLA's default: a shorter compile, and a chunk that
still computes faster than Parquet encoding takes its rows (docs/performance.md). Other backends use XLA's
defaults."""

_COMPILED: dict = {}


def compiled_chunk(tables: GridTables, base_digits: jax.Array, *, radices: tuple[int, ...], k: int,
                   gamma_max: int):
    """The compiled :func:`evaluate_chunk` for this grid shape: compiled once per shape and process, and
    with the CLI's caches on (``sweepkit.jaxcache``) loaded ready-made from disk by later processes."""
    shapes = tuple((x.shape, str(x.dtype)) for x in jax.tree_util.tree_leaves(tables))
    key = (radices, k, gamma_max, str(jax.tree_util.tree_structure(tables)), shapes, jax.default_backend())
    if key not in _COMPILED:
        options = CPU_COMPILER_OPTIONS if jax.default_backend() == "cpu" else None
        lower = lambda: evaluate_chunk.lower(tables, base_digits, radices=radices, k=k,  # noqa: E731
                                             gamma_max=gamma_max)
        _COMPILED[key] = compile_cached("sweep-chunk", key, lower, options)
    return _COMPILED[key]


def grid_size(axes: Mapping[str, Sequence[Any]]) -> int:
    """Number of points: the product of the outer and gamma axes' lengths times the acceptance models."""
    n = n_acceptance_models(axes)
    for a in AXES[:-1]:
        n *= len(axes[a])
    return n


def chunk_plan(n_outer: int, inner: int, chunk_points: int, multiple_of: int = 1) -> tuple[int, int]:
    """(outer points per chunk, number of chunks): chunks of at least ``chunk_points`` points (whole outer
    points, at most 2 x chunk_points), as equal as the grid allows, aiming at a number of chunks that is a
    multiple of ``multiple_of`` (so that that many writer threads get equal shares; exact when ``n_outer`` is
    a multiple of the target count, as for grids/large.toml: 12 chunks of 6,600 outer points)."""
    k_min = max(1, -(-int(chunk_points) // inner))
    if k_min >= n_outer:
        return n_outer, 1
    n_chunks = n_outer // k_min
    if n_chunks >= multiple_of > 1:
        n_chunks -= n_chunks % multiple_of
    k = -(-n_outer // n_chunks)
    return k, -(-n_outer // k)


def iter_decode_chunks(spec: Any, chunk_points: int = DEFAULT_CHUNK_POINTS,
                       chunks_multiple_of: int = 1) -> Iterator[pa.RecordBatch]:
    """Evaluate a grid spec chunk by chunk, yielding Arrow record batches (one row per grid point).

    Args:
      spec: a GridSpec (anything with ``axes``: axis name -> sequence of values, for every name in AXES;
        and optionally ``bands``, a :class:`sweepkit.sweep.bands.Bands`, for the band columns).
      chunk_points: at least this many points per compiled call (>= 1; whole outer points, each carrying
        every gamma x acceptance model; see :func:`chunk_plan`), divided by the bands' draws. The grid
        compiles once for this shape; the last chunk is padded.
      chunks_multiple_of: make the number of chunks a multiple of this where the grid allows (the CLI
        passes its number of Parquet writer threads).

    Returns:
      An iterator of ``pa.RecordBatch`` with the decode view's columns except ``run_id``, in grid order.
    """
    axes = spec.axes
    radices = tuple(len(axes[a]) for a in OUTER)
    models = acceptance_models(axes)
    inner = len(axes["gamma"]) * len(models)
    n_outer = grid_size(axes) // inner
    bands = getattr(spec, "bands", None)
    if bands is not None:
        chunk_points = max(1, int(chunk_points) // bands.draws)       # the draws' working set stays bounded
    k, _ = chunk_plan(n_outer, inner, chunk_points, chunks_multiple_of)
    tables = build_tables(axes, bands=bands)
    gamma_max = gamma_bucket(int(max(axes["gamma"])))
    builder = BatchBuilder(axes, models, outer_axes=OUTER, string_axes=STRING_AXES,
                           float_outputs=FLOAT_OUTPUTS + (BAND_COLUMNS if bands else ()),
                           null_outputs=() if bands else BAND_COLUMNS, columns=COLUMNS, k=k)

    def dispatch(start):
        digits = np.asarray(mixed_radix_digits(start, radices), dtype=np.int32)    # (jnp.asarray would compile a conversion)
        return compiled_chunk(tables, digits, radices=radices, k=k, gamma_max=gamma_max)(tables, digits)

    def to_batch(pending) -> pa.RecordBatch:
        n, (idx, out) = pending
        idx, out = jax.device_get((idx, out))
        return builder.build(np.asarray(idx), out, n)

    pending = None
    for start in range(0, n_outer, k):
        current = (min(k, n_outer - start), dispatch(start))   # async: computes while the last one is copied
        if pending is not None:
            yield to_batch(pending)
        pending = current
    if pending is not None:
        yield to_batch(pending)
