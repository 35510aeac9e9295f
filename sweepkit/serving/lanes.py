"""Build the cluster engine's inputs for configurations x loads and run them as compiled programs.

Configurations that share a static shape (instances per cluster, prefix cache on or off, draft passes;
colocated and disaggregated levers alike) share one compiled program, its sizes classed so that loads and
workloads of similar sizes share it too (:mod:`sweepkit.serving.sizes`); every (configuration, load) lane is
one call of it (:mod:`sweepkit.serving.programs`: the compiled programs, the lane threads and devices). A
lane's result does not depend on its device. The sessions (lengths, think times, unit-rate start times) are
drawn once per workload and a load rescales the start times (common random numbers across loads and levers).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.errors import InputError
from sweepkit.serving import sizes
from sweepkit.serving.cluster import Cluster
from sweepkit.serving.engine import MISS_SHARE, Requests
from sweepkit.serving.config import Config, policy, resolve
from sweepkit.serving.programs import as_load, collect, submit_lanes
from sweepkit.serving.requests import Sessions, sample_sessions
from sweepkit.serving.workloads import Workload
from sweepkit.xla_options import setting_problem

LOG = logging.getLogger(__name__)

OFFLINE_RATE = 1e6
"""Arrival rate standing for 'every request at once' (offline batch)."""
COARSE_MAX_SESSIONS = 1024
"""Sessions per run in the coarse capacity round."""
WARMUP_FRACTION = 0.1
"""Share of requests (earliest arrivals) dropped from the measured window."""
WORKLOAD_SEED = 1
"""Workload seed of every run."""


@lru_cache(maxsize=64)
def _sessions(w: Workload, n: int) -> Sessions:
    return sample_sessions(w, n, WORKLOAD_SEED)


@lru_cache(maxsize=4096)
def policy_of(cluster: Cluster, cfg: Config, workload: str, gamma_max: int, instances: int):
    """:func:`sweepkit.serving.config.policy` of a configuration, built once per process for each program
    size it is run at (every round of a capacity search runs the same configurations again)."""
    return policy(cluster, cfg, resolve(cluster, cfg.lever), workload, gamma_max, instances)


def requests_for(w: Workload, n_sessions: int, capacity: int | None = None, turns: int | None = None,
                 systems: int | None = None) -> tuple[Requests, Sessions]:
    """Every turn of the first ``n_sessions`` sessions; request k x n_sessions + s is turn k of session s.
    The arrays are padded to ``turns`` x ``capacity`` (>= the workload's turns and n_sessions; defaults: those)
    and the shared prompts to ``systems`` (>= the workload's)."""
    ses = _sessions(w, n_sessions)
    T = w.turns
    pad = (turns or T) * (capacity or n_sessions) - T * n_sessions
    col = lambda a: np.pad(np.asarray(a).T.reshape(-1), (0, pad))  # noqa: E731  [B, T] -> [T x B], padded
    n_sys = max(w.system_prompts, 1)
    sys_tokens = np.zeros(max(systems or n_sys, n_sys), np.int32)
    sys_tokens[:n_sys] = (w.system_prompt_tokens if w.system_prompts > 0 else 0) if ses.system_tokens is None \
        else ses.system_tokens
    think = np.where(np.arange(T)[None, :] == 0, 0.0, ses.think_s)
    segment = ses.new_input + ses.output if ses.segment is None else ses.segment
    req = Requests(prompt_tokens=jnp.asarray(col(ses.prompt), jnp.int32),
                   output_tokens=jnp.asarray(col(ses.output), jnp.int32),
                   segment_tokens=jnp.asarray(col(segment), jnp.int32),
                   think_s=jnp.asarray(col(think), jnp.float64),
                   system_id=jnp.asarray(np.pad(np.tile(ses.system_id, T), (0, pad)), jnp.int32),
                   system_tokens=jnp.asarray(sys_tokens), stride=jnp.asarray(n_sessions, jnp.int32),
                   turns=jnp.asarray(T, jnp.int32))
    return req, ses


def load_for(w: Workload, ses: Sessions, rate: float, n_ses: int, early_stop: bool) -> dict[str, np.ndarray]:
    """The :class:`Load` fields of one lane at ``rate`` (sessions/s or requests/s) with ``n_ses`` sessions."""
    if w.replay is not None:
        return replay_load(w, ses, rate, n_ses, early_stop)
    B = ses.n_sessions
    rate_eff = OFFLINE_RATE if w.offline else rate
    if rate <= 0:
        rate_eff, n_ses = 1.0, 0
    start = ses.start_unit / rate_eff
    arr0 = np.where(np.arange(B) < n_ses, start, np.inf)
    starts = start[:max(n_ses, 1)]
    n_total = n_ses * w.turns
    n_drop = int(WARMUP_FRACTION * n_total)
    limit = MISS_SHARE * (n_total - n_drop) if early_stop else 1e18
    return dict(arrival0_s=arr0, eligible_to_s=starts[-1], ttft_slo_s=w.ttft_slo_s, tpot_slo_s=w.tpot_slo_s,
                miss_limit=limit, warmup_requests=float(n_drop))


def replay_load(w: Workload, ses: Sessions, rate: float, n_ses: int, early_stop: bool) -> dict[str, np.ndarray]:
    """:func:`load_for` of a replayed trace: session starts at ``rate`` (the trace's own times at its
    ``rate_per_s``), later turns nominally at the trace's gaps after them; the window drops the earliest
    :data:`WARMUP_FRACTION` of the requests that arrive (a session's turns past its last are never sent)."""
    rate_eff = OFFLINE_RATE if w.offline else rate
    if rate <= 0:
        rate_eff, n_ses = 1.0, 0
    start = ses.start_unit / rate_eff
    arr0 = np.where(np.arange(ses.n_sessions) < n_ses, start, np.inf)
    starts = start[:max(n_ses, 1)]
    gaps = np.where(np.arange(w.turns)[None, :] == 0, 0.0, ses.think_s[:max(n_ses, 1)])
    nominal = starts[:, None] + np.cumsum(gaps, axis=1)
    nominal = np.sort(nominal[np.isfinite(nominal)]) if n_ses > 0 else np.sort(starts)
    n_total = nominal.size if n_ses > 0 else 0
    n_drop = int(WARMUP_FRACTION * n_total)
    limit = MISS_SHARE * (n_total - n_drop) if early_stop else 1e18
    return dict(arrival0_s=arr0, eligible_to_s=starts[-1], ttft_slo_s=w.ttft_slo_s, tpot_slo_s=w.tpot_slo_s,
                miss_limit=limit, warmup_requests=float(n_drop))


def _padded(load: dict, capacity: int) -> dict:
    """A lane's load with its first-turn arrivals padded with inf (never arriving) to ``capacity`` sessions."""
    arr0 = load["arrival0_s"]
    return dict(load, arrival0_s=np.pad(arr0, (0, capacity - arr0.shape[0]), constant_values=np.inf))


_PER_REQUEST = ("arrival_s", "first_s", "finish_s", "r_out", "r_last_s", "rejected", "xfer_start_s", "xfer_land_s",
                "prefilled", "handed", "xfer_from", "xfer_to")
_PER_SESSION = ("buf_s", "home", "next_turn", "hand_s")
"""Final-state fields of one entry per request and per session (cut to the run's layout by ``Lanes.state``)."""
METRIC_FIELDS = ("arrival_s", "first_s", "finish_s", "rejected", "xfer_start_s", "xfer_land_s", "stats", "hist",
                 "zeros", "stopped", "truncated", "link_j", "little_area", "iters", "misses", "t_s")
"""Final-state fields :func:`sweepkit.serving.metrics.lane_metrics` reads (a lean run keeps only these)."""


def metrics_part(st, n_requests: int):
    """The part of one lane's final state its metrics read (:data:`METRIC_FIELDS`), per-request arrays cut
    to the run's ``n_requests`` and copied, the other fields None: a lane of a program padded past its run
    holds a few arrays of the run's size instead of every array of the program's (rows, queues, the prefix
    cache's [instances, segments] arrays).

    Example:
      >>> S = dataclasses.make_dataclass("S", ["arrival_s", "rows"])     # a State's fields, two of them
      >>> part = metrics_part(S(arrival_s=np.arange(8.0), rows=np.zeros(8)), 3)
      >>> part.arrival_s.tolist(), part.rows
      ([0.0, 1.0, 2.0], None)
    """
    def field(f: str):
        if f not in METRIC_FIELDS:
            return None
        v = getattr(st, f)
        return np.array(np.asarray(v)[:n_requests]) if f in _PER_REQUEST else v
    return dataclasses.replace(st, **{f.name: field(f.name) for f in dataclasses.fields(st)})


@dataclasses.dataclass
class Lanes:
    """Final states of configurations x loads: ``state(c, r)`` is one lane's state as numpy arrays."""

    groups: list
    where: dict
    rates: np.ndarray
    loads: dict
    sessions: Sessions
    n_sessions: int
    instances: list
    turns: int = 1

    def state(self, c: int, r: int, trim: bool = True):
        """Lane (c, r)'s final state; ``trim``: per-request and per-session arrays cut to the run's layout
        (the program's arrays may be padded past it)."""
        g, k = self.where[c]
        st = jax.tree_util.tree_map(lambda a: a[k, r], self.groups[g])
        if not trim:
            return st
        B = self.n_sessions
        cut = {f: getattr(st, f)[:B * self.turns] for f in _PER_REQUEST if getattr(st, f) is not None}
        return dataclasses.replace(st, **cut, **{f: getattr(st, f)[:B] for f in _PER_SESSION
                                                 if getattr(st, f) is not None})


def run_configs(w: Workload, cluster: Cluster, configs: list[Config], rates, early_stop=True,
                cap_sessions: bool = False, cover: list[Config] | None = None, slots: int | None = None,
                sessions: int | None = None, lean: bool = False) -> Lanes:
    """Simulate every configuration at its row of ``rates`` ([C, R]); one compiled program per static shape, one
    call of it per (configuration, load) lane.

    ``cover``: configurations the programs are sized for besides ``configs`` (instances and draft passes), so
    that the successive calls of a capacity search, each with the configurations still open, share one
    program (a larger program gives the same results). ``slots`` and ``sessions``: rows per instance and
    sessions the programs hold at least (a batch cap and a session bucket larger than the call's own), so that
    calls of several batch caps and loads share one program too. Times are float64 whatever the caller's JAX
    mode (a float32 clock loses a step's duration after hours). ``lean``: each lane keeps only what its
    metrics read (:func:`metrics_part`), from the moment it ends: what a capacity search holds."""
    with jax.enable_x64(True):
        return _run_configs(w, cluster, configs, rates, early_stop, cap_sessions, list(cover or []), slots,
                            sessions, lean)


def lane_inputs(w: Workload, cluster: Cluster, cfg: Config, rates, early_stop: bool = False):
    """The engine inputs ``(pol, req, loads, shape)`` of ``cfg`` at each of ``rates`` (per second): one program,
    one :class:`Load` per rate, as :func:`run_configs` builds a group's (call under ``jax.enable_x64(True)``);
    for benchmarks and checks of the compiled program."""
    rates = np.atleast_1d(np.asarray(rates, np.float64))
    n = [w.sessions_at(float(r)) for r in rates]
    B = sizes.bucket_of(max(n))
    res = resolve(cluster, cfg.lever)
    cap, shape, req = _program(w, cluster, B, bool(res.prefix_caching), [res], [cfg.lever])
    pol = policy_of(cluster, cfg, w.name, shape.gamma_max, shape.instances)
    ses = _sessions(w, B)
    return pol, req, [as_load(_padded(load_for(w, ses, float(r), k, early_stop), cap)) for r, k in zip(rates, n)], shape


def _program(w: Workload, cluster: Cluster, B: int, prefix: bool, sized: list[dict], levers: list,
             slots: int | None = None, sessions: int | None = None):
    """One program's session capacity, static shape and requests for session bucket ``B``, sized for every
    resolved lever in ``sized`` (``levers``: the same levers), ``slots`` rows per instance and ``sessions``
    sessions at least."""
    cap = sizes.session_capacity(max(B, int(sessions or 0)), prefix)
    shape = sizes.shape_for(w, cluster, sized, levers, cap, prefix, B, slots)
    req, _ = requests_for(w, B, cap, shape.turns, shape.systems)
    return cap, shape, req


def _run_configs(w, cluster, configs, rates, early_stop, cap_sessions, cover, slots, sessions, lean) -> Lanes:
    if problem := setting_problem():             # a mistyped setting is refused, not silently read
        raise InputError(problem)
    rates = np.asarray(rates, dtype=np.float64).reshape(len(configs), -1)
    stop = np.broadcast_to(np.asarray(early_stop, bool), rates.shape)
    count = (lambda r: min(w.sessions_at(r), COARSE_MAX_SESSIONS)) if cap_sessions else w.sessions_at
    n_max = max([count(float(r)) for r in rates.ravel() if r > 0] or [w.min_sessions])
    B = sizes.bucket_of(n_max)
    ses = _sessions(w, B)
    loads = {(c, k): load_for(w, ses, float(r), count(float(r)) if r > 0 else 0, bool(stop[c, k]))
             for c in range(len(configs)) for k, r in enumerate(rates[c])}
    res = [resolve(cluster, cfg.lever) for cfg in configs]
    static = [(bool(r.prefix_caching),) for r in res]
    groups, where, pending = [], {}, []
    sized = res + [resolve(cluster, cfg.lever) for cfg in cover]     # what every group's program holds
    keep = partial(metrics_part, n_requests=B * w.turns) if lean else None
    for flags in dict.fromkeys(static):             # every group's lanes queued before any is awaited
        idx = [c for c in range(len(configs)) if static[c] == flags]
        cap, shape, req = _program(w, cluster, B, *flags, sized, [cfg.lever for cfg in configs + cover], slots,
                                   sessions)
        pols = [policy_of(cluster, configs[c], w.name, shape.gamma_max, shape.instances) for c in idx]
        padded = [[_padded(loads[c, k], cap) for k in range(rates.shape[1])] for c in idx]
        pending.append((idx, shape, time.perf_counter(), submit_lanes(pols, padded, req, shape, keep)))
    for idx, shape, t0, futures in pending:
        out = collect(futures)
        LOG.debug("%s: %d configs x %d loads, %d instances, %d requests, %d iterations max, %.2f s", w.name,
                  len(idx), rates.shape[1], shape.instances, shape.requests, int(out.iters.max()),
                  time.perf_counter() - t0)
        for k, c in enumerate(idx):
            where[c] = (len(groups), k)
        groups.append(out)
    return Lanes(groups=groups, where=where, rates=rates, loads=loads, sessions=ses, n_sessions=B,
                 instances=[r.total_instances for r in res], turns=w.turns)
