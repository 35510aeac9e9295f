"""Fit the TensorRT-LLM + Triton profile: the shipped TensorRT-LLM profile with a per-kernel launch time.

    python benchmarks/data/fit_triton_profile.py [--out sweepkit/catalogue/profile-tensorrt-llm-triton.toml]

TensorRT-LLM behind Triton's tensorrtllm_backend runs without CUDA graphs by default (``cuda_graph_mode``,
default false: github.com/triton-inference-server/tensorrtllm_backend docs/model_config.md), so every kernel a
decoder layer launches costs a fixed time t_k that trtllm-bench's max-throughput runs (which the TensorRT-LLM
profile was fitted on) do not pay. This script holds every field of the shipped TensorRT-LLM profile and fits
t_k alone (:func:`sweepkit.validation.kernel_fit.refit_kernel`: a grid of 0 to 6 us by 0.25 us, the median
|ln error| of the serving engine's TTFT, ITL and throughput) on the packaged measured rows whose framework
names Triton and whose split is train (TensorRT-LLM v0.14 online, H100); their test rows (H200) are held out.
Prints the loss per grid point and writes the profile.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="sweepkit/catalogue/profile-tensorrt-llm-triton.toml")
    ap.add_argument("--step-us", type=float, default=0.25, help="grid step, microseconds")
    ap.add_argument("--max-us", type=float, default=6.0, help="grid end, microseconds")
    args = ap.parse_args(argv)

    from sweepkit.catalogue.efficiency import framework_key, packaged_profile, profile_toml
    from sweepkit.validation import MODELLED, evaluate_points, load_measurements, status
    from sweepkit.validation.kernel_fit import refit_kernel, with_kernel

    key = "tensorrt-llm-triton"
    points, name, sha = load_measurements(None)
    rows = [m for m in points if framework_key(m.framework) == key and m.split == "train" and status(m) == MODELLED]
    base = dataclasses.replace(packaged_profile("profile-tensorrt-llm.toml"), name=key, framework="TensorRT-LLM + Triton")
    grid = np.round(np.arange(0.0, args.max_us + 1e-9, args.step_us), 6) / 1e6
    fit = refit_kernel(rows, base, grid, lambda r, p: evaluate_points(r, profile=p))
    for g, loss in zip(fit.grid_s, fit.loss):
        print(f"t_k {g * 1e6:5.2f} us  median |ln error| {loss:.4f}{'  <- best' if g == fit.kernel_s else ''}")
    source = (f"fitted by benchmarks/data/fit_triton_profile.py on {dt.date.today().isoformat()}: t_k alone, "
              f"{fit.rows} train rows of TensorRT-LLM behind Triton ({name}, sha256 {sha}), median |ln error| "
              f"{fit.loss[0]:.4f} at t_k = 0 -> {min(fit.loss):.4f}")
    profile = dataclasses.replace(with_kernel(base, fit.kernel_s, source), source=source)
    header = ("Written by: python benchmarks/data/fit_triton_profile.py\n"
              "The shipped TensorRT-LLM profile's fields, held; kernel_s fitted on the serving engine's rows")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(profile_toml(profile, header))
    print(f"t_k = {fit.kernel_s * 1e6:.2f} us on {fit.rows} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
