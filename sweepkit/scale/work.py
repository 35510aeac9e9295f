"""Units of work of a scale-out run: decode-grid chunks, serving capacity-search groups, and their parts.

A *task* computes one part: a chunk of the decode grid (:class:`DecodeWork`), or, for a serving grid
(:class:`ServingWork`), one (workload, device) capacity search, one workload's reference-load run, or one
offline workload's saturated run. Its rows depend only on the grid and the task's index, and it writes
them into the run's pending folder (``sweepkit.store.parts``) under a name made of the work digest and
the index, so a retried, resumed or duplicated task rewrites the same file with the same rows.

The digest covers the grid's text (and its config files: ``GridSpec.sha256``), the sweepkit version and
how the work is cut (the chunk size), so a part of one cut is never taken for a part of another.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

import sweepkit
from sweepkit.errors import InputError
from sweepkit.store.parts import PendingRun


@dataclass(frozen=True)
class Task:
    """One unit of work.

    Attributes:
      index: the part's index.  weight: progress units it accounts for (points, or simulations planned).
      tables: the tables its part writes.  after: indices that must be written first.
      label: its configuration in words (for progress and failure reports).
    """

    index: int
    weight: int
    tables: tuple[str, ...]
    label: str
    after: tuple[int, ...] = ()


def digest_of(*fields: object) -> str:
    """12 hex digits of SHA-256 over the fields' reprs and the sweepkit version.

    Example:
      >>> len(digest_of("decode", "abc", 64)), digest_of(1) == digest_of(1), digest_of(1) == digest_of(2)
      (12, True, False)
    """
    text = repr((sweepkit.__version__, *fields))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@lru_cache(maxsize=1)
def contract_schema(table: str) -> pa.Schema:
    """The Arrow schema of a table's contract in schema.sql, less ``run_id`` (parts are cast to it)."""
    import duckdb

    from sweepkit.store import db

    con = duckdb.connect()
    try:
        con.execute(db.schema_sql())
        schema = con.sql(f"select * from contract_{table} limit 0").to_arrow_table().schema
    finally:
        con.close()
    return pa.schema([f for f in schema if f.name != "run_id"])


class DecodeWork:
    """A decode grid cut into chunks (``sweepkit.sweep.chunks``); task i is chunk i.

    Args:
      spec: a GridSpec.  chunk_points: at least this many points per chunk.
    """

    kind = "decode"

    def __init__(self, spec: Any, chunk_points: int):
        from sweepkit.sweep.chunks import DecodeChunks

        self.spec, self.chunk_points = spec, int(chunk_points)
        self.chunks = DecodeChunks(spec, chunk_points)
        self.digest = digest_of("decode", spec.sha256, self.chunks.k, self.chunks.n_chunks)
        self.tasks = [Task(i, self.chunks.rows(i), ("decode",), self.chunks.describe(i))
                      for i in range(self.chunks.n_chunks)]
        self.unit = "points"

    def run(self, indices: list[int], root: str, run_id: str, progress: Callable[[int], None] | None = None
            ) -> list[int]:
        """Compute and write the parts ``indices`` (sharded over this process's JAX devices); returns them."""
        from sweepkit.catalogue import devices_file

        run = PendingRun(root, run_id)
        with devices_file(self.spec.devices_file or None):
            for i, batch in self.chunks.batches(indices):
                run.write("decode", self.digest, i, pa.Table.from_batches([batch]))
                if progress is not None:
                    progress(i)
        return list(indices)

    def files(self, run: PendingRun) -> dict[str, list[Path | str]]:
        return {"decode": [run.path("decode", self.digest, t.index) for t in self.tasks]}


class ServingWork:
    """A serving grid cut into (workload, device) capacity searches, reference runs and offline runs.

    Tasks per online workload: one search per device, then one reference-load run that reads their
    capacities (``_search`` parts) and writes the workload's capacity rows; per offline workload: one
    saturated run. The rows equal :func:`sweepkit.serving.run.run_grid`'s, built by the same functions.
    """

    kind = "serving"

    def __init__(self, grid: Any):
        if getattr(grid, "bands", None) is not None:
            raise InputError(f"{grid.path}: [serving.bands] runs in one process (sweepkit simulate without "
                             f"--executor, --address or --resume); expected a grid without bands here")
        self.grid = grid
        self.digest = digest_of("serving", grid.sha256)
        self.unit = "tasks"
        self.tasks: list[Task] = []
        self._what: list[tuple] = []
        for w in grid.workloads:
            if w.offline:
                self._add(("offline", w.name), ("serving", "capacity"), f"offline run of {w.name}")
                continue
            searches = [self._add(("search", w.name, d), ("serving", "_search"),
                                  f"capacity search of {w.name} on {d}") for d in grid.devices]
            self._add(("reference", w.name), ("serving", "capacity"), f"reference-load run of {w.name}", searches)

    def _add(self, what: tuple, tables: tuple[str, ...], label: str, after: list[int] = ()) -> int:
        i = len(self.tasks)
        self.tasks.append(Task(i, 1, tables, label, tuple(after)))
        self._what.append(what)
        return i

    def run(self, indices: list[int], root: str, run_id: str, progress: Callable[[int], None] | None = None
            ) -> list[int]:
        """Compute and write the parts ``indices`` in order (a reference run after its searches).

        float64 is scoped by the serving entry points (:func:`sweepkit.serving.lanes.run_configs`)."""
        run = PendingRun(root, run_id)
        for i in indices:
            for table, rows in self._compute(i, run).items():
                schema = contract_schema(table) if not table.startswith("_") else None
                run.write(table, self.digest, i, pa.Table.from_pylist(rows, schema=schema))
            if progress is not None:
                progress(i)
        return list(indices)

    def _compute(self, i: int, run: PendingRun) -> dict[str, list[dict]]:
        from sweepkit.serving import run as srun

        grid = self.grid
        what = self._what[i]
        w = next(x for x in grid.workloads if x.name == what[1])
        configs = srun._points(grid)[0]
        if what[0] == "offline":
            serving, capacity = srun._offline_rows(grid, w, srun._fixed_load(grid, w, srun.OFFLINE_RATE))
            return {"serving": serving, "capacity": capacity}
        if what[0] == "search":
            idx, caps, best, rows = srun._search_device(grid, w, what[2])
            at_ref = {c: m for c, _, purpose, m in rows if purpose == "reference"}
            return {"serving": [srun._row(grid, w, configs[c], load, purpose, m) for c, load, purpose, m in rows
                                if purpose != "reference"],
                    "_search": [{"config": c, "capacity": float(cap), "best": json.dumps(b),
                                 "reference": json.dumps(at_ref.get(c))} for c, cap, b in zip(idx, caps, best)]}
        found, at_ref = [], {}
        for j in self.tasks[i].after:
            part = run.read("_search", self.digest, j).to_pylist()
            found.append(([r["config"] for r in part], [r["capacity"] for r in part],
                          [json.loads(r["best"]) for r in part], []))
            at_ref.update({r["config"]: json.loads(r.get("reference") or "null") for r in part})
        if w.name in grid.reference_loads:   # the searches ran it (capacity.search's ``fixed``)
            load = grid.reference_loads[w.name]
            ms = [at_ref.get(c) for c in range(len(configs))]
            ms = ms if all(m is not None for m in ms) else srun._fixed_load(grid, w, load)
        else:
            ref = next(c for c, cfg in enumerate(configs) if cfg.device == grid.reference_device
                       and cfg.lever.name == grid.baseline)
            load = 0.5 * {c: cap for idx, cs, _, _ in found for c, cap in zip(idx, cs)}[ref]
            ms = srun._fixed_load(grid, w, load)
        serving, capacity = srun._online_rows(grid, w, found, load, ms)
        return {"serving": serving, "capacity": capacity}

    def files(self, run: PendingRun) -> dict[str, list[Path | str]]:
        out: dict[str, list[Path | str]] = {"serving": [], "capacity": []}
        for t in self.tasks:
            for table in t.tables:
                if not table.startswith("_"):
                    out[table].append(run.path(table, self.digest, t.index))
        return out
