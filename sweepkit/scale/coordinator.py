"""The coordinator of a scale-out run: plan the parts, skip those already written, execute, commit atomically.

``run_parts(work, wh, executor)`` starts a pending run (``sweepkit.store.parts``) or resumes one
(``resume=RUN_ID``): only the parts not yet written are handed to the executor, and once every part is
there the run is committed exactly as a streamed run (one transaction; readers see all or nothing). A
coordinator killed at any moment leaves nothing visible; its parts wait under ``pending/<id>/`` for
``--resume <id>``.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, Callable

from sweepkit.errors import InputError
from sweepkit.store.parts import Manifest, PendingRun, commit_pending
from sweepkit.store.warehouse import new_run_id


def start_or_resume(work: Any, wh: Any, grid_name: str, grid_sha256: str, resume: str | None) -> PendingRun:
    """The pending run to work on, its lock held: a new one, or ``resume`` checked against this work.

    Raises:
      InputError: no such pending run, another live process holds it, or it was started from another
        grid, kind or cut (chunk size) than this one.
    """
    if resume is not None:
        wh.adopt_location(PendingRun(wh.root, resume).manifest().parquet_uri)
    loc = wh.location()
    uri = loc.uri if loc else ""
    if resume is None:
        run = PendingRun(wh.root, new_run_id(), uri or None)
        run.lock()
        run.create(Manifest(work.kind, grid_name, grid_sha256, work.digest, len(work.tasks),
                            dt.datetime.now(dt.UTC).isoformat(), uri))
        return run
    m = PendingRun(wh.root, resume).manifest()
    run = PendingRun(wh.root, resume, m.parquet_uri or None)
    for field, want, have in (("kind", work.kind, m.kind), ("grid", grid_sha256, m.grid_sha256),
                              ("work digest (chunk size)", work.digest, m.digest),
                              ("Parquet location (--parquet-uri)", uri, m.parquet_uri)):
        if want != have:
            raise InputError(f"--resume: {resume!r} is not allowed; that run's {field} is {have!r}, this one's "
                             f"{want!r} (resume with the same grid file, command and --chunk-points)")
    run.lock()
    return run


def run_parts(work: Any, wh: Any, executor: Any, *, grid_name: str, grid_toml: str, grid_sha256: str,
              resume: str | None = None, on_start: Callable[[str, int, int], None] | None = None,
              on_done: Callable[[Any], None] | None = None, on_wait=None) -> str:
    """Execute a run's missing parts and commit it.

    Args:
      work: a :class:`sweepkit.scale.work.DecodeWork` or ``ServingWork``.
      wh: the warehouse.  executor: ``sweepkit.scale.executors.make_executor(...)``.
      grid_name, grid_toml, grid_sha256: stored in ``runs``.
      resume: a pending run's id, or None for a new run.
      on_start: told (run id, weight already written, total weight) before any task runs.
      on_done: told each task as its part is written.

    Returns:
      The committed run's id.

    Raises:
      TaskFailed: a task failed on every try (the parts written so far stay pending).
      InputError: see :func:`start_or_resume`.

    Example:
      >>> work = DecodeWork(load_grid("grids/seed.toml"), 16)                          # doctest: +SKIP
      >>> run_parts(work, Warehouse(tmp), make_executor("local"), grid_name="seed", ...)  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    run = start_or_resume(work, wh, grid_name, grid_sha256, resume)
    try:
        manifest = run.manifest()
        done = run.done({t.index: t.tables for t in work.tasks}, work.digest)
        todo = [t for t in work.tasks if t.index not in done]
        if on_start is not None:
            on_start(run.run_id, sum(t.weight for t in work.tasks if t.index in done),
                     sum(t.weight for t in work.tasks))
        executor.execute(work, todo, run.parts_root, run.run_id, on_done or (lambda t: None))
        missing = [t.label for t in work.tasks if t.index not in run.done({t.index: t.tables for t in work.tasks},
                                                                          work.digest)]
        if missing:
            raise RuntimeError(f"run {run.run_id}: parts missing after every task returned: {missing[:3]}")
        started = dt.datetime.fromisoformat(manifest.started_at)
        wall_s = time.perf_counter() - t0 if resume is None else \
            (dt.datetime.now(dt.UTC) - started).total_seconds()
        return commit_pending(wh, run, kind=work.kind, grid_name=grid_name, grid_toml=grid_toml,
                              grid_sha256=grid_sha256, files=work.files(run), started=started, wall_s=wall_s,
                              on_wait=on_wait)
    finally:
        run.unlock()
