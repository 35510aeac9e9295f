"""The plan's max-throughput mode: no SLO, fixed lengths, every request queued at once; the best layout is
the one with the highest output tokens per GPU per second.

This is the setting of published max-throughput tables (TensorRT-LLM's perf-overview: ``trtllm-bench``
throughput runs over a synthetic fixed input/output length, one row per tensor-parallel degree). Each
layout's figure is the screen's bound (:mod:`sweepkit.plan.screen`) with chunked batching, paged KV and the
best batch cap of :data:`BATCH_CAPS`.
"""

from __future__ import annotations

import math

import numpy as np

from sweepkit.plan.build import run_screen
from sweepkit.plan.space import enumerate_space, make_space
from sweepkit.serving.workloads import fixed_workload

BATCH_CAPS = (256, 512, 1024, 2048)
"""Batch caps tried per layout (trtllm-bench sizes its batch from the engine's memory, up to 2,048 rows)."""


def layout_throughputs(model: str, device: str, tps, input_tokens: int, output_tokens: int,
                       weight_format: str = "bf16", kv_format: str = "bf16") -> dict[int, float]:
    """Output tokens per GPU per second of each tensor-parallel degree in ``tps`` (one instance of tp GPUs;
    0 where the model does not fit).

    Example:
      >>> t = layout_throughputs("llama-3.1-8b", "H100", (1, 2), 128, 128)
      >>> t[1] > t[2] > 0           # at short lengths the all-reduces make TP2 slower per GPU
      True
    """
    w = fixed_workload(f"fixed-{input_tokens}-{output_tokens}", int(input_tokens), int(output_tokens), 2,
                       offline=True, source="max-throughput plan")
    out = {}
    for tp in tps:
        space = make_space(model, [device], int(tp), dict(
            tp=(int(tp),), pp=(1,), dp=(1,), ep=(1,), mode=("colocated",), batching=("chunked",), token_budget=(8192,),
            batch_cap=BATCH_CAPS, kv=("paged",), weight_format=(weight_format,), kv_format=(kv_format,),
            spec=("none",)))
        table = enumerate_space(space)
        if not len(table["tp"]):
            out[int(tp)] = 0.0
            continue
        b = run_screen(table, model, w, math.inf, math.inf)
        out[int(tp)] = float(np.max(b["tok_s_per_gpu"]))
    return out


def best_layout(throughputs: dict[int, float]) -> int:
    """The tensor-parallel degree of the highest throughput per GPU (ties: the smaller degree)."""
    return max(sorted(throughputs), key=lambda tp: (throughputs[tp], -tp))
