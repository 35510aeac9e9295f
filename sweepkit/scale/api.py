"""Python entry points of scale-out runs: a decode grid or a serving grid through an executor, resumably."""

from __future__ import annotations

from typing import Any, Callable

from sweepkit.scale.coordinator import run_parts
from sweepkit.scale.executors import DEFAULT_RETRIES, make_executor


def run_decode(spec: Any, wh: Any, *, executor: str = "local", address: str | None = None,
               resume: str | None = None, chunk_points: int | None = None, workers: int | None = None,
               retries: int = DEFAULT_RETRIES, on_start: Callable | None = None,
               on_done: Callable | None = None, on_wait: Callable | None = None) -> str:
    """Sweep a decode grid into the warehouse, one part per chunk; returns the committed run id.

    Args:
      spec: a GridSpec (``sweepkit.sweep.load_grid``).  wh: a ``sweepkit.store.Warehouse``.
      executor: ``local`` (this process, chunks sharded over its JAX devices) or ``ray``.
      address: a Ray cluster's ``HOST:PORT`` (None: start a local one with ``workers`` CPUs).
      resume: the id of an interrupted run of the same grid and chunk size: only its missing parts run.
      chunk_points: at least this many points per part (default ``engine.DEFAULT_CHUNK_POINTS``).
      retries: extra tries of a failed task.  on_start, on_done: progress (see ``run_parts``).

    Example:
      >>> run_decode(load_grid("grids/seed.toml"), Warehouse("/tmp/wh"), executor="ray")  # doctest: +SKIP
    """
    from sweepkit.scale.work import DecodeWork
    from sweepkit.sweep import engine

    work = DecodeWork(spec, chunk_points or engine.DEFAULT_CHUNK_POINTS)
    return run_parts(work, wh, make_executor(executor, address, workers, retries), grid_name=spec.name,
                     grid_toml=spec.toml_text, grid_sha256=spec.sha256, resume=resume, on_start=on_start,
                     on_done=on_done, on_wait=on_wait)


def run_serving(grid: Any, wh: Any, *, executor: str = "local", address: str | None = None,
                resume: str | None = None, workers: int | None = None, retries: int = DEFAULT_RETRIES,
                on_start: Callable | None = None, on_done: Callable | None = None,
                on_wait: Callable | None = None) -> str:
    """Simulate a serving grid into the warehouse, one part per (workload, device) search group.

    Args: as :func:`run_decode`; ``grid`` is a ``sweepkit.serving.grid.load_serving_grid`` result.

    Example:
      >>> run_serving(load_serving_grid("grids/serving-seed.toml"), Warehouse("/tmp/wh"))  # doctest: +SKIP
    """
    from sweepkit.scale.work import ServingWork

    return run_parts(ServingWork(grid), wh, make_executor(executor, address, workers, retries),
                     grid_name=grid.name, grid_toml=grid.text, grid_sha256=grid.sha256, resume=resume,
                     on_start=on_start, on_done=on_done, on_wait=on_wait)
