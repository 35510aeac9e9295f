"""A serving grid (:mod:`sweepkit.serving.grid`) -> capacity searches and reference-load runs -> pyarrow tables
``serving`` and ``capacity``.

Per workload: every (device, lever) configuration's capacity is searched together
(:mod:`sweepkit.serving.capacity`); the reference load is half the reference device's baseline capacity and
every configuration is then simulated at it (same offered load everywhere). Offline workloads run once, every
request at t = 0; their capacity metrics and latencies come from that saturated run. Searches and runs of all
workloads share a thread pool (:func:`run_workloads`: one compiled call per core at a time on the CPU backend).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from sweepkit.serving.bound import bracket_sessions, search_bracket
from sweepkit.serving.capacity import MIN_FACTOR, run_at, search
from sweepkit.serving.config import Config, grid_points
from sweepkit.serving.draws import run_draws
from sweepkit.serving.grid import ServingGrid
from sweepkit.serving.lanes import OFFLINE_RATE
from sweepkit.serving.programs import lane_threads
from sweepkit.serving.memory import limit_arenas
from sweepkit.serving.metrics import capacity_row
from sweepkit.serving.workloads import Workload

METRIC_COLUMNS = [
    "attainment", "requests", "window_requests", "completed", "goodput_req_s", "goodput_req_s_per_gpu",
    "output_tok_s", "output_tok_s_per_gpu", "usd_per_mtok", "energy_j", "energy_per_token_j", "horizon_s",
    "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "itl_p50_s",
    "itl_p90_s", "itl_p99_s", "steps", "mean_running_batch", "tokens_per_pass", "kv_mean_fraction",
    "kv_peak_fraction", "preemptions", "recompute_tokens", "swap_out_bytes", "swap_in_bytes", "prefix_hit_rate",
    "kv_transfer_wait_s", "kv_transfer_s", "rejected", "busy_fraction", "stopped_early",
]


def _row(grid: ServingGrid, w: Workload, cfg: Config, load: float, purpose: str, m: dict) -> dict:
    row = dict(device=cfg.device, lever=cfg.lever.name, workload=w.name, draft=cfg.lever.draft,
               gamma=cfg.lever.gamma, alpha=cfg.lever.alpha, load_per_s=float(load), load_unit=w.load_unit,
               purpose=purpose)
    row.update({("slo_attainment" if k == "attainment" else k):
                (bool(m[k]) if k == "stopped_early" else
                 int(m[k]) if k in ("requests", "window_requests", "completed", "rejected") else float(m[k]))
                for k in METRIC_COLUMNS})
    return row


def _points(grid: ServingGrid):
    """Every (device, lever) configuration with its price (USD/GPU-hour) and idle power (W per GPU)."""
    return grid_points(grid)


def _search_device(grid: ServingGrid, w: Workload, dev: str, progress=None):
    """Capacity search of one device's configurations: (config indices, capacities, metrics, search rows, and
    with a pinned reference load its "reference" rows: :func:`sweepkit.serving.capacity.search`'s ``fixed``).

    One search per device: a device's configurations share a compiled shape whose session count follows that
    device's capacities (a fast device's high loads would otherwise inflate every lane). Every rule gets each
    configuration's ceiling (:func:`sweepkit.serving.bound.search_bracket`: probes above it fail unsimulated);
    "bracket" also starts at its estimate.
    """
    configs, prices, idle = _points(grid)
    idx = [i for i, c in enumerate(configs) if c.device == dev]
    ref = grid.reference_loads.get(w.name)
    start = 2.0 * ref if ref else 1.0
    anchor = (Config(grid.reference_device, next(lv for lv in grid.levers if lv.name == grid.baseline)), start)
    near, ceiling = search_bracket(w, grid.cluster, [configs[i] for i in idx], bracket_sessions(w),
                                   anchor if ref else None)
    if grid.search == "bracket":       # start near each bound, anchored on the reference baseline's start
        start = near
    caps, best, rows = search(w, grid.cluster, [configs[i] for i in idx], [prices[i] for i in idx],
                              [idle[i] for i in idx], start=start, rates_per_call=grid.rates_per_call,
                              tolerance=grid.tolerance, progress=progress, fixed=ref, rule=grid.search,
                              ceiling=ceiling, floor=(2.0 * ref if ref else 1.0) / MIN_FACTOR)
    return idx, caps, best, [(idx[c], load, purpose, m) for c, load, purpose, m in rows]


def _fixed_load(grid: ServingGrid, w: Workload, load: float, progress=None):
    """Every configuration at one load (the reference load, or every request at once offline)."""
    configs, prices, idle = _points(grid)
    out = run_at(w, grid.cluster, configs, prices, idle, load)
    if progress:
        progress(len(configs))
    return out


def default_workers() -> int:
    """Tasks in flight (a capacity search of one workload x device, or a fixed-load run): twice the lane
    threads (:func:`sweepkit.serving.programs.lane_threads`: one per CPU core, or per accelerator), at least
    4. A task only queues lanes on the lane pool and waits; with several in flight, the lanes of one keep
    the cores busy while another waits for its slowest lane."""
    return max(4, 2 * lane_threads())


def run_workloads(grid: ServingGrid, progress=None, workers: int | None = None) -> dict[str, tuple]:
    """Per workload: (serving rows, capacity rows, busy seconds summed over its tasks, simulated loads).

    Tasks (one capacity search per workload x device, one fixed-load run per workload) go to a pool of
    ``workers`` threads (default :func:`default_workers`; JAX releases the GIL while a compiled call runs):
    every search first, then the reference runs, each submitted as soon as its load is known. A task's busy
    seconds are its wall time, waits for the shared lane threads included.
    """
    busy, sims, lock = {w.name: 0.0 for w in grid.workloads}, {w.name: 0 for w in grid.workloads}, threading.Lock()
    limit_arenas()                                   # before the task threads start (sweepkit.serving.memory)

    def timed(name, fn, grid, w, arg):
        def count(n):
            with lock:
                sims[name] += n
            if progress:
                progress(n)
        t0 = time.perf_counter()
        out = fn(grid, w, arg, count)
        with lock:
            busy[name] += time.perf_counter() - t0
        return out

    pool = ThreadPoolExecutor(workers or default_workers(), thread_name_prefix="sweepkit-sim")
    try:
        jobs, refs = {}, {}
        for w in grid.workloads:
            jobs[w.name] = ({"": pool.submit(timed, w.name, _fixed_load, grid, w, OFFLINE_RATE)}
                            if w.offline else
                            {d: pool.submit(timed, w.name, _search_device, grid, w, d) for d in grid.devices})
            if not w.offline and w.name in grid.reference_loads:     # run by the searches (``fixed``)
                refs[w.name] = grid.reference_loads[w.name], None
        found = {}
        for w in grid.workloads:
            if w.offline:
                continue
            found[w.name] = [f.result() for f in jobs[w.name].values()]
            if w.name not in refs:
                configs = _points(grid)[0]
                ref_c = next(i for i, c in enumerate(configs) if c.device == grid.reference_device
                             and c.lever.name == grid.baseline)
                caps = {i: cap for idx, cs, _, _ in found[w.name] for i, cap in zip(idx, cs)}
                load = 0.5 * caps[ref_c]
                refs[w.name] = load, pool.submit(timed, w.name, _fixed_load, grid, w, load)
        out = {}
        for w in grid.workloads:
            if w.offline:
                out[w.name] = _offline_rows(grid, w, jobs[w.name][""].result())
            else:
                load, f = refs[w.name]
                out[w.name] = _online_rows(grid, w, found[w.name], load, f.result() if f else None)
        return {k: (s, c, busy[k], sims[k]) for k, (s, c) in out.items()}
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _offline_rows(grid: ServingGrid, w: Workload, ms: list[dict]):
    serving, capacity = [], []  # one saturated run per configuration: capacity metrics and latencies
    for cfg, m in zip(_points(grid)[0], ms):
        serving.append(_row(grid, w, cfg, OFFLINE_RATE, "saturated", m))
        capacity.append(capacity_row(w, cfg, float("nan"), OFFLINE_RATE, m, m, saturated=True))
    return serving, capacity


def _online_rows(grid: ServingGrid, w: Workload, found: list, ref_load: float, at_ref: list[dict] | None):
    """Serving and capacity rows of an online workload from its searches (``found``) and its reference-load
    runs (``at_ref`` per configuration; None: the searches' "reference" rows)."""
    configs = _points(grid)[0]
    caps, best, serving, capacity, ref_rows = [None] * len(configs), [None] * len(configs), [], [], {}
    for idx, cs, bs, rows in found:
        for k, i in enumerate(idx):
            caps[i], best[i] = cs[k], bs[k]
        serving += [_row(grid, w, configs[c], load, purpose, m) for c, load, purpose, m in rows
                    if purpose != "reference"]
        ref_rows.update({c: m for c, _, purpose, m in rows if purpose == "reference"})
    at_ref = at_ref if at_ref is not None else [ref_rows[c] for c in range(len(configs))]
    for c, cfg in enumerate(configs):
        serving.append(_row(grid, w, cfg, ref_load, "reference", at_ref[c]))
        capacity.append(capacity_row(w, cfg, caps[c], ref_load, best[c], at_ref[c], saturated=False))
    return serving, capacity


def run_workload(grid: ServingGrid, w: Workload, progress=None, workers: int | None = None):
    """Serving rows and capacity rows of one workload (lists of dicts)."""
    one = dataclasses.replace(grid, workloads=(w,))
    serving, capacity, _, _ = run_workloads(one, progress, workers)[w.name]
    return serving, capacity


def run_grid(grid: ServingGrid, progress=None, workers: int | None = None) -> dict[str, pa.Table]:
    """Run every workload of the grid (:func:`run_workloads`); returns pyarrow tables ``serving`` and ``capacity``,
    and ``serving_draws`` when the grid has ``[serving.bands]`` (:func:`sweepkit.serving.draws.run_draws`)."""
    serving, capacity = result_rows(run_workloads(grid, progress, workers))
    out = {"serving": pa.Table.from_pylist(serving), "capacity": pa.Table.from_pylist(capacity)}
    if grid.bands is not None:
        draws = run_draws(grid, serving, capacity, progress, workers or default_workers())
        out["serving_draws"] = pa.Table.from_pylist(draws)
    return out


def result_rows(results: dict[str, tuple]) -> tuple[list[dict], list[dict]]:
    """:func:`run_workloads`' serving rows and capacity rows of every workload, in the grid's order."""
    return ([r for s, _, _, _ in results.values() for r in s], [r for _, c, _, _ in results.values() for r in c])
