"""The terms of a steady-state step add up to the step the steady state prices."""

from __future__ import annotations

import dataclasses

import jax
import pytest

from support.scripts import load_script
from sweepkit.catalogue.efficiency import profile_for
from sweepkit.costmodel.efficiency import efficiency_arrays
from sweepkit.costmodel.passes import Work
from sweepkit.validation import Measurement
from sweepkit.validation.steady import _step, step_work
from sweepkit.validation.steady_rows import row_inputs
from sweepkit.validation.step_parts import PARTS, step_parts


def _row(model, device, fmt, kv, tp, ep, dp, conc, notes="") -> Measurement:
    return Measurement(source="s", device=device, model=model, metric="max_output_throughput", value=1.0,
                       unit="tok/s", value_si=1.0, row=1, framework="TensorRT-LLM (PyTorch backend)", tp=tp,
                       gpus=tp, weight_format=fmt, kv_format=kv, compute_format=fmt, input_tokens=1024,
                       output_tokens=2048, concurrency=conc, notes=notes, ep=ep, dp=dp)


DEP8 = _row("deepseek-v3", "B200", "fp4", "fp8", 8, 8, 8, 7168, "flags: --max_batch_size 896 --max_num_tokens 2048")
DENSE = _row("llama-3.1-8b", "H100", "fp8", "fp8", 1, 1, 1, 64)
FALCON = _row("falcon-180b", "A100", "bf16", "bf16", 8, 1, 1, 64)   # one all-reduce a layer (parallel attention)


@pytest.mark.parametrize("m", [DEP8, DENSE, FALCON], ids=["dep8", "dense", "falcon-tp8"])
def test_the_parts_add_up_to_the_step(m):
    with jax.enable_x64(True):
        row = jax.tree_util.tree_map(lambda a: a[0], row_inputs([m], 1024.0, 8192.0))
        eff = efficiency_arrays(profile_for("tensorrt-llm").fields(m.device, m.compute_format))
        decode, prefill = step_work(row)
        none = Work(*(0.0 * f for f in dataclasses.astuple(prefill)))
        for p in (prefill, none):
            parts = step_parts(row, eff, decode, p)
            assert set(parts) == set(PARTS) and all(float(v) >= 0.0 for v in parts.values())
            assert float(sum(parts.values())) == pytest.approx(float(_step(row, eff, decode, p)), rel=1e-12)
        # the all-to-alls are the layout's alone; a dense replica of one GPU has none
        assert (float(step_parts(row, eff, decode, prefill)["a2a"]) > 0.0) == (m is DEP8)


def test_the_breakdown_script_prints_each_row_of_a_source(capsys):
    mod = load_script("benchmarks/bench_step_breakdown.py")
    assert mod.main(["--source", "trtllm-blog-dsr1-best-perf"]) == 0
    out = capsys.readouterr().out
    # rows 1471-1473 of the packaged corpus: per rank 896, 384 and 128 running requests
    assert out.count("modelled") == 3 and "n 896.0" in out and "n 384.0" in out and "n 128.0" in out
    assert mod.main(["--source", "no-such-source"]) == 2
