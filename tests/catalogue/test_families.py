"""Family fallbacks of efficiency profiles (sweepkit/catalogue/families.toml)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue.devices import device_names
from sweepkit.catalogue.efficiency import FIELDS, packaged_profile, profile_for
from sweepkit.catalogue.families import candidates, families, family_of, inherited, vendor_of

FORMATS = ("bf16", "fp8", "fp4", "nvfp4", "int8", "int4", "fp6")


def test_every_catalogue_device_is_in_exactly_one_family():
    members = [d for f in families()["families"].values() for d in f["devices"]]
    assert sorted(members) == sorted(set(members))
    assert set(device_names()) <= set(members), set(device_names()) - set(members)


def test_fallback_chains_stay_within_a_vendor():
    fams = families()["families"]
    for fam in fams.values():
        if fam["fallback"]:
            assert fams[fam["fallback"]]["vendor"] == fam["vendor"]


def test_candidate_order_is_family_format_then_fallback():
    # Own family in the format itself (device first), then the nearer formats, then Hopper.
    order = candidates("GB300", "fp8")
    assert order[:5] == [("GB300", "fp8"), ("B200", "fp8"), ("GB200", "fp8"), ("B300", "fp8"), ("GB300", "int8")]
    assert order.index(("B200", "fp4")) < order.index(("H200", "fp8"))
    assert candidates("MI355X", "fp8")[1] == ("MI325X", "fp8")
    assert candidates("not-a-device", "fp8") == [("not-a-device", "fp8")]


def test_blackwell_siblings_take_the_fitted_b200_fields():
    p = profile_for("TensorRT-LLM")
    b200 = p.fields("B200", "fp4")
    for dev in ("B300", "GB200", "GB300"):
        assert p.fields(dev, "fp4") == b200
    assert p.fields("H800", "fp8")["gemm_eff_max"] == p.entries[("H200", "fp8")]["gemm_eff_max"]


def test_amd_devices_keep_the_seed_and_pcie_cards_take_l40s():
    p, seed = profile_for("TensorRT-LLM"), packaged_profile()
    assert {s for _, s in p.origins("RTX-PRO-6000", "fp4").values()} == {("L40S", "fp8")}
    for dev in ("MI300X", "MI325X", "MI355X"):
        assert p.origins(dev, "fp8") == {}
        assert {k: p.fields(dev, "fp8")[k] for k in FIELDS} == seed.default


def test_moe_efficiency_from_the_siblings_ratio_to_dense():
    # B200 fp4 has dense rows only: moe_eff_max = 0.4 * (0.3 / 0.6) = 0.2, moe_tokens_half from H200.
    entries = {("B200", "fp4"): {"gemm_eff_max": 0.4}, ("H200", "fp8"): {"gemm_eff_max": 0.6, "moe_eff_max": 0.3,
                                                                         "moe_tokens_half": 90.0}}
    out = inherited(entries, "B200", "fp4", FIELDS)
    assert out["moe_eff_max"] == (pytest.approx(0.2), ("H200", "fp8"))
    assert out["moe_tokens_half"] == (90.0, ("H200", "fp8"))
    capped = inherited({("B200", "fp4"): {"gemm_eff_max": 0.9}, ("H200", "fp8"): {"gemm_eff_max": 0.3,
                                                                                  "moe_eff_max": 0.6}},
                       "B200", "fp4", FIELDS)
    assert capped["moe_eff_max"][0] == 1.0


def test_shipped_profile_b200_moe_fields_come_from_the_kernel_table():
    # no TensorRT-LLM training row constrains B200 MoE: its fields are set from NVIDIA's measured MoE kernel
    # table (tests/catalogue/test_blackwell_moe_profile.py), the entry's source says so, and a Hopper slice
    # without them still derives its own from its sibling's ratio to dense
    p = profile_for("TensorRT-LLM")
    for fmt in ("fp4", "fp8"):
        assert {"moe_eff_max", "moe_tokens_half"} <= p.entries[("B200", fmt)].keys()
        assert "moe_perf.parquet" in p.sources[("B200", fmt)]
    own = p.fields("H800", "fp8")["gemm_eff_max"]
    src = p.origins("H800", "fp8")["moe_eff_max"][1]
    ratio = p.entries[src]["moe_eff_max"] / p.entries[src]["gemm_eff_max"]
    assert p.fields("H800", "fp8")["moe_eff_max"] == pytest.approx(min(1.0, own * ratio))
    assert vendor_of(src[0]) == "NVIDIA"


DEVICES = sorted(device_names())
entry = st.dictionaries(st.sampled_from(FIELDS), st.floats(0.05, 1.0), min_size=1)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.tuples(st.sampled_from(DEVICES), st.sampled_from(FORMATS)), entry, max_size=8),
       st.sampled_from(DEVICES), st.sampled_from(FORMATS))
def test_a_fallback_never_uses_another_vendors_value(entries, device, fmt):
    p = dataclasses.replace(packaged_profile(), entries=entries)
    out = p.origins(device, fmt)
    for _value, (dev, _) in out.values():
        assert vendor_of(dev) == vendor_of(device)
        assert family_of(dev) is not None
    own = entries.get((device, fmt), {})
    for k, v in own.items():          # a device's own entry always wins
        assert out[k][0] == v
    fields = p.fields(device, fmt)
    assert all(0.0 < fields[k] <= 1.0 for k in ("gemm_eff_max", "moe_eff_max"))


def test_a_fit_without_moe_rows_leaves_moe_fields_to_the_family():
    # Dense-only H100 rows: the fitted H100 entry has no MoE fields; MoE takes H200's ratio to dense.
    from sweepkit.validation import Measurement
    from sweepkit.validation.framework_fit import calibrate_framework

    start = dataclasses.replace(packaged_profile(), entries={("H200", "fp8"): {"gemm_eff_max": 0.6,
                                                                              "moe_eff_max": 0.45}})
    rows = [Measurement(source="s", device="H100", model="llama-3.1-8b", metric="max_output_throughput",
                        value=v, unit="tok/s", value_si=v, row=k + 1, framework="TensorRT-LLM", tp=1, gpus=1,
                        weight_format="fp8", kv_format="fp8", compute_format="fp8", input_tokens=i,
                        output_tokens=o, split="train")
            for k, (i, o, v) in enumerate(((128, 128, 20000.0), (1000, 1000, 9000.0), (2048, 128, 3000.0)))]
    prof = calibrate_framework(rows, "TensorRT-LLM", file="t.csv", sha256="-", start=start).profile
    assert not {"moe_eff_max", "moe_tokens_half"} & prof.entries[("H100", "fp8")].keys()
    gemm = prof.entries[("H100", "fp8")]["gemm_eff_max"]
    assert prof.fields("H100", "fp8")["moe_eff_max"] == pytest.approx(gemm * 0.45 / 0.6)
