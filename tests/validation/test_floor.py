"""A per-token latency below the physical floor of a decode step is listed as not modelled, with both figures.

Closed form: t_floor = P_mm x w / (n_gpus x B_hbm); Llama-3.1-8B in bf16 on one H100 (3.35 TB/s, NVIDIA H100
datasheet, SXM): 7,504,658,432 x 2 B / 3.35e12 B/s = 4.4804 ms.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_model
from sweepkit.validation import Measurement, load_measurements
from sweepkit.validation.floor import CHUNK_TIMED, below_floor, chunk_timed, step_floor_s
from sweepkit.validation.points import status


def _row(metric="tpot", value_s=0.01, gpus=1, fmt="bf16", model="llama-3.1-8b", device="H100", draft="none"):
    return Measurement(source="s", device=device, model=model, metric=metric, value=value_s * 1e3, unit="ms",
                       value_si=value_s, row=1, framework="vLLM", tp=gpus, gpus=gpus, weight_format=fmt,
                       input_tokens=1000, output_tokens=100, request_rate=1.0, percentile="mean", draft=draft,
                       gamma=3 if draft != "none" else None)


def test_closed_form_llama_8b_h100():
    assert get_model("llama-3.1-8b").matmul_params == 7_504_658_432
    assert abs(step_floor_s(_row()) - 7_504_658_432 * 2 / 3.35e12) < 1e-12
    assert abs(step_floor_s(_row()) * 1e3 - 4.4804) < 1e-3


def test_experts_in_their_own_format_lower_the_floor():
    """gpt-oss-120b keeps its experts in MXFP4 (0.53125 B a value): a bf16 row's floor uses that."""
    bf16 = step_floor_s(_row(model="gpt-oss-120b", fmt="bf16"))
    assert abs(bf16 - get_model("gpt-oss-120b").matmul_params * 0.53125 / 3.35e12) < 1e-12


def test_below_floor_is_not_modelled_and_says_why():
    low = _row(value_s=0.3e-3)
    why = status(low)
    assert why.startswith("not modelled: the measured tpot, 0.30 ms, is below the physical floor")
    assert "4.48 ms" in why and "1 GPU)" in why
    assert below_floor(_row(value_s=4.49e-3)) == ""
    assert below_floor(_row(metric="ttft", value_s=1e-4)) == ""            # TTFT is not per token
    assert below_floor(_row(value_s=1e-4, draft="mtp")) == ""             # several tokens a step


def test_packaged_rows_below_the_floor():
    """Exactly the two GPUStack Qwen3.5-9B generation-heavy TPOT rows (0.12 and 0.33 ms on one H100, whose
    floor is 4.74 ms); the next-closest per-token row is over 1.5x its floor."""
    rows = load_measurements()[0]
    low = [m for m in rows if below_floor(m)]
    assert sorted(round(m.value_si * 1e3, 2) for m in low) == [0.12, 0.33]
    assert {m.model for m in low} == {"qwen3.5-9b"}
    ok = [m.value_si / step_floor_s(m) for m in rows
          if m.metric in ("tpot", "itl", "step_time") and not m.unknown and m.draft == "none" and not below_floor(m)]
    assert min(ok) > 1.5


@settings(max_examples=40, deadline=None)
@given(gpus=st.integers(1, 64), fmt=st.sampled_from(["bf16", "fp8", "fp4"]))
def test_floor_scales_as_one_over_gpus_and_bytes(gpus, fmt):
    one = step_floor_s(_row(fmt="bf16"))
    row = dataclasses.replace(_row(fmt=fmt), gpus=gpus, tp=gpus)
    w = {"bf16": 2.0, "fp8": 1.0}.get(fmt)
    got = step_floor_s(row)
    assert got > 0
    if w is not None:
        assert abs(got - one * (w / 2.0) / gpus) < 1e-12 * max(one, 1.0)
    assert step_floor_s(dataclasses.replace(row, gpus=gpus + 1, tp=gpus + 1)) < got


def test_chunk_timed_rows_keep_their_throughput_and_lose_their_per_token_latencies():
    """GPUStack's guidellm pages (median ITL 0.00 ms in every benchmark output) mark their rows in notes: their
    TPOT rows are not modelled and say why; their throughput and end-to-end rows stay modelled as before."""
    rows = load_measurements()[0]
    marked = [m for m in rows if CHUNK_TIMED in m.notes]
    assert marked and all("qwen3.5" in m.url and m.source == "gpustack-performance-lab" for m in marked)
    assert not [m for m in rows if "qwen3.5" in m.url and m.source == "gpustack-performance-lab"
                and CHUNK_TIMED not in m.notes]
    per_token = [m for m in marked if m.metric in ("tpot", "itl")]
    assert len(per_token) == 16
    for m in per_token:
        why = status(m)
        assert why.startswith("not modelled") and ("in chunks" in why or "physical floor" in why
                                                   or "needs input_tokens" in why), why
    assert sum("in chunks" in status(m) for m in per_token) == 14     # the other 2 are below the floor
    priced = [m for m in marked if m.metric == "total_throughput" and m.input_tokens]
    assert len(priced) == 12
    for m in priced:
        assert chunk_timed(m) == "" and status(m) == "modelled", status(m)
    plain = dataclasses.replace(per_token[0], notes="")
    assert chunk_timed(plain) == ""
