"""Fit the TensorRT-LLM gptSessionBenchmark profile: the shipped TensorRT-LLM profile with a context-pass kernel time.

    python benchmarks/data/fit_gptsession_profile.py [--out sweepkit/catalogue/profile-tensorrt-llm-gptsession.toml]

TensorRT-LLM's gptSessionBenchmark (the perf-overview tables of release 0.9 and earlier) reports the host
wall-clock of ``GptSession::generate`` (benchmarks/cpp/gptSessionBenchmark.cpp). Its context step runs the
engine with ``executeContext``, never through a CUDA graph; graphs (``--enable_cuda_graph``, off by default)
capture generation steps only (cpp/tensorrt_llm/runtime/gptSession.cpp, ``executeContextStep`` and
``executeGenerationStep``). So every kernel a decoder layer launches in a context pass costs a fixed time t_k,ctx
that the trtllm-bench runs the TensorRT-LLM profile was fitted on do not show. This script holds every field of
the shipped TensorRT-LLM profile and fits t_k,ctx alone (:func:`sweepkit.validation.kernel_fit.refit_kernel`
with ``field="context_kernel_s"``: a grid of 0 to 12 us by 0.25 us by default; the shipped profile used 0.5 us, the median |ln error| of the serving
engine's first-token latencies and throughputs) on the packaged rows whose framework names gptSessionBenchmark
and whose split is train; the test rows are held out. Prints the loss per grid point and writes the profile.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="sweepkit/catalogue/profile-tensorrt-llm-gptsession.toml")
    ap.add_argument("--step-us", type=float, default=0.25, help="grid step, microseconds")
    ap.add_argument("--max-us", type=float, default=12.0, help="grid end, microseconds")
    args = ap.parse_args(argv)

    from sweepkit.catalogue.efficiency import CONTEXT_KERNEL_FIELD, framework_key, packaged_profile, profile_toml
    from sweepkit.validation import MODELLED, evaluate_points, load_measurements, status
    from sweepkit.validation.kernel_fit import refit_kernel, with_kernel

    key = "tensorrt-llm-gptsession"
    points, name, sha = load_measurements(None)
    rows = [m for m in points if framework_key(m.framework) == key and m.split == "train" and status(m) == MODELLED]
    base = dataclasses.replace(packaged_profile("profile-tensorrt-llm.toml"), name=key,
                               framework="TensorRT-LLM gptSessionBenchmark")
    grid = np.round(np.arange(0.0, args.max_us + 1e-9, args.step_us), 6) / 1e6
    fit = refit_kernel(rows, base, grid, lambda r, p: evaluate_points(r, profile=p), field=CONTEXT_KERNEL_FIELD)
    for g, loss in zip(fit.grid_s, fit.loss):
        print(f"t_k,ctx {g * 1e6:5.2f} us  median |ln error| {loss:.4f}{'  <- best' if g == fit.kernel_s else ''}")
    source = (f"fitted by benchmarks/data/fit_gptsession_profile.py on {dt.date.today().isoformat()}: "
              f"context_kernel_s alone, {fit.rows} train rows of TensorRT-LLM gptSessionBenchmark ({name}, "
              f"sha256 {sha}), median |ln error| {fit.loss[0]:.4f} at t_k,ctx = 0 -> {min(fit.loss):.4f}; "
              f"every other field the shipped TensorRT-LLM profile's")
    profile = dataclasses.replace(with_kernel(base, fit.kernel_s, source, CONTEXT_KERNEL_FIELD), source=source)
    header = (f"Written by: python benchmarks/data/fit_gptsession_profile.py --step-us {args.step_us:g} --max-us {args.max_us:g}\n"
              "The shipped TensorRT-LLM profile's fields, held; context_kernel_s fitted on gptSessionBenchmark's rows")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(profile_toml(profile, header))
    print(f"t_k,ctx = {fit.kernel_s * 1e6:.2f} us on {fit.rows} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
