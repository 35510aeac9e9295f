"""Benchmark of ``sweepkit plan``: the screen's rate, a whole plan's time, and the max-throughput mode's
agreement with published TensorRT-LLM max-throughput tables.

    python benchmarks/bench_plan.py                                  # screen rate + the 70B plan
    python benchmarks/bench_plan.py --measurements serving-measurements.csv   # + agreement

1. Screen: configurations per second of the compiled screen over 2^20 configurations of Llama-3.1-70B's
   space on H100 and H200 (16 GPUs), median of ``--repeats`` calls (the compile excluded, reported apart).
2. Plan: Llama-3.1-70B, H100 and H200, 16 GPUs, workloads chat and coding-agent: configurations screened,
   feasible and simulated per workload, how the search stopped, the wall and CPU time of the whole plan and
   the engine programs it built (``SWEEPKIT_JAX_CACHE=<an empty folder>``: a cold compile cache).
3. Agreement (with ``--measurements``, a CSV of the columns source, model, device, weight_format,
   input_tokens, output_tokens, tp, pp, gpus, metric, value): for every (release, model, GPU, format,
   lengths) group of TensorRT-LLM perf-overview releases v0.17 and v0.20 with several TP rows, whether the
   plan's best TP (max-throughput mode, output tokens per GPU) measures within 10% of the group's best.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time

import jax
import numpy as np

from sweepkit.plan.api import plan
from sweepkit.plan.build import demand, points
from sweepkit.plan.screen import screen
from sweepkit.plan.space import concat, enumerate_space, make_space
from sweepkit.plan.throughput import best_layout, layout_throughputs
from sweepkit.serving.workloads import get_workload

MODELS = {"meta-llama/Llama-3.1-70B": "llama-3.1-70b", "meta-llama/Llama-3.3-70B-Instruct": "llama-3.1-70b",
          "meta-llama/Llama-3.1-8B": "llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
          "meta-llama/Llama-3.1-405B": "llama-3.1-405b", "meta-llama/Llama-3.1-405B-Instruct": "llama-3.1-405b",
          "mistralai/Mixtral-8x7B-v0.1": "mixtral-8x7b"}
DEVICES = {"H100 SXM (80GB HBM3)": "H100", "H100": "H100", "H200 (141GB HBM3)": "H200", "H200": "H200",
           "B200": "B200", "A100-SXM4-80GB": "A100"}
FORMATS = {"FP8": ("fp8", "fp8"), "FP16": ("bf16", "bf16"), "FP4": ("fp4", "fp8")}
RELEASES = ("trtllm-perf-overview-v0.17", "trtllm-perf-overview-v0.20")


def bench_screen(repeats: int) -> None:
    from sweepkit.catalogue import get_draft, get_model
    from sweepkit.costmodel.arrays import model_arrays

    table = concat([enumerate_space(make_space("llama-3.1-70b", [d], 16)) for d in ("H100", "H200")])
    pts = points(table, "chat", "llama-3.1-70b")
    n = 1 << 20
    idx = np.arange(n) % len(table["tp"])
    big = jax.tree.map(lambda a: jax.device_put(a[idx]), pts)
    m = get_model("llama-3.1-70b")
    tgt, mtp = model_arrays(m, np.float32), model_arrays(get_draft("mtp", m), np.float32)
    dm = demand(get_workload("chat"))
    t0 = time.perf_counter()
    jax.block_until_ready(screen(big, tgt, mtp, dm))
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(screen(big, tgt, mtp, dm))
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"screen: {n:,} configurations in {med:.3f} s (median of {repeats}; first call with compile "
          f"{compile_s:.1f} s): {n / med:,.0f} configurations/s on {jax.device_count()} CPU device(s)")


def bench_plan(max_simulated: int, budget_s: float) -> None:
    from sweepkit.serving.programs import COMPILE_STATS

    ws = [get_workload("chat"), get_workload("coding-agent")]
    t0, cpu0 = time.perf_counter(), time.process_time()
    res = plan("llama-3.1-70b", ws, ["H100", "H200"], gpus=16, max_simulated=max_simulated,
               time_budget_s=budget_s, progress=lambda m: print("  ", m, flush=True))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    print(f"plan: llama-3.1-70b on 16 x H100 or H200, chat + coding-agent: {res.screened:,} configurations "
          f"screened per workload ({res.screen_s:.2f} s for both), whole plan {wall:.0f} s ({cpu:.0f} CPU-s); "
          f"{COMPILE_STATS['programs']} engine programs built or loaded in {COMPILE_STATS['seconds']:.0f} s")
    for name, w in res.workloads.items():
        best = w["rows"][0] if w["rows"] else {}
        print(f"  {name}: {w['feasible']:,} feasible, {w['simulated']} simulated in {w['search_s']:.0f} s, "
              f"stopped: {w['stopped']}; best {best.get('objective', 0):,.0f} tok/s/GPU "
              f"({best.get('device')} {best.get('mode')} {best.get('instances')}x tp{best.get('tp')} "
              f"pp{best.get('pp')} {best.get('batching')} {best.get('kv')} {best.get('weight_format')}/"
              f"{best.get('kv_format')} {best.get('spec')}), bound {best.get('bound', 0):,.0f}")


def bench_agreement(path: str) -> None:
    groups: dict = {}
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if (r["source"] not in RELEASES or r["metric"] != "max_output_throughput" or r["pp"] not in ("", "1")
                    or r["model"] not in MODELS or r["device"] not in DEVICES):
                continue
            key = (r["source"], MODELS[r["model"]], DEVICES[r["device"]], r["weight_format"],
                   int(r["input_tokens"]), int(r["output_tokens"]))
            tp, per_gpu = int(r["tp"]), float(r["value"]) / float(r["gpus"])
            groups.setdefault(key, {})[tp] = max(per_gpu, groups.get(key, {}).get(tp, 0.0))
    groups = {k: v for k, v in groups.items() if len(v) > 1}
    hits = ties = 0
    t0 = time.perf_counter()
    for (_src, model, dev, fmt, isl, osl), measured in sorted(groups.items()):
        th = layout_throughputs(model, dev, sorted(measured), isl, osl, *FORMATS[fmt])
        tp = best_layout(th)
        ties += sum(v == th[tp] for v in th.values()) > 1
        hits += measured[tp] >= 0.9 * max(measured.values())
    print(f"agreement: the plan's best TP is the measured best or within 10% of it in {hits} of {len(groups)} "
          f"groups ({hits / len(groups):.1%}); {ties} groups had a tie for the best bound (the smaller TP "
          f"wins); {time.perf_counter() - t0:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-simulated", type=int, default=8, help="per workload")
    ap.add_argument("--time-budget", type=float, default=100.0, help="seconds of simulation per workload")
    ap.add_argument("--measurements", default=None, help="CSV of published measurements (agreement check)")
    ap.add_argument("--skip-plan", action="store_true")
    ap.add_argument("--skip-screen", action="store_true")
    args = ap.parse_args()
    from sweepkit.jaxcache import enable_persistent_cache

    enable_persistent_cache()                      # as the CLI does: compiled programs kept on disk
    if not args.skip_screen:
        bench_screen(args.repeats)
    if args.measurements:
        bench_agreement(args.measurements)
    if not args.skip_plan:
        bench_plan(args.max_simulated, args.time_budget)


if __name__ == "__main__":
    main()
