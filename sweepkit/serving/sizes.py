"""Sizes of the cluster engine's compiled programs: a call's static shape, and the classes that let the loads
and workloads of a grid share few programs.

A program's sessions, turns and shared prompts are capacities: a run's own are data (``Requests.stride``,
``Requests.turns``), its first-turn arrivals padded with never-arriving sessions, its turns and prompts with
segments no chain holds, so a lane gives the same results in any program that holds it. Larger classes mean
fewer programs (each a compile of its own) but more padding in every lane; the classes below
were set by measuring both on the H100 lever grid (docs/performance.md).
"""

from __future__ import annotations

import math

from sweepkit.serving.cluster import Cluster
from sweepkit.serving.engine import Shape
from sweepkit.serving.lever_fields import Settings
from sweepkit.serving.workloads import Workload


def shape_for(w: Workload, cluster: Cluster, res: list[Settings], levers, n_ses: int, prefix: bool,
              bucket: int | None = None, slots: int | None = None) -> Shape:
    """Static sizes of one program of ``n_ses`` sessions for lanes of up to ``bucket`` sessions (default
    ``n_ses``): enough instances and draft passes for every configuration of the call, and the prefix cache's
    arrays only where ``prefix`` (so most levers share one or two programs). Shared prompts are rounded up to
    a class (:data:`SYSTEMS_CLASS`) and turns too (:func:`turns_class`; :func:`prefix_turns_class` with the
    prefix cache, whose chains are as long as the turns), so workloads of similar sizes share a program. The
    phases no configuration of ``res`` can reach (preemption, swap, KV hand-offs) are left out: a program of
    reserved, colocated levers compiles in less time (:func:`families`). Rows per instance are the cluster's
    batch cap, or ``slots`` where larger (a row past a configuration's own cap is never admitted, so programs
    of several caps are one)."""
    turns = prefix_turns_class(w.turns, n_ses) if prefix else turns_class(w.turns, n_ses, bucket or n_ses)
    systems = max(w.system_prompts, 1)
    return Shape(instances=max(r.total_instances for r in res), slots=max(int(cluster.batch_cap), int(slots or 0)), admits=32,
                 requests=n_ses * turns, sessions=n_ses, turns=turns,
                 systems=SYSTEMS_CLASS * math.ceil(systems / SYSTEMS_CLASS),
                 gamma_max=max(lv.gamma for lv in levers), prefix=prefix, **families(res, prefix))


def families(res: list[Settings], prefix: bool) -> dict[str, bool]:
    """Which of the engine's optional phases a program holds, for the resolved levers ``res``: ``pools`` where
    any is disaggregated, ``swap`` where any swaps preempted rows out, ``paged`` where any row may outgrow
    what it held at admission (paged KV, the prefix cache, or pools). A reserved row holds its whole sequence
    from admission, and admission keeps the held units within capacity, so without these no row is ever
    preempted: the phases left out would never run.

    Example:
        >>> from sweepkit.serving.cluster import load_cluster
        >>> from sweepkit.serving.lever_fields import resolve
        >>> from sweepkit.serving.levers import Lever
        >>> families([resolve(load_cluster(), Lever("baseline"))], prefix=False)
        {'paged': False, 'swap': False, 'pools': False}
        >>> families([resolve(load_cluster(), Lever("swap", kv="paged", preemption="swap"))], prefix=False)
        {'paged': True, 'swap': True, 'pools': False}
    """
    pools = any(r.mode == "disagg" for r in res)
    paged = [r for r in res if r.kv == "paged"]
    return dict(paged=bool(paged) or prefix or pools, swap=any(r.preemption == "swap" for r in paged), pools=pools)


def turns_class(turns: int, sessions: int, bucket: int) -> int:
    """Turns a program of ``sessions`` sessions without the prefix cache holds for a lane layout of ``bucket``
    sessions x ``turns`` (request k x bucket + s): a power of 2 that holds the layout, at least
    :data:`SMALL_TURNS` up to :data:`SMALL_SESSIONS` sessions and :data:`MIN_TURNS` past them, and at least
    :data:`MIN_REQUESTS` / sessions. So the five workloads' small and middle runs share one program each
    whatever their turns, and the large runs of a multi-turn workload fit the 4-turn program of the largest
    sessions class (6 turns x 8,192 sessions in 4 x 32,768 requests).

    Example:
        >>> turns_class(3, 4096, 4096), turns_class(6, 4096, 2048), turns_class(1, 512, 512)
        (8, 8, 8)
        >>> turns_class(3, 32768, 16384), turns_class(6, 32768, 8192), turns_class(8, 32768, 32768)
        (4, 4, 8)
    """
    need = -(-int(bucket) * max(int(turns), 1) // max(int(sessions), 1))     # ceil(bucket x turns / sessions)
    floor = SMALL_TURNS if sessions <= SMALL_SESSIONS else MIN_TURNS
    return max(1 << max(need - 1, 0).bit_length(), floor, MIN_REQUESTS // max(int(sessions), 1))


MIN_TURNS = 4
"""Turns a program without the prefix cache holds at least past :data:`SMALL_SESSIONS` sessions: a
single-turn workload's large runs share the multi-turn workloads' programs; their per-request arrays are 4x
as long, which only the late count every 64 iterations passes over whole."""

SMALL_TURNS = 8
"""Turns a program without the prefix cache holds at least up to :data:`SMALL_SESSIONS` sessions: every
workload of up to 8 turns shares its programs there. Chat's and RAG's lanes are padded from 4 turns to 8
for it: one program fewer to build, at a padding the H100 lever grid's warm run does not measurably pay
(docs/performance.md)."""

SMALL_SESSIONS = 4096
"""Sessions up to which programs without the prefix cache hold :data:`SMALL_TURNS` turns."""

MIN_REQUESTS = 4096
"""Requests a program without the prefix cache holds at least (padding requests costs a lane next to nothing:
only the per-session arrays are touched every iteration)."""

PREFIX_TURNS = (3, 8)
"""Turn classes of the prefix cache's programs: a workload's turns are rounded up to the first class that holds
them (then to a power of 2), so 1- to 3-turn workloads (RAG, offline batch, chat) share programs, as do 4- to
8-turn ones (realtime voice, coding agent): a chain of the cache is as long as the program's turns, and the
cache holds one segment per request, so the classes stay narrow where the arrays are large."""

PREFIX_ONE_CLASS_UP_TO = 512
"""Sessions up to which a prefix-cache program holds the last of :data:`PREFIX_TURNS` for every workload: one
program for all five (4,104 segments at 512 sessions x 8 turns): one program fewer to build on the H100 lever
grid, its warm run no measurably longer (docs/performance.md)."""


def prefix_turns_class(turns: int, sessions: int) -> int:
    """Turns a prefix-cache program of ``sessions`` sessions holds for a workload of ``turns``
    (:data:`PREFIX_TURNS`, :data:`PREFIX_ONE_CLASS_UP_TO`).

    Example:
        >>> [prefix_turns_class(t, 4096) for t in (1, 3, 4, 6, 8, 9)]
        [3, 3, 8, 8, 8, 16]
        >>> prefix_turns_class(1, 512), prefix_turns_class(9, 512)
        (8, 16)
    """
    classes = PREFIX_TURNS[-1:] if sessions <= PREFIX_ONE_CLASS_UP_TO else PREFIX_TURNS
    for cls in classes:
        if turns <= cls:
            return cls
    return 1 << (int(turns) - 1).bit_length()


SYSTEMS_CLASS = 8
"""Shared system prompts of a program are padded to a multiple of this (with the prefix cache too: a padded
prompt is a segment no chain holds, so RAG's 4 prompts and offline batch's 1 share a program)."""


def bucket_of(n: int) -> int:
    """Power-of-2 session buckets: a run's request layout (request k x bucket + s), and so its draws."""
    return 64 * 2 ** math.ceil(math.log2(max(n, 64) / 64.0))


CAPACITY_FACTOR = 8
"""Session capacities of the compiled programs grow by this factor (64, 512, 4,096, 32,768, ...): layouts of
several buckets share one program, their arrays padded (the same results; a padded lane costs a little more:
a few per-session arrays are copied every iteration, docs/performance.md)."""

PREFIX_CAPACITY_FACTOR = 8
"""The same for programs with the prefix cache (64, 512, 4,096 sessions), up to :data:`PREFIX_LARGE_FROM`
sessions: a boundary updates the cache's arrays in place, so padding costs a lane little there, and the H100
lever grid builds two prefix programs fewer (every row equal; docs/performance.md)."""

PREFIX_LARGE_FROM = 4096
"""Past this many sessions prefix-cache programs grow by :data:`PREFIX_LARGE_FACTOR` (16,384, 65,536, ...):
their evictions pass over every segment, so an iteration of a lane costs more the more its program pads."""

PREFIX_LARGE_FACTOR = 4


def session_capacity(bucket: int, prefix: bool) -> int:
    """Sessions a program is compiled for: the bucket's capacity class (:data:`CAPACITY_FACTOR`, or
    :data:`PREFIX_CAPACITY_FACTOR` and past :data:`PREFIX_LARGE_FROM` :data:`PREFIX_LARGE_FACTOR` with the
    prefix cache).

    Example:
        >>> [session_capacity(b, True) for b in (64, 256, 1024, 4096, 8192, 16384, 32768)]
        [64, 512, 4096, 4096, 16384, 16384, 65536]
        >>> [session_capacity(b, False) for b in (64, 256, 1024, 4096, 8192)]
        [64, 512, 4096, 4096, 32768]
    """
    factor = max(int(PREFIX_CAPACITY_FACTOR if prefix else CAPACITY_FACTOR), 2)
    cap = 64
    while cap < bucket:
        cap *= min(factor, PREFIX_LARGE_FACTOR) if prefix and cap >= PREFIX_LARGE_FROM else factor
    return cap
