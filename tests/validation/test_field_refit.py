"""One profile field refitted on a slice's rows, every other field held (sweepkit.validation.field_refit)."""

from __future__ import annotations

import dataclasses

import pytest

from sweepkit.catalogue.efficiency import profile_for
from sweepkit.errors import InputError
from sweepkit.validation import Measurement
from sweepkit.validation.field_refit import refit_field, slice_loss, with_field
from sweepkit.validation.profiles import profile_values

KEY = ("H200", "fp8")


def _row(isl: int, osl: int, model: str = "deepseek-v3") -> Measurement:
    return Measurement(source="s", device="H200", model=model, metric="max_output_throughput", value=1.0,
                       unit="tok/s", value_si=1.0, row=1, framework="SGLang", tp=8, gpus=8, weight_format="fp8",
                       kv_format="fp8", compute_format="fp8", input_tokens=isl, output_tokens=osl, split="train")


def _measured_at(rows, profile, value):
    """The rows with value_si set to what ``profile`` gives them at attn_prefill_eff = ``value``."""
    p = with_field(profile, KEY, "attn_prefill_eff", value)
    return [dataclasses.replace(m, value_si=float(v)) for m, v in zip(rows, profile_values(rows, [p] * len(rows)))]


def test_refit_recovers_the_field_the_rows_were_made_with():
    prof = profile_for("SGLang")
    rows = _measured_at([_row(32000, 100), _row(8000, 200), _row(1000, 1000)], prof, 0.7)
    res = refit_field(rows + [dataclasses.replace(rows[0], device="H100")], prof, KEY, lo=0.1, hi=1.0, n_grid=10)
    assert res.value == pytest.approx(0.7, abs=1e-3)
    assert res.previous == prof.fields(*KEY)["attn_prefill_eff"]
    assert len(res.rows) == 3                                   # the H100 row is another slice's
    assert res.loss_after < 1e-8 < res.loss_before
    assert slice_loss(rows, prof, KEY, "attn_prefill_eff", 0.7) < 1e-10


def test_other_fields_and_slices_are_held():
    prof = profile_for("SGLang")
    p = with_field(prof, KEY, "attn_prefill_eff", 0.5)
    assert p.fields(*KEY)["attn_prefill_eff"] == 0.5
    assert {f: v for f, v in p.fields(*KEY).items() if f != "attn_prefill_eff"} == \
        {f: v for f, v in prof.fields(*KEY).items() if f != "attn_prefill_eff"}
    assert p.fields("H100", "fp8") == prof.fields("H100", "fp8")


def test_bad_field_or_empty_slice_is_a_clear_error():
    prof = profile_for("SGLang")
    with pytest.raises(InputError, match="not a per-format profile field"):
        refit_field([_row(1000, 100)], prof, KEY, "step_overhead_s")
    with pytest.raises(InputError, match="slice A100 bf16: no row"):
        refit_field([_row(1000, 100)], prof, ("A100", "bf16"))
