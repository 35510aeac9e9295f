"""Where tasks run: in this process over its JAX devices (``local``), or as Ray tasks on a cluster (``ray``).

Both take the tasks still to do, in dependency order, and call ``on_done(task)`` as each part is written;
a task that fails is tried again, at most ``retries`` more times, and then reported with its
configuration (:class:`TaskFailed`). Ray is imported only by :class:`RayExecutor`, so a process that never
asks for it never loads it (``pip install 'sweepkit[ray]'``).

Ray retries a task whose worker process died (``max_retries``) as well as one that raised
(``retry_exceptions``); a retried task rewrites its deterministic part, so nothing is lost or duplicated.

References:
  Moritz et al., "Ray: A Distributed Framework for Emerging AI Applications", OSDI 2018
  (https://www.usenix.org/conference/osdi18/presentation/moritz); fault tolerance of tasks:
  https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

from sweepkit.errors import InputError
from sweepkit.scale.work import Task

EXECUTORS = ("local", "ray")
DEFAULT_RETRIES = 2


class TaskFailed(RuntimeError):
    """A task failed on every try: its configuration, the tries and the last error, in one line."""

    def __init__(self, task: Task, tries: int, error: BaseException | str):
        first = str(error).strip().splitlines()
        self.task, self.tries = task, tries
        super().__init__(f"{task.label} (part {task.index}) failed after {tries} "
                         f"{'try' if tries == 1 else 'tries'}: {first[-1] if first else type(error).__name__}")


class LocalExecutor:
    """Run tasks in this process; a decode grid's chunks are sharded over ``jax.devices()``."""

    name = "local"

    def __init__(self, retries: int = DEFAULT_RETRIES):
        self.retries = retries

    def execute(self, work: Any, tasks: Sequence[Task], root: str, run_id: str,
                on_done: Callable[[Task], None]) -> None:
        by_index = {t.index: t for t in tasks}
        remaining = [t.index for t in tasks]
        tries: dict[int, int] = {}

        def done(i: int) -> None:
            remaining.remove(i)
            on_done(by_index[i])

        while remaining:
            try:
                work.run(list(remaining), root, run_id, progress=done)
            except Exception as exc:  # reported with the task's configuration
                failed = by_index[remaining[0]]
                tries[failed.index] = tries.get(failed.index, 0) + 1
                if tries[failed.index] > self.retries:
                    raise TaskFailed(failed, tries[failed.index], exc) from exc


def run_one(work: Any, index: int, root: str, run_id: str, cache_dir: str | None = None) -> tuple[int, float, int]:
    """A Ray task: compute and write part ``index``; returns (index, seconds, worker pid).

    ``cache_dir``: the coordinator's JAX compilation cache (``sweepkit.jaxcache``), so that workers load
    the programs it or another worker compiled instead of compiling them again.
    """
    t0 = time.perf_counter()
    if cache_dir:
        import jax

        from sweepkit.jaxcache import MIN_COMPILE_S

        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_S)
    cached = _WORK.setdefault(work.digest, work)          # a worker keeps a grid's tables and programs
    cached.run([index], root, run_id)
    return index, time.perf_counter() - t0, os.getpid()


_WORK: dict[str, Any] = {}


class RayExecutor:
    """Run each task as a Ray task (one CPU each) on the cluster at ``address``, or on a local one.

    Args:
      address: a running cluster (``HOST:PORT`` of ``ray start --head``, or ``auto``); None starts a local
        cluster for this run with ``workers`` CPUs and stops it afterwards.
      workers: CPUs of the local cluster (default: this machine's).  retries: extra tries per task.
    """

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None, retries: int = DEFAULT_RETRIES):
        self.ray = import_ray()
        self.address, self.workers, self.retries = address, workers, retries
        self.timings: list[tuple[int, float, int]] = []

    def execute(self, work: Any, tasks: Sequence[Task], root: str, run_id: str,
                on_done: Callable[[Task], None]) -> None:
        ray = self.ray
        started = not ray.is_initialized()
        if started:
            if self.address:
                ray.init(address=self.address, log_to_driver=False)
            else:
                ray.init(num_cpus=self.workers or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
        try:
            self._loop(work, tasks, root, run_id, on_done)
        finally:
            if started:
                ray.shutdown()

    def _loop(self, work, tasks, root, run_id, on_done) -> None:
        ray = self.ray
        remote = ray.remote(num_cpus=1, max_retries=self.retries, retry_exceptions=True)(run_one)
        work_ref = ray.put(work)
        import jax

        cache = jax.config.jax_compilation_cache_dir
        todo = {t.index: t for t in tasks}
        written = {t.index for t in work.tasks} - set(todo)
        flying: dict[Any, Task] = {}
        while todo or flying:
            for i in [i for i, t in todo.items() if set(t.after) <= written]:
                flying[remote.remote(work_ref, i, str(root), run_id, cache)] = todo.pop(i)
            if not flying:
                raise RuntimeError(f"tasks {sorted(todo)} wait on parts that are never written")
            ready, _ = ray.wait(list(flying), num_returns=1, timeout=1.0)
            for ref in ready:
                task = flying.pop(ref)
                try:
                    self.timings.append(ray.get(ref))
                except Exception as exc:  # noqa: BLE001 - RayTaskError, WorkerCrashedError, ...
                    for other in flying:
                        ray.cancel(other, force=True)
                    raise TaskFailed(task, self.retries + 1, _cause(exc)) from None
                written.add(task.index)
                on_done(task)


def _cause(exc: BaseException) -> str:
    """The task's own error where Ray wraps one, in one line."""
    cause = getattr(exc, "cause", None)
    return f"{type(cause).__name__}: {cause}" if cause is not None else f"{type(exc).__name__}: {exc}"


def import_ray():
    """``import ray``, or one line saying how to get it.

    Raises:
      InputError: ray is not installed.
    """
    try:
        import ray
    except ImportError:
        raise InputError("--executor: 'ray' is not allowed here; ray is not installed "
                         "(pip install 'sweepkit[ray]'), or use --executor local") from None
    return ray


def make_executor(name: str, address: str | None = None, workers: int | None = None,
                  retries: int = DEFAULT_RETRIES):
    """The executor called ``name`` (``local`` or ``ray``).

    Raises:
      InputError: an unknown name, retries < 0, workers < 1, or an address without ``ray``.
    """
    if name not in EXECUTORS:
        raise InputError(f"--executor: {name!r} is not allowed; expected one of {', '.join(EXECUTORS)}")
    if not isinstance(retries, int) or retries < 0:
        raise InputError(f"--retries: {retries!r} is not allowed; expected an integer >= 0")
    if workers is not None and workers < 1:
        raise InputError(f"--workers: {workers!r} is not allowed; expected an integer >= 1")
    if name == "local":
        if address:
            raise InputError(f"--address: {address!r} is not allowed with --executor local; expected --executor ray")
        return LocalExecutor(retries)
    return RayExecutor(address, workers, retries)
