"""Side by side with NVIDIA AIConfigurator: the same model, GPUs, lengths and SLOs through ``sweepkit plan`` and
``aiconfigurator cli default``; both recommendations, both times, and which lands closer to a measured best.

AIConfigurator is not a dependency of sweepkit: install it into a separate environment and name its
executable (the benchmark skips, exit status 0, when there is none)::

    python3 -m venv /tmp/aic && /tmp/aic/bin/pip install aiconfigurator
    python benchmarks/bench_aiconfigurator.py --aic /tmp/aic/bin/aiconfigurator \
        --measurements serving-measurements.csv

Cases (:data:`CASES`):

1. ``qwen3-32b-slo``: Qwen3-32B FP8 on 8 x H200, 4,000 input / 500 output tokens, TTFT 1 s, TPOT 20 ms.
   sweepkit: the plan's screen over the 8-GPU space (FP8 weights and KV, no speculation: AIConfigurator
   searches none by default) and the serving engine's capacity search on its best
   ``--max-simulated`` survivors (fixed-length requests at Poisson arrivals, p99 SLOs); AIConfigurator: its
   default agg-versus-disagg search (closed form, no queue). No published measurement of this setting
   predates TensorRT-LLM 1.0, so the two recommendations are compared, not scored. ``qwen3-235b-a22b-slo``:
   the same for the mixture-of-experts Qwen3-235B-A22B (both search expert and attention-data parallelism).
2. ``llama-3.3-70b-h200`` and ``llama-3.3-70b-h100``: Llama-3.3-70B FP8 on 8 GPUs, 5,000 / 500 tokens, no SLO
   (maximum throughput). sweepkit: the plan's max-throughput mode (best TP per GPU); AIConfigurator: its agg
   search with SLOs too loose to bind (TTFT 10^6 ms, TPOT 10^4 ms; AIConfigurator's bundled
   nvidia/Llama-3.1-70B-Instruct-FP8 config, the same architecture). The measured best is TensorRT-LLM's
   perf-overview max-throughput table of release v0.20 (github.com/NVIDIA/TensorRT-LLM
   docs/source/performance/perf-overview.md at v0.20: one row per TP, output tokens/s of tp GPUs), read from
   ``--measurements`` (rows of that release only); a recommendation scores the measured tokens/s per GPU of
   its TP over the group's best.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

CASES = {
    "qwen3-32b-slo": dict(model="qwen3-32b", aic_model="Qwen/Qwen3-32B-FP8", device="H200", aic_system="h200_sxm",
                          gpus=8, isl=4000, osl=500, ttft_s=1.0, tpot_s=0.020, measured=None),
    "qwen3-235b-a22b-slo": dict(model="qwen3-235b-a22b", aic_model="Qwen/Qwen3-235B-A22B-FP8", device="H200",
                                aic_system="h200_sxm", gpus=8, isl=4000, osl=500, ttft_s=1.0, tpot_s=0.020,
                                measured=None),
    "llama-3.3-70b-h200": dict(model="llama-3.1-70b", aic_model="nvidia/Llama-3.1-70B-Instruct-FP8", device="H200",
                               aic_system="h200_sxm", gpus=8, isl=5000, osl=500, ttft_s=None, tpot_s=None,
                               measured=("meta-llama/Llama-3.3-70B-Instruct", "H200")),
    "llama-3.3-70b-h100": dict(model="llama-3.1-70b", aic_model="nvidia/Llama-3.1-70B-Instruct-FP8", device="H100",
                               aic_system="h100_sxm", gpus=8, isl=5000, osl=500, ttft_s=None, tpot_s=None,
                               measured=("meta-llama/Llama-3.3-70B-Instruct", "H100")),
}
RELEASE = "trtllm-perf-overview-v0.20"
TPS = (1, 2, 4, 8)


def find_aic(path: str | None) -> str | None:
    """The aiconfigurator executable: ``--aic``, ``$AICONFIGURATOR``, or one on PATH; None when absent."""
    for p in (path, os.environ.get("AICONFIGURATOR"), shutil.which("aiconfigurator")):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def measured_group(path: str | None, model: str, device: str, isl: int, osl: int) -> dict[int, float]:
    """TP -> measured output tokens/s per GPU (FP8, pp 1) of the release's max-throughput table."""
    if not path:
        return {}
    out: dict[int, float] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if (r["source"] == RELEASE and r["metric"] == "max_output_throughput" and r["model"] == model
                    and r["device"] == device and r["weight_format"] == "FP8" and r["pp"] in ("", "1")
                    and int(r["input_tokens"]) == isl and int(r["output_tokens"]) == osl):
                out[int(r["tp"])] = float(r["value"]) / float(r["gpus"])
    return out


def run_aic(exe: str, case: dict) -> tuple[dict, float]:
    """AIConfigurator's top configuration (a row of its best_config_topn.csv, the mode's best) and the wall
    time of the command."""
    save = tempfile.mkdtemp(prefix="aic-")
    slo = (case["ttft_s"] * 1e3, case["tpot_s"] * 1e3) if case["ttft_s"] else (1e6, 1e4)
    cmd = [exe, "cli", "default", "--model-path", case["aic_model"], "--total-gpus", str(case["gpus"]),
           "--system", case["aic_system"], "--backend", "trtllm", "--isl", str(case["isl"]), "--osl",
           str(case["osl"]), "--ttft", f"{slo[0]:g}", "--tpot", f"{slo[1]:g}", "--save-dir", save, "--no-color",
           "--serving-mode", "auto" if case["ttft_s"] else "agg"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"aiconfigurator exited {done.returncode}: {tail[0]}")
    best: dict = {}
    for mode in ("agg", "disagg"):
        for f in glob.glob(os.path.join(save, "**", mode, "best_config_topn.csv"), recursive=True):
            with open(f, newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
            if rows and float(rows[0]["tokens/s/gpu"]) > float(best.get("tokens/s/gpu", 0.0)):
                best = dict(rows[0], mode=mode)
    shutil.rmtree(save, ignore_errors=True)
    return best, wall


def aic_text(row: dict) -> str:
    if not row:
        return "no configuration"
    if row["mode"] == "disagg":
        return (f"disagg {row['(p)workers']} x {row['(p)parallel']} prefill + {row['(d)workers']} x "
                f"{row['(d)parallel']} decode (batch {row['(d)bs']}), {float(row['tokens/s/gpu']):,.0f} tok/s/GPU, "
                f"TTFT {float(row['ttft']):,.0f} ms, TPOT {float(row['tpot']):.1f} ms")
    return (f"agg {row['parallel']} (tp{row['tp']} workers, batch {row['bs']}), "
            f"{float(row['tokens/s/gpu']):,.0f} tok/s/GPU, TTFT {float(row['ttft']):,.0f} ms, "
            f"TPOT {float(row['tpot']):.1f} ms")


def run_sweepkit(case: dict, max_simulated: int, budget_s: float) -> tuple[dict, float]:
    """sweepkit's recommendation (see the module docstring) and the wall time of its search."""
    t0 = time.perf_counter()
    if case["ttft_s"] is None:
        from sweepkit.plan.throughput import best_layout, layout_throughputs

        th = layout_throughputs(case["model"], case["device"], TPS, case["isl"], case["osl"], "fp8", "fp8")
        tp = best_layout(th)
        return dict(tp=tp, predicted=th[tp], text=f"tp{tp} (bound {th[tp]:,.0f} tok/s/GPU)"), time.perf_counter() - t0
    from sweepkit.plan.api import plan
    from sweepkit.serving.workloads import fixed_workload

    w = dataclasses.replace(fixed_workload(f"fixed-{case['isl']}-{case['osl']}", case["isl"], case["osl"], 256,
                                           offline=False, source="bench_aiconfigurator"),
                            ttft_slo_s=case["ttft_s"], tpot_slo_s=case["tpot_s"])
    res = plan(case["model"], [w], [case["device"]], gpus=case["gpus"], max_simulated=max_simulated,
               time_budget_s=budget_s, fixed=dict(weight_format=("fp8",), kv_format=("fp8",), spec=("none",)),
               progress=lambda m: print("   ", m, flush=True))
    wall = time.perf_counter() - t0
    if res.verdict:
        return dict(text=res.verdict), wall
    got = res.workloads[w.name]
    r = got["rows"][0]
    experts = (f" dp{r['dp']}" if r["dp"] > 1 else "") + (f" ep{r['ep']}" if r["ep"] > 1 else "")
    lay = (f"{r['prefill_instances']} x tp{r['prefill_tp']} prefill + {r['instances']} x tp{r['tp']}{experts} decode"
           if r["mode"] == "disagg" else f"{r['instances']} x tp{r['tp']}{experts}"
           + (f" pp{r['pp']}" if r["pp"] > 1 else ""))
    text = (f"{r['mode']} {lay}, {r['batching']}, {r['kv']}, {r['spec']}, batch cap {r['batch_cap']}: "
            f"{r['objective']:,.0f} tok/s/GPU simulated (bound {r['bound']:,.0f}), TTFT p99 "
            f"{r['ttft_p99_s'] * 1e3:,.0f} ms, TPOT p99 {r['tpot_p99_s'] * 1e3:.1f} ms; {res.screened:,} screened, "
            f"{got['feasible']:,} feasible, {got['simulated']} simulated (stopped: {got['stopped']})")
    return dict(tp=r["tp"], text=text), wall


def score(measured: dict[int, float], tp) -> str:
    if not measured or tp not in measured:
        return "not measured"
    best = max(measured.values())
    return f"measured {measured[tp]:,.0f} tok/s/GPU = {measured[tp] / best:.1%} of the best (tp{max(measured, key=measured.get)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aic", default=None, help="aiconfigurator executable (default: $AICONFIGURATOR or PATH)")
    ap.add_argument("--measurements", default=None, help="CSV of published measurements (the measured best)")
    ap.add_argument("--case", action="append", choices=sorted(CASES), help="cases to run (default: all)")
    ap.add_argument("--max-simulated", type=int, default=4, help="sweepkit's simulations in the SLO case")
    ap.add_argument("--time-budget", type=float, default=240.0, help="sweepkit's seconds of simulation")
    args = ap.parse_args()
    exe = find_aic(args.aic)
    if exe is None:
        print("skipped: aiconfigurator not found (python3 -m venv /tmp/aic && /tmp/aic/bin/pip install "
              "aiconfigurator; then --aic /tmp/aic/bin/aiconfigurator)")
        return
    from sweepkit.jaxcache import enable_persistent_cache

    enable_persistent_cache()
    for name in args.case or list(CASES):
        case = CASES[name]
        slo = (f"TTFT {case['ttft_s']:g} s, TPOT {case['tpot_s'] * 1e3:g} ms" if case["ttft_s"]
               else "no SLO (max throughput)")
        print(f"{name}: {case['model']} FP8 on {case['gpus']} x {case['device']}, {case['isl']}/{case['osl']} "
              f"tokens, {slo}", flush=True)
        try:
            aic, aic_s = run_aic(exe, case)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"  aiconfigurator: failed ({exc})")
            aic, aic_s = {}, float("nan")
        sk, sk_s = run_sweepkit(case, args.max_simulated, args.time_budget)
        print(f"  aiconfigurator ({aic_s:.1f} s): {aic_text(aic)}")
        print(f"  sweepkit       ({sk_s:.1f} s): {sk['text']}")
        measured = measured_group(args.measurements, *case["measured"], case["isl"], case["osl"]) \
            if case["measured"] else {}
        if measured:
            aic_tp = int(aic["tp"]) if aic.get("mode") == "agg" else None
            a, s = measured.get(aic_tp, 0.0), measured.get(sk.get("tp"), 0.0)
            closer = "both the same" if a == s else ("aiconfigurator" if a > s else "sweepkit")
            print(f"  measured ({RELEASE}): " + ", ".join(f"tp{k} {v:,.0f}" for k, v in sorted(measured.items()))
                  + " tok/s/GPU")
            print(f"  aiconfigurator tp{aic_tp}: {score(measured, aic_tp)}; sweepkit tp{sk.get('tp')}: "
                  f"{score(measured, sk.get('tp'))}; closer to the measured best: {closer}")
            if a and s:
                print(f"  predicted / measured tok/s/GPU of each pick: aiconfigurator "
                      f"{float(aic['tokens/s/gpu']) / a:.2f}, sweepkit (the screen's bound) {sk['predicted'] / s:.2f}")
        elif case["measured"]:
            print("  measured best: skipped (no --measurements file)")
        else:
            print("  measured best: none published before TensorRT-LLM 1.0 for this setting")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
