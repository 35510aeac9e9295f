"""Build sweepkit's packaged measured corpus (sweepkit/validation/data/measured.csv) from measurement CSVs.

    python benchmarks/data/build_measured.py SERVING_MEASUREMENTS.CSV [MORE.CSV ...] [--out sweepkit/validation/data/measured.csv]

Each input has the columns source, url, framework, device, gpus, tp, pp, ep, dp, model (Hugging Face id),
weight_format, kv_format, input_tokens, output_tokens, concurrency, request_rate, scenario, metric, value, unit,
percentile, lever, pair_id, notes, and optionally draft and gamma (speculative decoding: ``mtp`` and its
draft length, copied as they are): public measurements as their sources state them, with free-text cells
("H100 SXM (80GB HBM3)", "tok/s (total across 4 GPUs)", "inf (all prompts at once)", "~20000 (+-15%)").
Each row becomes one row of sweepkit's measurement format (docs/validation.md):

- excluded: TensorRT-LLM releases 1.0 and later, MLPerf Inference v5.x and InferenceX rows (kept out of
  what sweepkit ships and fits on), and rows measuring input-token (prefill) throughput alone, which the
  format has no metric for, except a prefill pool's node test that states its tokens per GPU (scenario
  "prefill-only", concurrency "16384 tokens per device"): it is kept as ``total_throughput`` without an output
  length and with the prompts per GPU per step as ``concurrency``, after every other row; the script prints how
  many of each are left out;
- devices to catalogue names (first word, "Ascend 910B NPU" -> Ascend-910B); models stay Hugging Face ids
  (sweepkit.validation.aliases maps them when a row is read); formats to bf16 / fp8 / fp4 / int8 (FP16 as
  bf16: the same bytes and tensor-core rate; MXFP4 and NVFP4 as fp4); compute_format = the weight format
  where the device has it natively (FP8 from Hopper and Ada, FP4 from Blackwell), else bf16;
- units: "tok/s (total across N GPUs)" -> tok/s with gpus = N; per-GPU and per-rank -> tok/s/gpu; per node of
  8 GPUs -> tok/s/gpu, value / 8 (marked "(computed)" in notes); "s/request" -> s; speed-ups -> x;
- cells with a number and a remark ("1408 (batch to fill KV cache)", "~20000 (+-15%)") keep the number, the
  remark goes to notes; cells without one ("ShareGPT", "multi-node") are left empty, the text goes to notes;
  request_rate "inf (all prompts at once)" -> inf; "N requests" in the scenario -> requests; GPUStack's
  performance-lab random-dataset cases run 100 (32,000 in), 500 (4,000 and 2,000 in) and 1,000 (128 in)
  prompts (:data:`GPUSTACK_PROMPTS`, "Successful requests" in each page's benchmark output); TensorRT-LLM
  perf-overview v0.17 and v0.20 max-throughput rows ran a dataset of $num_requests requests per (ISL, OSL)
  (:data:`TRTLLM_BENCH_REQUESTS`, the release's own table), so each gets that burst size as requests;
- split: TensorRT-LLM perf-overview v0.17 rows train, v0.20 rows test (a later release on newer devices);
  rows measured on a pre-release staging container (framework naming a ``-staging`` image, such as
  rocm/vllm-dev:vllm-ds3-staging-0217) check: kept as independent checks that no fit uses; every other row
  by a hash of (source, model, device, gpus): train when the first byte of its SHA-256 is even, so every
  metric, load, format and length of one model on one system falls on the same side, and so do both sides of
  a lever pair;
- several inputs: each input's rows (its prefill node tests last) follow the previous input's, so the rows of
  the first input keep their row numbers; benchmarks/data/measurements-blackwell-moe.csv is the second input
  of the shipped corpus, benchmarks/data/measurements-amd.csv the third;
- an input whose header is sweepkit's own measurement format (the columns of measured.csv) is copied as it is,
  its split included, less the excluded releases, after its rows pass the format's checks:
  benchmarks/data/measurements-mlperf-v4.csv (MLPerf Inference v4.0 / v4.1 Llama-2-70B results, split test)
  is the fourth input.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import re
import sys
from collections import Counter
from pathlib import Path

from sweepkit.validation.measurements import OPTIONAL, REQUIRED, parse_measurements

EXCLUDE = (re.compile(r"tensorrt-llm v?1\.\d", re.I), re.compile(r"mlperf.*v5", re.I), re.compile(r"inferencex", re.I))
"""Framework or source text that keeps a row out (TensorRT-LLM >= 1.0, MLPerf v5.x, InferenceX)."""
DEVICES = (("GH200", "GH200"), ("GB200", "GB200"), ("GB300", "GB300"), ("H100", "H100"), ("H200", "H200"),
           ("H800", "H800"), ("A100", "A100"), ("B200", "B200"), ("B300", "B300"), ("L40S", "L40S"),
           ("MI355X", "MI355X"), ("MI325X", "MI325X"), ("MI300X", "MI300X"), ("Ascend 910B", "Ascend-910B"),
           ("RTX 3090", "RTX-3090"))
"""Device-name prefix -> catalogue-style name (first match)."""
FP8_NATIVE = {"H100", "H200", "H800", "GH200", "L40S", "B200", "B300", "GB200", "GB300", "MI300X", "MI325X",
              "MI355X"}
FP4_NATIVE = {"B200", "B300", "GB200", "GB300", "MI355X"}
INT8_NATIVE = FP8_NATIVE | {"A100", "Ascend-910B", "RTX-3090"}
COLUMNS = REQUIRED + OPTIONAL
GPUSTACK_PROMPTS = {("Very Long Prompt", "32000"): "100", ("Long Prompt", "4000"): "500",
                    ("Medium Prompt", "2000"): "500", ("Short Prompt", "128"): "1000"}
"""(dataset case, input tokens) -> prompts of a GPUStack performance-lab burst (github.com/gpustack/gpustack,
docs/performance-lab/*/*.md: the benchmark outputs print "Successful requests" 100, 500, 500 and 1000)."""
CHUNK_TIMED_PAGES = ("performance-lab/qwen3.5-9b/h100.md", "performance-lab/qwen3.5-35b-a3b/h200.md",
                     "performance-lab/qwen3.5-9b/h100-latency.md", "performance-lab/qwen3.5-35b-a3b/h200-latency.md")
"""GPUStack performance-lab pages run with GPUStack's benchmark-runner on guidellm, whose every benchmark output
shows a median inter-token latency of 0.00 ms and peak output rates of 20-40 M tokens/s: it timestamps the
chunks a stream arrives in, not tokens. Their rows get sweepkit.validation.floor.CHUNK_TIMED in notes."""
TRTLLM_BENCH_REQUESTS = {
    "trtllm-perf-overview-v0.17": {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (2048, 128): 3000,
                                   (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000, (500, 2000): 3000,
                                   (20000, 2000): 1000},
    "trtllm-perf-overview-v0.20": {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500,
                                   (2048, 128): 3000, (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000,
                                   (500, 2000): 3000, (20000, 2000): 1000}}
"""Source -> (ISL, OSL) -> $num_requests of the trtllm-bench dataset each max-throughput cell ran (NVIDIA/TensorRT-LLM
docs/source/performance/perf-overview.md, "Preparing a Dataset", the v0.17 and v0.20 texts: "the table below details
the $num_requests that were used"). A pair the table does not list (1024 / 2048) keeps requests empty."""
MODELOPT_FP8_KV = ("trtllm-perf-overview-v0.20",)
"""Sources that ran NVIDIA's ModelOpt FP8 / FP4 checkpoints (huggingface.co/nvidia/*-FP8, *-FP4) without naming
the KV format: those checkpoints set kv_cache_quant_algo FP8 in hf_quant_config.json, which TensorRT-LLM's
PyTorch backend follows, so their KV cache is fp8."""


def device(text: str) -> str:
    for prefix, name in DEVICES:
        if text.strip().startswith(prefix):
            return name
    return text.strip()


def model(text: str) -> tuple[str, str]:
    """(Hugging Face id, remark): 'org/A / B' and 'org/A/B' -> 'org/A'; '(...)' -> remark."""
    t, remark = text.strip(), ""
    if " (" in t:
        t, remark = t.split(" (", 1)[0], "model: " + text.strip()
    if " / " in t:
        t, remark = t.split(" / ", 1)[0], "model: " + text.strip()
    parts = t.split("/")
    if len(parts) > 2:
        t, remark = "/".join(parts[:2]), "model: " + text.strip()
    return t, remark


def fmt(text: str) -> tuple[str, str]:
    """(catalogue format or '', remark)."""
    t = text.strip().lower()
    if not t:
        return "", ""
    remark = "" if t in ("bf16", "fp8", "fp4") else f"{text.strip()} as "
    if " vs " in t or t.startswith("not stated"):
        return "", f"format: {text.strip()}"
    for key, name in (("mxfp4", "fp4"), ("nvfp4", "fp4"), ("fp4", "fp4"), ("fp8", "fp8"), ("bf16", "bf16"),
                      ("fp16", "bf16"), ("w8a8", "int8")):
        if t.startswith(key):
            return name, (remark + name if remark else "")
    return "", f"format: {text.strip()}"


def compute(weight: str, dev: str) -> str:
    native = {"fp8": FP8_NATIVE, "fp4": FP4_NATIVE, "int8": INT8_NATIVE}
    return weight if weight in native and dev in native[weight] else ("bf16" if weight else "")


def number(text: str, key: str, integer: bool = True) -> tuple[str, str]:
    """(number text or '', remark): '1408 (why)' -> '1408'; '~20000 (+-15%)' -> '20000'; 'ShareGPT' -> ''."""
    t = text.strip()
    if not t:
        return "", ""
    if key == "request_rate" and t.lower().startswith("inf"):
        return "inf", ("" if t.lower() == "inf" else f"{key}: {t}")
    pat = r"^(?:~|avg )?\s*(\d+(?:\.\d+)?)\s*(\(.*\))?$"
    mt = re.match(pat, t)
    if mt and (not integer or float(mt.group(1)).is_integer()):
        value = mt.group(1)
        return (str(int(float(value))) if integer else value), ("" if t == value else f"{key}: {t}")
    return "", f"{key}: {t}"


def unit(text: str, value: float, gpus: str) -> tuple[str, float, str, str] | None:
    """(unit, value, gpus, remark) in sweepkit's units; None for an input-token throughput."""
    t = text.strip()
    if re.search(r"\b(input|prefill) tok", t):
        return None
    if m := re.match(r"tok/s \((?:input\+output, )?total across (\d+) GPUs?\)$", t):
        return "tok/s", value, m.group(1), ""
    if m := re.search(r"per node \((\d+) GPUs\)", t):
        n = int(m.group(1))
        return "tok/s/gpu", value / n, gpus, f"(computed) {t} / {n}: {value:g} per node"
    if t.startswith("x"):
        return "x", value, gpus, ("" if t == "x" else f"unit: {t}")
    if t in ("ms", "s"):
        return t, value, gpus, ""
    if t == "s/request":
        return "s", value, gpus, ""
    if re.search(r"tok/s/gpu|per rank|per H\d+ GPU|tok/s per", t):
        return "tok/s/gpu", value, gpus, ("" if t == "tok/s/gpu" else f"unit: {t}")
    if t == "tok/s" or t.startswith("tok/s (system"):
        return "tok/s", value, gpus, ("" if t == "tok/s" else f"unit: {t}")
    raise SystemExit(f"unit {t!r} has no conversion; add one to benchmarks/data/build_measured.py")


def url(text: str) -> tuple[str, str]:
    """(https address, remark): 'github.com/...' -> 'https://github.com/...'; 'arXiv N (...)' -> arxiv.org/abs/N;
    'github.com/A docs/PATH (vX text, read from fork O/R@SHA)' -> https://github.com/O/R/blob/SHA/PATH."""
    t = text.strip()
    if m := re.match(r"github\.com/(\S+) (\S+) \((.*?), read from fork ([^@]+)@([0-9a-f]+)\)$", t):
        return f"https://github.com/{m.group(4)}/blob/{m.group(5)}/{m.group(2)}", f"{m.group(1)} {m.group(3)}"
    if m := re.match(r"arXiv (\d{4}\.\d{4,5})\s*(.*)$", t):
        return f"https://arxiv.org/abs/{m.group(1)}", (f"source: {m.group(2)}" if m.group(2) else "")
    if t.startswith("github.com/"):
        return "https://" + t, ""
    return t, ""


def split_of(out: dict) -> str:
    if out["source"] == "trtllm-perf-overview-v0.17":
        return "train"
    if out["source"] == "trtllm-perf-overview-v0.20":
        return "test"
    if "-staging" in out["framework"]:
        return "check"
    key = "|".join(out[k] for k in ("source", "model", "device", "gpus"))
    return "train" if hashlib.sha256(key.encode()).digest()[0] % 2 == 0 else "test"


def prefill_node(r: dict, out: dict) -> str:
    """Prompts per GPU of a prefill pool's node test that states its tokens per GPU ("16384 tokens per device",
    scenario "prefill-only", a prompt length dividing it), as text; '' for any other row."""
    m = re.match(r"(\d+) tokens per device$", r["concurrency"].strip())
    if not (m and r["scenario"].strip().lower().startswith("prefill-only") and out["input_tokens"]
            and not out["output_tokens"] and int(m.group(1)) % int(out["input_tokens"]) == 0):
        return ""
    return str(int(m.group(1)) // int(out["input_tokens"]))


EXCLUDED = "TensorRT-LLM >= 1.0, MLPerf v5.x or InferenceX"


def excluded(r: dict) -> bool:
    """Whether a row's framework or source names a release kept out (:data:`EXCLUDE`)."""
    return any(p.search(r["framework"]) or p.search(r["source"]) for p in EXCLUDE)


def convert(r: dict) -> tuple[dict | None, str]:
    """One input row -> (output row or None, why it was left out)."""
    if excluded(r):
        return None, EXCLUDED
    notes = [r["notes"].strip()] if r["notes"].strip() else []
    out = {c: "" for c in COLUMNS}
    for k in ("source", "url", "framework", "scenario", "metric", "lever", "pair_id"):
        out[k] = r[k].strip()
    out["url"], rem = url(r["url"])
    notes += [rem] if rem else []
    out["device"] = device(r["device"])
    if out["device"] != r["device"].strip():
        notes.append(f"device: {r['device'].strip()}")
    out["model"], rem = model(r["model"])
    notes += [rem] if rem else []
    for k in ("weight_format", "kv_format"):
        out[k], rem = fmt(r[k])
        notes += [f"{k}: {rem}"] if rem else []
    out["compute_format"] = compute(out["weight_format"], out["device"])
    if not out["kv_format"] and out["source"] in MODELOPT_FP8_KV and out["weight_format"] in ("fp8", "fp4"):
        out["kv_format"] = "fp8"
        notes.append("kv_format: fp8 (the checkpoints' hf_quant_config.json sets kv_cache_quant_algo FP8)")
    for k in ("gpus", "tp", "pp", "ep", "dp", "input_tokens", "output_tokens", "concurrency", "request_rate"):
        out[k], rem = number(r[k], k, integer=k != "request_rate")
        notes += [rem] if rem else []
    if m := re.search(r"(\d+) requests", r["scenario"]):
        out["requests"] = m.group(1)
    elif m := re.search(r"\((\d+) prompts\)", r["input_tokens"]):
        out["requests"] = m.group(1)
    elif out["source"] == "gpustack-performance-lab" and out["request_rate"] == "inf" and (
            m := re.search(r"dataset case '([^']+)'", r["notes"])) and (m.group(1), out["input_tokens"]) in GPUSTACK_PROMPTS:
        out["requests"] = GPUSTACK_PROMPTS[(m.group(1), out["input_tokens"])]
        notes.append(f"requests: {out['requests']} (the page's benchmark output)")
    elif out["metric"] == "max_output_throughput" and out["input_tokens"] and out["output_tokens"] and (
            n := TRTLLM_BENCH_REQUESTS.get(out["source"], {}).get((int(out["input_tokens"]), int(out["output_tokens"])))):
        out["requests"] = str(n)
        notes.append(f"requests: {n} (the release's $num_requests table)")
    conv = unit(r["unit"], float(r["value"]), out["gpus"])
    node = prefill_node(r, out)
    if conv is None and node:
        conv = unit(r["unit"].replace("input tok", "tok"), float(r["value"]), out["gpus"])
        out["concurrency"] = node
        notes = [n for n in notes if not n.startswith("concurrency: ")]
        notes.append(f"prefill node test: input tokens/s as total_throughput (no output); concurrency: "
                     f"{r['concurrency'].strip()} = {node} prompts of {out['input_tokens']} per GPU per step")
    if conv is None:
        return None, "input-token (prefill) throughput: no such metric"
    out["unit"], value, out["gpus"], rem = conv
    out["value"] = r["value"].strip() if value == float(r["value"]) else f"{value:.6g}"
    notes += [rem] if rem else []
    pct = r["percentile"].strip().lower()
    out["percentile"] = "mean" if pct.startswith("mean") else ("50" if pct == "median" else pct)
    if out["metric"] == "speedup" or (out["lever"] and not out["pair_id"]):
        out["pair_id"] = ""
    if out["lever"] and out["pair_id"] and not re.search(r":(with|without)$", out["lever"]):
        out["pair_id"] = ""
    out["draft"], out["gamma"] = (r.get("draft") or "").strip(), (r.get("gamma") or "").strip()
    out["split"] = split_of(out)
    if out["source"] == "gpustack-performance-lab" and out["url"].endswith(CHUNK_TIMED_PAGES):
        notes.append("harness: guidellm (GPUStack benchmark-runner), tokens timed as they arrive in chunks "
                     "(the page's median ITL is 0.00 ms)")
    out["notes"] = "; ".join(n for n in notes if n)
    return out, ""


def passed_through(part: list[dict], path: str, dropped: Counter) -> list[dict]:
    """The rows of an input already in sweepkit's measurement format (its header is the format's columns), as
    they are, less the excluded releases; every row must pass the format's checks (a bad one stops the build
    with its one-line error)."""
    keep = [r for r in part if not excluded(r)]
    if len(keep) < len(part):
        dropped[EXCLUDED] += len(part) - len(keep)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(keep)
    parse_measurements(buf.getvalue(), path)
    return keep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("measurements", nargs="+", help="measurement CSVs (the columns in this script's docstring)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "sweepkit/validation/data/measured.csv"))
    args = ap.parse_args(argv)
    rows, kept, dropped = [], [], Counter()
    for path in args.measurements:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            part = list(reader)
        rows += part
        if set(reader.fieldnames or ()) == set(COLUMNS):
            kept += passed_through(part, path, dropped)
            continue
        here, nodes = [], []
        for r in part:
            out, why = convert(r)
            if out is None:
                dropped[why] += 1
            else:
                (nodes if prefill_node(r, out) else here).append(out)
        kept += here + nodes   # nodes after the rest, so the row numbers earlier rows (and fitted profiles) cite stay
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(kept)
    print(f"{args.out}: {len(kept)} rows from {len(rows)}", file=sys.stderr)
    for why, n in dropped.items():
        print(f"  left out {n}: {why}", file=sys.stderr)
    for (src, metric), n in sorted(Counter((o["source"], o["metric"]) for o in kept).items()):
        print(f"  {src:32s} {metric:24s} {n}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
