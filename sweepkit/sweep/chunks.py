"""A decode grid as numbered chunks: evaluate any chunk by its index, alone or sharded over local devices.

The streaming engine (:func:`sweepkit.sweep.engine.iter_decode_chunks`) walks a grid front to back. A
scale-out run instead hands chunks to workers by index, so that a chunk's rows depend only on the grid and
its index (never on which worker or device computed it, nor on what ran before): chunk i holds outer points
[i k, min((i+1) k, n_outer)), each with every gamma x acceptance model, exactly as the streaming engine
cuts them (:func:`sweepkit.sweep.engine.chunk_plan`).

On a host with D > 1 JAX devices, D chunks are evaluated in one call: their start digits are stacked into a
[D, n_axes] array laid out one row per device (``jax.sharding.NamedSharding`` over a 1-D mesh) and the chunk
function runs under ``jax.shard_map``, each device evaluating its own chunk against a replicated copy of the
grid's tables. Every chunk runs the same per-point program as on one device, so the rows are the same.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa

from sweepkit.checks import gamma_bucket
from sweepkit.sweep import engine
from sweepkit.sweep.bands import BAND_COLUMNS
from sweepkit.sweep.batches import BatchBuilder
from sweepkit.sweep.grid import acceptance_models


class DecodeChunks:
    """The chunks of one decode grid for one chunk size.

    Args:
      spec: a GridSpec (``axes`` and optionally ``bands``).
      chunk_points: at least this many points per chunk (as for ``iter_decode_chunks``; >= 1).

    Attributes:
      k: outer points per chunk.  n_chunks: number of chunks.  inner: points per outer point.

    Example:
      >>> from sweepkit.sweep.grid import parse_grid
      >>> spec = parse_grid('name = "g"\\n[axes]\\nbatch = [1, 8]', "g.toml")
      >>> c = DecodeChunks(spec, chunk_points=1)
      >>> c.n_chunks, c.rows(0) * c.n_chunks == spec.n_points
      (2, True)

    References:
      Mixed-radix indexing of a Cartesian grid: Knuth, TAOCP vol. 2, sec. 4.1 (mixed-radix number systems).
    """

    def __init__(self, spec: Any, chunk_points: int = engine.DEFAULT_CHUNK_POINTS):
        axes = spec.axes
        self.spec, self.axes = spec, axes
        self.radices = tuple(len(axes[a]) for a in engine.OUTER)
        self.models = acceptance_models(axes)
        self.inner = len(axes["gamma"]) * len(self.models)
        self.n_outer = engine.grid_size(axes) // self.inner
        self.bands = getattr(spec, "bands", None)
        if self.bands is not None:
            chunk_points = max(1, int(chunk_points) // self.bands.draws)
        self.k, self.n_chunks = engine.chunk_plan(self.n_outer, self.inner, chunk_points)
        self.gamma_max = gamma_bucket(int(max(axes["gamma"])))
        self._tables = None
        self._builder = None

    def rows(self, index: int) -> int:
        """Rows (grid points) of chunk ``index``."""
        return (min(self.k, self.n_outer - index * self.k)) * self.inner

    def describe(self, index: int) -> str:
        """The chunk's configuration in words: its outer points and the first one's axis values."""
        start = index * self.k
        first = dict(zip(engine.OUTER, (self.axes[a][d] for a, d in
                                        zip(engine.OUTER, engine.mixed_radix_digits(start, self.radices)))))
        what = ", ".join(f"{a}={v}" for a, v in first.items())
        return f"decode chunk {index} of {self.n_chunks} (outer points {start}..{start + self.k - 1}, from {what})"

    def _prepare(self):
        if self._tables is None:
            self._tables = engine.build_tables(self.axes, bands=self.bands)
            self._builder = BatchBuilder(
                self.axes, self.models, outer_axes=engine.OUTER, string_axes=engine.STRING_AXES,
                float_outputs=engine.FLOAT_OUTPUTS + (BAND_COLUMNS if self.bands else ()),
                null_outputs=() if self.bands else BAND_COLUMNS, columns=engine.COLUMNS, k=self.k)
        return self._tables, self._builder

    def _digits(self, index: int) -> np.ndarray:
        return np.asarray(engine.mixed_radix_digits(index * self.k, self.radices), dtype=np.int32)

    def batches(self, indices: Iterable[int], devices: Sequence[Any] | None = None
                ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """(index, record batch) of each chunk in ``indices``, in that order.

        Args:
          indices: chunk indices in [0, n_chunks).
          devices: JAX devices to shard over (default: ``jax.devices()``); with one, chunks run one by one.
        """
        tables, builder = self._prepare()
        devices = list(jax.devices() if devices is None else devices)
        indices = list(indices)
        for i in indices:
            if not 0 <= i < self.n_chunks:
                raise IndexError(f"chunk {i} is not in [0, {self.n_chunks})")
        if len(devices) <= 1:
            for i in indices:
                digits = self._digits(i)
                call = engine.compiled_chunk(tables, digits, radices=self.radices, k=self.k, gamma_max=self.gamma_max)
                idx, out = jax.device_get(call(tables, digits))
                yield i, builder.build(np.asarray(idx), out, self.rows(i) // self.inner)
            return
        step = len(devices)
        for s in range(0, len(indices), step):
            group = indices[s:s + step]
            padded = group + [group[-1]] * (step - len(group))       # every device gets a chunk (spares dropped)
            idx, out = jax.device_get(sharded_chunks(tables, np.stack([self._digits(i) for i in padded]),
                                                     devices, self.radices, self.k, self.gamma_max))
            for j, i in enumerate(group):
                yield i, builder.build(np.asarray(idx[j]), {n: v[j] for n, v in out.items()},
                                       self.rows(i) // self.inner)


def sharded_chunks(tables: engine.GridTables, digits: np.ndarray, devices: Sequence[Any],
                   radices: tuple[int, ...], k: int, gamma_max: int):
    """Evaluate one chunk per device: ``digits`` [D, n_axes] (row d on device d), tables replicated.

    Returns:
      (outer axis indices [D, len(OUTER), k], dict of outputs with a leading [D] axis).
    """
    mesh = jax.sharding.Mesh(np.asarray(devices), ("chunk",))
    rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("chunk"))
    whole = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    tables = jax.device_put(tables, whole)
    return _sharded(mesh, radices, k, gamma_max)(tables, jax.device_put(jnp.asarray(digits), rows))


_SHARDED: dict = {}


def _sharded(mesh, radices, k, gamma_max):
    """The jitted shard_map of :func:`sweepkit.sweep.engine.evaluate_chunk` for this mesh and grid shape."""
    key = (tuple(mesh.devices.flat), radices, k, gamma_max)
    if key not in _SHARDED:
        P = jax.sharding.PartitionSpec

        def per_device(tables, digits):                       # digits: [1, n_axes] on each device
            idx, out = engine.evaluate_chunk(tables, digits[0], radices=radices, k=k, gamma_max=gamma_max)
            return idx[None], {n: v[None] for n, v in out.items()}

        _SHARDED[key] = jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P("chunk")),
                                              out_specs=P("chunk"), check_vma=False))
    return _SHARDED[key]

