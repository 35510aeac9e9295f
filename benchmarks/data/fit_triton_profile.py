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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_profile_fit import fit_kernel_profile


def main(argv: list[str] | None = None) -> int:
    return fit_kernel_profile(
        argv, key="tensorrt-llm-triton", framework="TensorRT-LLM + Triton", field="kernel_s", symbol="t_k",
        script="benchmarks/data/fit_triton_profile.py", max_us=6.0, rows_label="TensorRT-LLM behind Triton",
        header="The shipped TensorRT-LLM profile's fields, held; kernel_s fitted on the serving engine's rows")


if __name__ == "__main__":
    sys.exit(main())
