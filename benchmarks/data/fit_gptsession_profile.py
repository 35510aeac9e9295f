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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_profile_fit import fit_kernel_profile


def main(argv: list[str] | None = None) -> int:
    return fit_kernel_profile(
        argv, key="tensorrt-llm-gptsession", framework="TensorRT-LLM gptSessionBenchmark", field="context_kernel_s",
        symbol="t_k,ctx", script="benchmarks/data/fit_gptsession_profile.py", max_us=12.0,
        rows_label="TensorRT-LLM gptSessionBenchmark",
        header="The shipped TensorRT-LLM profile's fields, held; context_kernel_s fitted on gptSessionBenchmark's rows")


if __name__ == "__main__":
    sys.exit(main())
