"""The plan's second stage: the serving engine's capacity search on the screen's survivors, best bound first.

Survivors (feasible in the screen) are sorted by their bound on the objective (output tokens per GPU per
second, or per dollar), ties broken by the lower TTFT bound. Each round simulates the next ``per_round``
candidates with :func:`sweepkit.serving.capacity.search` (one call per batch cap: the cap is the cluster's),
starting each search at ``START_SHARE`` of its bound's load. A candidate that differs from a simulated one
only in batch cap or token budget (:data:`TUNED`) is not simulated: the screen gives both the same bound
wherever the cap does not bind, and the search moves on to a different deployment.

Stop rules (``stop``):

* ``"bound"``: stop when the next candidate's bound is at or below the best simulated objective. The bound
  is an upper bound, so nothing left can beat the frontier's best; exact, but the bound of a configuration
  is often 2-4x its simulated capacity, so it may need many simulations.
* ``"calibrated"`` (default): the same with each bound scaled by the largest simulated / bound ratio seen
  so far times ``SAFETY``: a candidate is simulated only if it could beat the best were it as close to its
  bound as the closest simulated configuration, with 20% to spare.

Either way the search also ends after ``max_simulated`` candidates or ``time_budget_s`` seconds; the result
says which rule ended it.

The calls of a plan's search share compiled programs (:func:`program_cover`): each is sized for the first
``max_simulated`` candidates the search may reach (their instances, draft passes, phases and batch caps, up to
:data:`PAD` x the call's own, rows up to :data:`PADDED_ROWS`) and for the sessions of the largest first
probe, so a cold plan builds one or a few programs per workload instead of one per round, batch cap and
session class (docs/performance.md).
Runs last :data:`HORIZON` session lengths (the reference's four in a serving grid).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from sweepkit.catalogue import get_device
from sweepkit.errors import InputError
from sweepkit.plan.space import lever_fields
from sweepkit.serving.capacity import run_at
from sweepkit.serving.capacity import search as capacity_search
from sweepkit.serving.cluster import Cluster
from sweepkit.serving.config import Config, check
from sweepkit.serving.lanes import OFFLINE_RATE
from sweepkit.serving.levers import parse_lever
from sweepkit.serving.metrics import SLO_ATTAINMENT
from sweepkit.serving.workloads import Workload

START_SHARE = 0.5
"""First probe of a capacity search, as a share of the bound's load."""
OBJECTIVES = ("tokens_per_gpu", "tokens_per_usd")
STOPS = ("calibrated", "bound")
SAFETY = 1.2
"""Margin of the calibrated stop rule over the largest simulated / bound ratio seen."""
TUNED = ("batch_cap", "token_budget")
"""Axes a candidate may differ in from a simulated one and still count as simulated."""
HORIZON = 2.0
"""Arrivals of a plan's runs span this many session lengths (a workload's ``horizon``; the MoE grids' setting)."""


PAD = 2
"""A call's program holds at most PAD x its own rows per instance and instances (a lane of a larger program
costs more per iteration: 2.5x the CPU time at 8x the rows, docs/performance.md)."""
PADDED_ROWS = 128
"""Rows per instance are padded up to this many at most: a lane of chat's 70B plan takes 1.7x the CPU time at
512 rows as at its own 256 (a compile's worth after some 17 lanes), one of coding-agent's 1.2x at 128 as at
64 (after some 110; docs/performance.md)."""


@dataclasses.dataclass(frozen=True)
class Cover:
    """What the programs of a plan's search hold: configurations (instances, draft passes, phases), batch caps
    and sessions (:func:`sweepkit.serving.capacity.search`'s ``cover``, ``slots``, ``sessions``)."""

    rows: list
    configs: list
    caps: tuple
    sessions: int

    def for_call(self, table: dict, rows: list, gpus: int, cap: int) -> tuple[list, int]:
        """The cover configurations and rows per instance of a call of ``rows`` at batch cap ``cap``: those
        of deployments of ``gpus`` GPUs (a price budget buys each device its own count) with at most
        :data:`PAD` x the call's instances, and the largest cover cap up to :data:`PAD` x ``cap`` and
        :data:`PADDED_ROWS` (``cap`` itself where larger)."""
        inst = lambda i: int(table["instances"][i]) + int(table["prefill_instances"][i])  # noqa: E731
        most = PAD * max(inst(i) for i in rows)
        configs = [c for i, c in zip(self.rows, self.configs) if int(table["gpus"][i]) == gpus and inst(i) <= most]
        return configs, max([k for k in self.caps if k <= min(PAD * cap, PADDED_ROWS)] + [int(cap)])


@dataclasses.dataclass(frozen=True)
class Simulated:
    """One simulated configuration: its table row, capacity (load unit per second) and metrics at capacity."""

    row: int
    capacity_per_s: float
    metrics: dict
    bound: float
    objective: float


@dataclasses.dataclass(frozen=True)
class SearchResult:
    simulated: list
    screened: int
    survivors: int
    stopped: str               # "frontier" (nothing left can beat it), "exhausted", "max_simulated", "time"
    seconds: float


def objective_of(tok_s_per_gpu, price_usd_per_gpu_hour, objective: str):
    """Output tokens per GPU per second, or per dollar (tokens per GPU-hour / price)."""
    if objective not in OBJECTIVES:
        raise InputError(f"--objective {objective!r} is not allowed; expected one of {', '.join(OBJECTIVES)}")
    if objective == "tokens_per_gpu":
        return tok_s_per_gpu
    return np.asarray(tok_s_per_gpu) * 3600.0 / np.asarray(price_usd_per_gpu_hour)


def cluster_for(model: str, device: str, gpus: int, batch_cap: int) -> Cluster:
    """The cluster every lever of a plan overrides (its layout and formats are the lever's)."""
    return Cluster(description="plan", source="sweepkit plan", model=model, gpus=gpus, instances=1, tp=gpus,
                   batch_cap=int(batch_cap), prefill_token_budget=8192, step_overhead_s=0.0005,
                   weight_format="bf16", kv_format="bf16", compute_format="bf16", devices=(device,))


def config_of(table: dict, i: int) -> Config:
    """The serving :class:`Config` of row ``i`` (its lever named ``plan-<row>``)."""
    row = {k: v[i] for k, v in table.items()}
    return Config(str(row["device"]), parse_lever(lever_fields(row), f"plan row {i}", name=f"plan-{i}"))


def order(bound: dict, objective: np.ndarray) -> np.ndarray:
    """Feasible rows, best bound first (ties: lower TTFT bound, then lower J/token)."""
    idx = np.nonzero(bound["feasible"])[0]
    keys = (bound["j_per_token"][idx], bound["ttft_lb_s"][idx], -objective[idx])
    return idx[np.lexsort(keys)]


def first_candidates(table: dict, queue: np.ndarray, n: int) -> list[int]:
    """The first ``n`` rows of ``queue`` that differ in more than :data:`TUNED` (the most a search simulates)."""
    keys = [c for c in table if c not in TUNED and c != "gpus"]
    out, seen = [], set()
    for i in queue:
        key = tuple(table[c][i] for c in keys)
        if key not in seen:
            seen.add(key)
            out.append(int(i))
            if len(out) == n:
                break
    return out


def program_cover(table: dict, bound: dict, queue: np.ndarray, w: Workload, n: int) -> Cover:
    """The :class:`Cover` of a search that simulates at most ``n`` candidates of ``queue``: the first ``n``
    (:func:`first_candidates`), their batch caps, and the sessions of the largest first probe among them (a
    probe above it, after a first pass, may still need a larger program).

    Example:
      >>> from sweepkit.plan.space import enumerate_space, make_space
      >>> from sweepkit.plan.build import run_screen
      >>> from sweepkit.serving.workloads import get_workload
      >>> t = enumerate_space(make_space("llama-3.1-8b", ["H100"], 2))
      >>> w = get_workload("chat")
      >>> b = run_screen(t, "llama-3.1-8b", w, None, None)
      >>> q = order(b, b["tok_s_per_gpu"])
      >>> c = program_cover(t, b, q, w, 4)
      >>> len(c.configs), c.caps == tuple(sorted({int(t["batch_cap"][i]) for i in first_candidates(t, q, 4)}))
      (4, True)
    """
    rows = first_candidates(table, queue, max(int(n), 1))
    per_load = np.array([int(table["gpus"][i]) for i in rows]) / (1.0 if w.turns <= 1 else w.turns)
    starts = np.array([bound["req_s_per_gpu"][i] for i in rows]) * per_load * START_SHARE
    sessions = 0 if w.offline else w.sessions_at(float(starts.max()))
    return Cover(rows, [config_of(table, i) for i in rows], tuple(sorted({int(table["batch_cap"][i]) for i in rows})),
                 int(sessions))


def plan_workload(w: Workload) -> Workload:
    """``w`` as a plan simulates it: arrivals over :data:`HORIZON` session lengths (a replayed trace as it is)."""
    return w if w.replay is not None or w.offline else dataclasses.replace(w, horizon=HORIZON)


def run_search(table: dict, bound: dict, model: str, w: Workload, objective: str = "tokens_per_gpu",
               per_round: int = 4, max_simulated: int = 64, time_budget_s: float = 240.0, stop: str = "calibrated",
               progress=None) -> SearchResult:
    """Simulate the survivors, best bound first, until nothing left can beat the best simulated.

    Args:
      table: the space (:func:`sweepkit.plan.space.enumerate_space`).  bound: its screen for ``w``.
      model: the served model.  objective: one of :data:`OBJECTIVES`.
      per_round: candidates simulated together.  max_simulated, time_budget_s: hard limits.
      stop: one of :data:`STOPS` (module docstring).
      progress: callable(message) after each round.

    Returns:
      :class:`SearchResult` with every :class:`Simulated` configuration in simulation order.
    """
    if stop not in STOPS:
        raise InputError(f"--stop {stop!r} is not allowed; expected one of {', '.join(STOPS)}")
    t0 = time.perf_counter()
    price = np.array([get_device(d).price_usd_per_gpu_hour for d in table["device"]])
    obj_bound = objective_of(bound["tok_s_per_gpu"], price, objective)
    queue = order(bound, obj_bound)
    w = plan_workload(w)
    cover = program_cover(table, bound, queue, w, max_simulated) if len(queue) else None
    keys = [c for c in table if c not in TUNED and c != "gpus"]
    def key(i):
        return tuple(table[c][i] for c in keys)
    done, best, stopped, k, seen, ratio = [], -np.inf, "exhausted", 0, set(), 1.0
    while k < len(queue):
        while k < len(queue) and key(queue[k]) in seen:
            k += 1
        if k == len(queue):
            break
        if obj_bound[queue[k]] * ratio <= best:
            stopped = "frontier"
            break
        if len(done) >= max_simulated:
            stopped = "max_simulated"
            break
        if time.perf_counter() - t0 > time_budget_s:
            stopped = "time"
            break
        batch = []
        while k < len(queue) and len(batch) < min(per_round, max_simulated - len(done)):
            i = int(queue[k])
            k += 1
            if key(i) not in seen and obj_bound[i] * ratio > best:
                batch.append(i)
                seen.add(key(i))
        for cap in sorted({int(table["batch_cap"][i]) for i in batch}):
            rows = [i for i in batch if int(table["batch_cap"][i]) == cap]
            done += _simulate(table, bound, rows, model, w, cap, price, obj_bound, objective, cover)
        best = max([s.objective for s in done] + [best])
        if stop == "calibrated":
            ratio = min(1.0, SAFETY * max((s.objective / s.bound for s in done if s.bound > 0), default=1.0))
        if progress:
            progress(f"{w.name}: simulated {len(done)}, best {best:,.1f}, next bound "
                     f"{obj_bound[queue[k]] if k < len(queue) else float('nan'):,.1f}")
    return SearchResult(done, len(table["tp"]), len(queue), stopped, time.perf_counter() - t0)


def _simulate(table, bound, rows, model, w, cap, price, obj_bound, objective, cover: Cover) -> list[Simulated]:
    """Capacity searches of ``rows`` (one batch cap, one device each call), in ``cover``'s program."""
    out = []
    for dev in sorted({str(table["device"][i]) for i in rows}):
        mine = [i for i in rows if table["device"][i] == dev]
        gpus = int(table["gpus"][mine[0]])
        cluster = cluster_for(model, dev, gpus, cap)
        configs = [config_of(table, i) for i in mine]
        for i, c in zip(mine, configs):
            check(cluster, c, f"plan row {i}")
        d = get_device(dev)
        per_load = gpus / (1.0 if w.turns <= 1 else w.turns)    # load unit per (request per GPU)
        start = float(np.median([bound["req_s_per_gpu"][i] for i in mine])) * per_load * START_SHARE
        prices, idle = [d.price_usd_per_gpu_hour] * len(mine), [d.idle_w] * len(mine)
        if w.offline:                       # saturated: every request at once, capacity = its throughput
            best = run_at(w, cluster, configs, prices, idle, OFFLINE_RATE)
            best = [m if m["attainment"] >= SLO_ATTAINMENT else None for m in best]
            caps = [m["goodput_req_s"] if m else 0.0 for m in best]
        else:
            held, slots = cover.for_call(table, mine, gpus, cap)
            caps, best, _ = capacity_search(w, cluster, configs, prices, idle, start=max(start, 1e-3), cover=held,
                                            slots=slots, sessions=cover.sessions)
        for i, cap_s, m in zip(mine, caps, best):
            tok = float(m["output_tok_s_per_gpu"]) if m else 0.0
            out.append(Simulated(i, float(cap_s), m or {}, float(obj_bound[i]),
                                 float(objective_of(tok, price[i], objective))))
    return out
