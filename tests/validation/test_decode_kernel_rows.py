"""A v0.9 row's profile carries the CUDA-core decode kernel of its release and model (validation.decode_kernel)."""

import dataclasses

import jax

from sweepkit.catalogue.efficiency import VECTOR_FIELD, profile_for
from sweepkit.serving.profile import instance_efficiency
from sweepkit.validation import load_measurements
from sweepkit.validation.decode_kernel import row_vector_eff, with_decode_kernel
from sweepkit.validation.profiles import row_profile
from sweepkit.validation.serving_points import engine_profile


def _v09_rows():
    points, _, _ = load_measurements(None)
    return [m for m in points if m.source == "trtllm-perf-overview-v0.9"]


def test_the_packaged_v0_9_rows_run_masked_mha_exactly_where_xqa_cannot_run():
    rows = _v09_rows()
    assert rows
    for m in rows:
        gqa_outside_xqa = any(k in m.model.lower() for k in ("mistral", "mixtral", "falcon"))
        expected = {"fp8": 0.1, "bf16": 0.2}[m.kv_format] if gqa_outside_xqa else 0.0
        assert row_vector_eff(m) == expected, m.setup
    later = [m for m in load_measurements(None)[0] if "v0.17" in m.framework or "v0.14" in m.framework]
    assert later and all(row_vector_eff(m) == 0.0 for m in later)


def test_the_engine_prices_the_row_with_its_kernel_and_rows_of_a_setup_share_one_profile():
    rows = [m for m in _v09_rows() if "mistral" in m.model.lower() and m.device == "H100"]
    chosen = {id(engine_profile(m)) for m in rows if m.kv_format == "fp8"}
    assert len(chosen) == 1                                   # one object: the engine groups rows by it
    prof = engine_profile(rows[0])
    assert prof.overheads[VECTOR_FIELD] == row_vector_eff(rows[0]) > 0
    base = profile_for(rows[0].framework)
    assert VECTOR_FIELD not in base.overheads                 # the shipped profile is left as it is
    with jax.enable_x64(True):
        assert float(instance_efficiency(prof, "H100", "fp8").vector_decode_eff) == row_vector_eff(rows[0])
        assert float(instance_efficiency(base, "H100", "fp8").vector_decode_eff) == 0.0
    llama = dataclasses.replace(rows[0], model="llama-2-70b")
    assert engine_profile(llama) is base and with_decode_kernel(None, rows[0]) is None
    assert engine_profile(rows[0], "reference") is None
    # the steady state chooses the same way where it prices a row
    m = dataclasses.replace(rows[0], metric="max_output_throughput")
    assert row_profile(m, None).overheads[VECTOR_FIELD] == row_vector_eff(m)
