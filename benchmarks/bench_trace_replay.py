"""Benchmark one replay of a trace workload: load time, one simulated lane's wall and CPU time, and the
simulated prefix hit rate beside the trace's own reuse (closed forms of :class:`sweepkit.serving.traces.Reuse`)
and beside an LRU cache of the configuration's KV (:func:`sweepkit.serving.trace_lru.lru_reuse`: one
instance's, and all instances' together, the bound for session-routed instances that split the sessions).

    .venv/bin/python benchmarks/bench_trace_replay.py [--workloads grids/traces/workloads.toml]
        [--workload mooncake-conversation] [--lever prefix-cache-session] [--speed 0.5]

``--speed`` is the replay speed: 1 replays the trace's own times (a load of its ``rate_per_s``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config, kv_tokens, resolve
from sweepkit.serving.lanes import run_configs
from sweepkit.serving.levers import load_levers
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.trace_lru import lru_reuse
from sweepkit.serving.workloads import load_workloads


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="grids/traces/workloads.toml")
    ap.add_argument("--workload", default="mooncake-conversation")
    ap.add_argument("--levers", default="grids/traces/levers.toml")
    ap.add_argument("--lever", default="prefix-cache-session")
    ap.add_argument("--device", default="H100")
    ap.add_argument("--speed", type=float, default=0.5)
    a = ap.parse_args()
    t0, _c0 = time.perf_counter(), time.process_time()
    w = load_workloads(a.workloads)[a.workload]
    t_load, rp = time.perf_counter() - t0, w.replay
    cluster = load_cluster()
    cfg = Config(a.device, load_levers(a.levers)[a.lever])
    t1, c1 = time.perf_counter(), time.process_time()
    lanes = run_configs(w, cluster, [cfg], [[rp.rate_per_s * a.speed]], early_stop=False)
    wall, cpu = time.perf_counter() - t1, time.process_time() - c1
    m = lane_metrics(lanes, 0, 0, w, cluster.gpus, 0.0, 1.0)
    res = resolve(cluster, cfg.lever)
    kv, n_inst = kv_tokens(cluster, cfg, res), res.total_instances
    lru = {k: lru_reuse(rp.path, k * kv, rp.block_tokens) for k in (1, n_inst)}
    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"{os.cpu_count()} CPUs")
    print(f"trace: {rp.requests:,} requests, {rp.sessions:,} sessions x <= {w.turns} turns, "
          f"{rp.rate_per_s:.4f} sessions/s; read in {t_load:.2f} s")
    print(f"reuse (closed form): blocks {rp.reuse.block_share:.4f}, tokens {rp.reuse.trace_share:.4f}, "
          f"chained {rp.reuse.chained_share:.4f}; LRU of {kv:,.0f} KV tokens (one instance) "
          f"{lru[1][0] / lru[1][1]:.4f}, of {n_inst} x that {lru[n_inst][0] / lru[n_inst][1]:.4f}")
    print(f"{a.lever} on {a.device} at {a.speed}x: simulated in {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"(compile included), {m['iterations']:,} iterations; hit rate {m['prefix_hit_rate']:.4f}, "
          f"completed {m['completed']:,}, attainment {m['attainment']:.3f}, TTFT p50/p99 "
          f"{m['ttft_p50_s']:.2f}/{m['ttft_p99_s']:.2f} s, KV peak {m['kv_peak_fraction']:.2f}")


if __name__ == "__main__":
    main()
