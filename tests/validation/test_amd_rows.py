"""The packaged AMD Instinct rows (benchmarks/data/measurements-amd.csv): their sources' figures, their splits, and the
vLLM profile left at the default fractions for every Instinct part (docs/validation.md, "AMD Instinct rows")."""

from __future__ import annotations

import dataclasses

import pytest

from support.scripts import load_script
from sweepkit.catalogue.efficiency import profile_for
from sweepkit.validation.field_refit import slice_loss
from sweepkit.validation.framework_fit import fittable, framework_rows
from sweepkit.validation.measurements import load_measurements

SOURCES = {"rocm-vllm-dev-docker", "oracle-blog-llama405b-mi300x", "dstack-deepseek-r1-mi300x",
           "dstack-llama405b-mi300x"}
KEY = ("MI300X", "fp8")


@pytest.fixture(scope="module")
def rows():
    points, _, _ = load_measurements()
    return [m for m in points if m.source in SOURCES]


def test_amd_rows_are_mi300x_with_public_addresses_and_staging_images_stay_out_of_fits(rows):
    assert len(rows) == 168 and {m.device for m in rows} == {"MI300X"}
    assert all(m.url.startswith(("https://github.com/", "https://blogs.oracle.com/")) for m in rows)
    staging = [m for m in rows if "-staging" in m.framework]
    assert len(staging) == 81 and not any(map(fittable, staging))
    # dstack's offline runs: output tokens / elapsed time, e.g. 128 x 2,048 / 131.64 s on 8 MI300X
    # (raw_data/8Mi300x-throughput-quark/..._req128_in128_out2048_.json: elapsed_time 131.6356 s)
    m = next(m for m in rows if m.source == "dstack-llama405b-mi300x" and m.gpus == 8 and m.requests == 128
             and m.input_tokens == 128)
    assert m.value_si == pytest.approx(128 * 2048 / 131.6356226, rel=1e-5)


def test_dev_docker_throughput_reads_as_output_tokens(rows):
    # Per output token, the 2048/2048 burst takes 1.77x (70B) and 1.78x (405B) the 128/2048 burst's time, a
    # decode-bound ratio; read as input + output tokens/s it would be 3.33x and 3.35x (docs/validation.md).
    def value(model, isl):
        return next(m.value_si for m in rows if m.source == "rocm-vllm-dev-docker" and m.model == model
                    and m.metric == "max_output_throughput" and m.input_tokens == isl and m.output_tokens == 2048)

    for model, ratio in (("llama-3.1-70b", 13383.3 / 7560.9), ("llama-3.1-405b", 3867.7 / 2174.1)):
        assert value(model, 128) / value(model, 2048) == pytest.approx(ratio)
        assert 1.7 < ratio < 1.85 and ratio * (4096 / 2176) > 3.3


def test_the_mi300x_entry_is_fitted_on_train_rows_only_and_the_instinct_family_inherits_it(rows):
    # benchmarks/data/fit_mi300x_vllm.py: the GEMM curve (with an all-reduce term as a nuisance for the eager
    # runs' host launches) on dstack's 38 rows, then allreduce_overhead_s on Oracle's 9 (docs/validation.md).
    prof = profile_for("vLLM")
    entry = prof.entries[KEY]
    assert set(entry) == {"gemm_eff_max", "gemm_tokens_half", "allreduce_overhead_s"}
    source = prof.sources[KEY]
    assert "dstack-llama405b-mi300x" in source and "oracle-blog-llama405b-mi300x" in source
    assert "rocm-vllm-dev-docker" not in source and "deepseek" not in source
    for dev in ("MI325X", "MI355X"):                    # the family rule (sweepkit/catalogue/families.toml)
        assert {k: prof.fields(dev, "fp8")[k] for k in entry} == entry
    slice_rows = [m for m in framework_rows(rows, "vLLM") if (m.device, m.compute_format) == KEY]
    train = [m for m in slice_rows if m.split == "train" and fittable(m)]
    assert (len(train), {m.source for m in train}) == (38, {"dstack-llama405b-mi300x"})
    # sum of squared log errors on the 38 rows: 24.0 with the default fields, 0.78 fitted
    bare = dataclasses.replace(prof, entries={k: v for k, v in prof.entries.items() if k != KEY})
    default = slice_loss(train, bare, KEY, "gemm_eff_max", prof.default["gemm_eff_max"])
    fitted = slice_loss(train, prof, KEY, "gemm_eff_max", entry["gemm_eff_max"])
    assert default == pytest.approx(24.0, abs=0.1) and fitted == pytest.approx(0.78, abs=0.01)


def test_oracle_batch_latency_of_the_fit_script_under_the_fitted_entry(rows):
    # Oracle's batch of 1 (128 in / 128 out, 3.53 s) and of 256 (measured 11.97 s) priced by the fit script's
    # step sums with the shipped entry: stage 2 fitted allreduce_overhead_s on these rows
    mod = load_script("benchmarks/data/fit_mi300x_vllm.py")
    prof = profile_for("vLLM")
    one = next(m for m in rows if m.source == "oracle-blog-llama405b-mi300x" and m.concurrency == 1)
    assert one.value_si == pytest.approx(3.53)
    t = mod.batch_latency_s(one, prof.fields(*KEY), prof.token_budget)
    assert abs(t / one.value_si - 1.0) < 0.05
    no_overhead = mod.batch_latency_s(one, {**prof.fields(*KEY), "allreduce_overhead_s": 0.0}, prof.token_budget)
    # 2 x 126 all-reduces a step, 127 decode steps and the prompt's pass: 128 x 252 x t_ar seconds more
    assert t - no_overhead == pytest.approx(128 * 252 * prof.fields(*KEY)["allreduce_overhead_s"], rel=1e-6)
