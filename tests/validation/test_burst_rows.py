"""Max-throughput rows of a stated dataset size are bursts: trtllm-bench queues its whole dataset at once.

Source of the sizes: NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md, v0.17 and v0.20 texts,
"Preparing a Dataset": "the table below details the $num_requests that were used" (128 / 128: 30,000;
128 / 4096: 1,500; 20000 / 2000: 1,000; ...).
"""

from __future__ import annotations

import csv
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from support.scripts import load_script
from sweepkit.catalogue.efficiency import profile_for
from sweepkit.costmodel.efficiency import efficiency_arrays
from sweepkit.validation import Measurement, load_measurements
from sweepkit.validation.steady import burst, dataset_waves, row_value, running, steady_step_s
from sweepkit.validation.steady_rows import burst_requests, concurrency, row_inputs

HEAD = ("source,url,framework,device,gpus,tp,pp,ep,dp,model,weight_format,kv_format,input_tokens,"
        "output_tokens,concurrency,request_rate,scenario,metric,value,unit,percentile,lever,pair_id,notes\n")


def _builder():
    return load_script("benchmarks/data/build_measured.py")


def _row(metric="max_output_throughput", requests=None, rate=None, isl=128, osl=4096) -> Measurement:
    return Measurement(source="s", device="H200", model="llama-3.1-70b", metric=metric, value=1.0, unit="tok/s",
                       value_si=1.0, row=1, framework="TensorRT-LLM", tp=4, gpus=4, weight_format="fp8",
                       kv_format="fp8", compute_format="fp8", input_tokens=isl, output_tokens=osl,
                       request_rate=rate, requests=requests, split="test")


def test_builder_gives_trtllm_bench_rows_their_dataset_sizes(tmp_path):
    src = tmp_path / "in.csv"
    row = ("trtllm-perf-overview-v0.{rel},github.com/NVIDIA/TensorRT-LLM,TensorRT-LLM v0.{rel},H200,1,1,,,,"
           "meta-llama/Llama-3.1-8B,FP8,,{isl},{osl},,,offline max-throughput,max_output_throughput,1000,"
           "tok/s (total across 1 GPU),,,,")
    src.write_text(HEAD + "\n".join([row.format(rel=20, isl=128, osl=4096), row.format(rel=20, isl=1024, osl=2048),
                                     row.format(rel=17, isl=20000, osl=2000), row.format(rel=20, isl=1000, osl=2000),
                                     row.format(rel=17, isl=1000, osl=2000), row.format(rel=9, isl=128, osl=128)])
                   + "\n")
    out = tmp_path / "out.csv"
    assert _builder().main([str(src), "--out", str(out)]) == 0
    # v0.17's table has no 1000 / 2000 line; neither release lists 1024 / 2048; v0.9 ran static batches
    assert [r["requests"] for r in csv.DictReader(out.open())] == ["1500", "", "1000", "1500", "", ""]


def test_packaged_trtllm_bench_rows_carry_the_release_table():
    table = _builder().TRTLLM_BENCH_REQUESTS
    points, _, _ = load_measurements(None)
    rows = [m for m in points if m.source in table and m.metric == "max_output_throughput"]
    assert len(rows) == 553
    for m in rows:
        assert m.requests == table[m.source].get((m.input_tokens, m.output_tokens)), m


def _priced(rows):
    prof = profile_for("TensorRT-LLM")
    r = row_inputs(rows, 1024, 8192)
    eff = efficiency_arrays([prof.fields(m.device, m.compute_format) for m in rows])
    return r, eff, np.asarray(jax.vmap(row_value)(r, eff))


def _one(tree, i):
    return jax.tree_util.tree_map(lambda x: x[i], tree)


def test_a_max_throughput_row_with_requests_is_a_burst_of_them():
    assert burst_requests(_row(requests=1500)) == 1500.0 and concurrency(_row(requests=1500)) == 1500.0
    assert burst_requests(_row()) == 0.0 and concurrency(_row()) == float("inf")
    loaded = _row("output_throughput", requests=1500, rate=float("inf"))
    assert burst_requests(loaded) == 1500.0
    with jax.enable_x64(True):
        r, eff, value = _priced([_row(requests=1500), loaded, _row(requests=10**9), _row()])
        out, _ = burst(_one(r, 1), _one(eff, 1))
    assert np.asarray(r.waves).tolist() == [1.0, 0.0, 1.0, 0.0]
    # a loaded burst keeps the three phases; a max-throughput dataset runs in waves, slower than the steady
    # state, which an unbounded dataset approaches
    assert value[1] == pytest.approx(float(out), rel=1e-12)
    assert value[0] < value[3] and value[2] == pytest.approx(value[3], rel=1e-6)


@pytest.mark.parametrize("waves", [1.0, 2.5, 3.0])
def test_dataset_waves_closed_form(waves):
    # Llama-3.1-70B fp8 on 4 x H200 at 128 / 4096: n = 641.7 requests (the KV cache's 0.9 of the memory left
    # after the weights); R = 2.5 n is two full waves of O steps at n rows and one of O steps at n / 2:
    # output = R O / (2 O t_s(n) + O t_s(n / 2))
    with jax.enable_x64(True):
        r, eff, _ = _priced([_row()])
        one, e = _one(r, 0), _one(eff, 0)
        n = float(running(one))
        assert n == pytest.approx(641.7, abs=0.1)
        row = dataclasses.replace(one, burst_requests=jnp.asarray(waves * n), waves=jnp.asarray(1.0))
        t_n, t_half = float(steady_step_s(row, e, n)), float(steady_step_s(row, e, n / 2.0))
        value = float(dataset_waves(row, e))
    full = np.floor(waves)
    expected = waves * n * 4096 / (full * 4096 * t_n + (4096 * t_half if waves > full else 0.0))
    assert value == pytest.approx(expected, rel=1e-12)
    if waves == 1.0:
        assert value == pytest.approx(n / t_n, rel=1e-12)       # one wave: the steady state
