"""A profile's per-kernel time fitted on priced rows (sweepkit.validation.kernel_fit), and the TensorRT-LLM +
Triton profile it writes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sweepkit.catalogue.efficiency import KERNEL_FIELD, SHIPPED, framework_key, packaged_profile, profile_for
from sweepkit.errors import InputError
from sweepkit.validation import Measurement
from sweepkit.validation.kernel_fit import median_log_error, refit_kernel, with_kernel
from sweepkit.validation.profiles import profile_values, row_profile

TRITON = "TensorRT-LLM v0.14 + Triton tensorrtllm_backend"


def _row(isl: int, osl: int, framework: str = TRITON) -> Measurement:
    return Measurement(source="s", device="H100", model="llama-3.1-8b", metric="max_output_throughput", value=1.0,
                       unit="tok/s", value_si=1.0, row=1, framework=framework, tp=1, gpus=1, weight_format="bf16",
                       kv_format="bf16", compute_format="bf16", input_tokens=isl, output_tokens=osl, split="train")


def _price(rows, profile):
    return [float(v) for v in profile_values(rows, [profile] * len(rows))]


def test_refit_recovers_the_kernel_time_the_rows_were_made_with():
    base = profile_for(TRITON)
    rows = [_row(128, 128), _row(128, 2048), _row(2048, 128), _row(500, 2000)]
    made = _price(rows, with_kernel(base, 2e-6, "made"))
    rows = [dataclasses.replace(m, value_si=v) for m, v in zip(rows, made)]
    fit = refit_kernel(rows, base, np.arange(9) * 0.5e-6, _price)
    assert fit.kernel_s == pytest.approx(2e-6)
    assert fit.loss[4] == pytest.approx(0.0, abs=1e-9) and min(fit.loss[:4] + fit.loss[5:]) > 1e-4
    assert fit.rows == 4


def test_median_log_error_is_the_median_of_absolute_log_ratios():
    rows = [dataclasses.replace(_row(1, 1), value_si=v) for v in (1.0, 2.0, 4.0)]
    # |ln(2/1)|, |ln(2/2)|, |ln(1/4)| -> median ln 2; a missing value is left out
    assert median_log_error([2.0, 2.0, 1.0], rows) == pytest.approx(np.log(2.0))
    assert median_log_error([None, None, None], rows) == float("inf")


def test_bad_kernel_times_and_empty_fits_are_one_line_errors():
    with pytest.raises(InputError, match=r"kernel_s .*allowed: seconds in \[0, 1e-3\]"):
        with_kernel(profile_for(TRITON), -1e-6, "x")
    with pytest.raises(InputError, match="no rows or an empty grid"):
        refit_kernel([], profile_for(TRITON), [0.0], _price)


def test_triton_rows_pick_the_triton_profile_and_the_others_do_not():
    assert framework_key(TRITON) == "tensorrt-llm-triton" in SHIPPED
    assert row_profile(_row(128, 128), None).name == "tensorrt-llm-triton"
    assert row_profile(_row(128, 128, "TensorRT-LLM v0.20 (PyTorch backend, trtllm-bench)"), None).name == "tensorrt-llm"


def test_the_triton_profile_is_the_tensorrt_llm_profile_with_a_kernel_time():
    """Every field but t_k is the shipped TensorRT-LLM profile's: a refit of that profile must rewrite this one
    (python benchmarks/data/fit_triton_profile.py)."""
    trt, tri = packaged_profile(SHIPPED["tensorrt-llm"]), packaged_profile(SHIPPED["tensorrt-llm-triton"])
    assert tri.entries == trt.entries and tri.default == trt.default and tri.token_budget == trt.token_budget
    assert {k: v for k, v in tri.overheads.items() if k != KERNEL_FIELD} == trt.overheads
    assert 0.0 < tri.overheads[KERNEL_FIELD] <= 6e-6 and KERNEL_FIELD not in trt.overheads
