"""Compiled programs of the cluster engine and the threads and devices their lanes run on.

Every (configuration, load) lane is one call of a program compiled for its static shape (built ahead on build
threads as soon as its lanes are submitted: :func:`build_ahead`); the lanes are queued once their program is
ready, so a lane thread never waits for a build while other lanes could run, and spread over one thread per
core or device (:func:`lane_pool`) and over the local JAX devices (:func:`lane_devices`):
a lane runs on the device with the fewest lanes running, with its inputs placed there and the program
compiled for that device. A program is built once per process (from the executable cache when the CLI turned
it on); other threads wait for that one build only.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial

import jax
import numpy as np

from sweepkit.jaxcache import compile_cached
from sweepkit.serving.memory import limit_arenas, release
from sweepkit.xla_options import engine_compile_options
from sweepkit.serving.engine import Load, Requests, Shape, simulate


@partial(jax.jit, static_argnames="shape")
def _run(pol, req, load, shape: Shape):
    return simulate(pol, req, load, shape)


def _key(pol, req, load, shape: Shape, device) -> tuple:
    leaves = tuple((tuple(x.shape), str(x.dtype)) for x in jax.tree_util.tree_leaves((pol, req, load)))
    return (shape, leaves, device.id)


def _claim(key) -> tuple[Future, bool]:
    """The entry of program ``key`` (most recently used now) and whether the caller must build it."""
    with _LOCK:
        entry = _COMPILED.pop(key, None)
        owner = entry is None
        if owner:
            entry = Future()
        _COMPILED[key] = entry                      # most recently used last
        while len(_COMPILED) > MAX_PROGRAMS:        # the oldest first: each holds JIT code mappings of its own
            _COMPILED.pop(next(iter(_COMPILED)))
    return entry, owner


def _build(entry: Future, key, pol, req, load, shape: Shape, device) -> None:
    """Compile (or load from the executable cache) program ``key`` into ``entry``."""
    t0 = time.perf_counter()
    try:
        with jax.enable_x64(True):
            entry.set_result(compile_cached("serving-engine", key, lambda: _run.lower(pol, req, load, shape=shape),
                                            engine_compile_options(device.platform), devices=[device]))
    except BaseException as exc:
        entry.set_exception(exc)
        with _LOCK:
            if _COMPILED.get(key) is entry:
                _COMPILED.pop(key)
        raise
    with _LOCK:
        COMPILE_STATS["programs"] += 1
        COMPILE_STATS["seconds"] += time.perf_counter() - t0
    release()                                       # the compiler's buffers, freed, back to the system


def _compiled(pol, req, load, shape: Shape, device):
    """The one-lane engine compiled for these input shapes on ``device`` (where the inputs are placed), from the
    executable cache when the CLI turned it on. A program is built once (here, or ahead by
    :func:`build_ahead`); other threads wait for that one build only, never for a build of another shape."""
    key = _key(pol, req, load, shape, device)
    entry, owner = _claim(key)
    if owner:
        _build(entry, key, pol, req, load, shape, device)
    return entry.result()


def build_ahead(pol, req, load, shape: Shape) -> list[Future]:
    """Start building the program of these inputs on a compile thread, for every device a lane may take,
    unless it is built or being built; returns the builds' futures (one per device). A lane that needs it
    waits for that build only, and the builds of several shapes start when their lanes are submitted, side by
    side, not one after another on whichever lane thread reaches each first (docs/performance.md)."""
    entries = []
    for device in lane_devices():
        key = _key(pol, req, load, shape, device)
        entry, owner = _claim(key)
        if owner:
            args = jax.device_put((pol, req, load), device)
            _compile_pool().submit(_build, entry, key, *args, shape, device)
        entries.append(entry)
    return entries


def _compile_pool() -> ThreadPoolExecutor:
    """The threads that build programs ahead of their lanes: as many as :func:`lane_pool`'s."""
    with _LOCK:
        if not _BUILDERS:
            limit_arenas()
            _BUILDERS.append(ThreadPoolExecutor(lane_threads(), thread_name_prefix="sweepkit-build"))
        return _BUILDERS[0]


_COMPILED: dict = {}
MAX_PROGRAMS = 12
"""Compiled programs kept in memory (least recently used dropped; one per shape and device): a long sweep over
many session buckets would otherwise exhaust the process's memory mappings (vm.max_map_count) with XLA:CPU's
JIT code."""
COMPILE_STATS = {"programs": 0, "seconds": 0.0}
"""Programs built (or loaded from the executable cache) by this process, and the seconds spent on them."""
LANES_RUN: Counter = Counter()
"""Lanes run by this process, per JAX device id."""
_LOCK = threading.Lock()
_POOL: list = []
_BUILDERS: list = []
_RUNNING: Counter = Counter()
_LEASES = threading.Lock()


def lane_devices() -> list:
    """The devices lanes spread over: every local device of the default backend (several GPUs, or CPU devices
    under ``XLA_FLAGS=--xla_force_host_platform_device_count=N``)."""
    return jax.local_devices()


@contextmanager
def _device_lease():
    """The device with the fewest lanes running now (the lowest id on ties), held for one lane."""
    with _LEASES:
        device = min(lane_devices(), key=lambda d: (_RUNNING[d.id], d.id))
        _RUNNING[device.id] += 1
    try:
        yield device
    finally:
        with _LEASES:
            _RUNNING[device.id] -= 1
            LANES_RUN[device.id] += 1


def lane_pool() -> ThreadPoolExecutor:
    """The threads that run lanes: one per core on the CPU backend (a lane's ``while_loop`` runs on one
    thread and every lane ends as soon as it is done) and at least one per device, shared by every caller so
    cores are not oversubscribed."""
    with _LOCK:
        if not _POOL:
            limit_arenas()                          # before the lane threads take arenas of their own
            _POOL.append(ThreadPoolExecutor(lane_threads(), thread_name_prefix="sweepkit-lane"))
        return _POOL[0]


def lane_threads() -> int:
    """Threads of :func:`lane_pool`: one per CPU core (at most 8) on the CPU backend, else one per device."""
    cores = max(1, min(os.cpu_count() or 1, 8)) if jax.default_backend() == "cpu" else 1
    return max(cores, len(lane_devices()))


def as_load(fields: dict) -> Load:
    """A :class:`Load` of float64 numpy arrays from :func:`sweepkit.serving.lanes.load_for`'s fields."""
    return Load(**{f: np.asarray(v, np.float64) for f, v in fields.items()})


def submit_lanes(pols: list, loads: list[list[dict]], req: Requests, shape: Shape,
                 keep=None) -> list[list[Future]]:
    """Every (configuration, load) lane as its own call of one compiled program, queued on :func:`lane_pool`
    once the program is built or loaded (each lane runs on the least busy of :func:`lane_devices`), so the
    lane threads run other calls' lanes meanwhile; :func:`collect` waits for them. ``keep``: optional
    callable State -> State run on the lane's thread as soon as it ends (the parts of its final state the
    caller reads: the rest of the lane's buffers are freed then, not when every lane of the call is done)."""
    def one(pol, ld):
        with jax.enable_x64(True), _device_lease() as device:
            args = jax.device_put((pol, req, as_load(ld)), device)
            out = _compiled(*args, shape, device)(*args)
            del args                                # the lane's placed inputs
            return jax.tree_util.tree_map(np.asarray, keep(out) if keep is not None else out)
    futures = [[Future() for _ in row] for row in loads]
    if not (pols and loads[0]):
        return futures
    with jax.enable_x64(True):
        entries = build_ahead(pols[0], req, as_load(loads[0][0]), shape)

    def queue() -> None:
        failed = next((e.exception() for e in entries if e.exception() is not None), None)
        if failed is not None:                      # the build's own error, for every lane (no rebuild each)
            for out in (f for outs in futures for f in outs):
                out.set_exception(failed)
            return
        pool = lane_pool()
        for pol, row, outs in zip(pols, loads, futures):
            for ld, out in zip(row, outs):
                try:
                    pool.submit(one, pol, ld).add_done_callback(partial(_settle, out))
                except RuntimeError as exc:          # the pool shut down (interpreter exit): never leave it pending
                    out.set_exception(exc)
    _after(entries, queue)
    return futures


def _after(entries: list[Future], action) -> None:
    """Call ``action()`` once every future of ``entries`` is done (here and now if they all are; else on the
    thread that finishes the last). A future keeps its callbacks for as long as it lives (a program's entry:
    as long as the program), so the callback lets go of ``action`` and all it holds (a call's lanes, their
    inputs and final states) once it has run."""
    left, lock, actions = [len(entries)], threading.Lock(), [action]

    def done(_) -> None:
        with lock:
            left[0] -= 1
            act = actions.pop() if left[0] == 0 else None
        if act is not None:
            act()
    for entry in entries:
        entry.add_done_callback(done)


def _settle(out: Future, source: Future) -> None:
    """Give ``out`` the result or exception of ``source``."""
    exc = source.exception()
    if exc is not None:
        out.set_exception(exc)
    else:
        out.set_result(source.result())


def collect(futures: list[list[Future]]):
    """The final states of :func:`submit_lanes`'s lanes, stacked [C, R, ...]."""
    states = [[f.result() for f in row] for row in futures]
    C, R = len(futures), len(futures[0])
    return jax.tree_util.tree_map(lambda *xs: np.stack(xs).reshape(C, R, *xs[0].shape),
                                  *[s for row in states for s in row])
