"""The max-throughput steady state, the profile fit (recovery of known efficiencies), framework profiles."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import hypothesis
import hypothesis.strategies as st
import pytest
from click.testing import CliRunner

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import load_profile, packaged_profile, profile_for
from sweepkit.cli import main
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays
from sweepkit.costmodel.passes import Work
from sweepkit.costmodel.steps import pass_cost
from sweepkit.validation import Measurement, load_measurements, parse_measurements
from sweepkit.validation.framework_fit import calibrate_framework, fittable, without_unidentified
from sweepkit.errors import InputError
from sweepkit.validation.profile_fit import identified_fields, robust
from sweepkit.validation.profiles import REFERENCE, profile_values, row_profile
from sweepkit.validation.steady import measured_throughput, reference_throughput, running
from sweepkit.validation.steady_rows import row_inputs

TRUE = {("H100", "fp8"): dict(gemm_eff_max=0.65, gemm_tokens_half=200.0, moe_eff_max=0.5, moe_tokens_half=100.0,
                              attn_prefill_eff=0.6, weight_bw_eff=0.82, kv_bw_eff=0.7, link_eff=0.9,
                              allreduce_overhead_s=5e-6, tp_loss=0.03)}
OVERHEADS = dict(step_overhead_s=1.0e-3, token_overhead_s=5e-7)
PAIRS = ((128, 128), (128, 2048), (1000, 1000), (2048, 128), (5000, 500), (500, 2000))


def _row(model, tp, isl, osl, value=1.0, framework="TensorRT-LLM", split="train", source="s") -> Measurement:
    return Measurement(source=source, device="H100", model=model, metric="max_output_throughput", value=value,
                       unit="tok/s", value_si=value, row=1, framework=framework, tp=tp, gpus=tp, weight_format="fp8",
                       kv_format="fp8", compute_format="fp8", input_tokens=isl, output_tokens=osl, split=split)


def test_running_requests_are_the_tightest_of_batch_kv_and_token_budget():
    # Llama-3.1-8B fp8 on one H100 under TensorRT-LLM's rule: 0.9 x (80 GB - weights) / 65,536 B per position.
    m = get_model("llama-3.1-8b")
    cap = 0.9 * (80e9 - m.resident_params * 1.0) / m.kv_bytes_per_token(1.0)
    with jax.enable_x64(True):
        rows = row_inputs([_row("llama-3.1-8b", 1, i, o) for i, o in ((1000, 1000), (128, 128), (5000, 500))],
                          1024, 8192)
        n = np.asarray(jax.vmap(running)(rows))
    assert n == pytest.approx([min(1024, cap / 2000, 8192 / 2), 1024, min(cap / 5500, 8192 / 11)], rel=1e-9)


def test_reference_steady_state_is_one_roofline_pass_over_its_mean_step():
    # n rows at I + O/2 context, n/O prompts of I tokens: throughput = n / t_pass (pass_cost, reference constants).
    m = _row("llama-3.1-8b", 1, 1000, 1000, framework="vLLM")   # the engine's KV rule (f_free = 0)
    with jax.enable_x64(True):
        rows = row_inputs([m], 1024, 8192)
        got = float(jax.vmap(reference_throughput)(rows)[0])
        n = float(jax.vmap(running)(rows)[0])
        f = jnp.float64
        work = Work(f(n + n * 1000 / 1000), f(2 * (n * 1500 + n) + n / 1000 * 1000 * 1001),
                    f(n * 1500 + n + n / 1000 * 1000))
        t = float(pass_cost(work, model_arrays(get_model("llama-3.1-8b"), f), device_arrays(get_device("H100"), f),
                            f(1), f(1), f(1), f(2)).t_s)
    assert got == pytest.approx(n / t, rel=1e-9)


def _synthetic(pairs=PAIRS):
    rows = [_row(model, tp, i, o) for model, tps in (("llama-3.1-8b", (1, 2)), ("llama-3.1-70b", (2, 4, 8)),
                                                     ("mixtral-8x7b", (1, 4)))
            for tp in tps for i, o in pairs]
    truth = dataclasses.replace(packaged_profile(), entries=TRUE, overheads=OVERHEADS)
    with jax.enable_x64(True):
        eff = efficiency_arrays([truth.fields("H100", "fp8")] * len(rows))
        values = np.asarray(jax.vmap(measured_throughput)(row_inputs(rows, 1024, 8192), eff))
    return [dataclasses.replace(m, value=float(v), value_si=float(v), row=k + 1)
            for k, (m, v) in enumerate(zip(rows, values))]


def test_check_rows_stay_out_of_the_fit_even_with_all_rows():
    """Rows of split ``check`` (independent checks) are never fitted on: ten times their true value, they
    leave the fit of the other rows, every split included, exact."""
    rows = [dataclasses.replace(m, split="check", value=10 * m.value, value_si=10 * m.value_si)
            if (m.input_tokens, m.output_tokens) == (500, 2000) else m for m in _synthetic()]
    fit = calibrate_framework(rows, "TensorRT-LLM", file="synthetic.csv", sha256="-", all_rows=True)
    assert fit.train and all(m.split != "check" for m in fit.train)
    assert len(fit.train) == sum(m.split != "check" for m in rows)
    fitted = np.array([m.split != "check" for m in fit.rows])
    assert np.max(np.abs(fit.after_pct[fitted])) < 1.0
    assert np.all(fit.after_pct[~fitted] < -85.0)                      # the checks measure 10x: -90 %


def test_fit_recovers_generated_rows_and_predicts_held_out_pairs():
    rows = _synthetic()
    train = [dataclasses.replace(m, split="test" if (m.input_tokens, m.output_tokens) == (500, 2000) else "train")
             for m in rows]
    fit = calibrate_framework(train, "TensorRT-LLM", file="synthetic.csv", sha256="-")
    assert np.median(np.abs(fit.before_pct)) > 10.0                    # the seed is far from the truth
    assert np.max(np.abs(fit.after_pct)) < 1.0                         # held-out pair included
    got = fit.profile.fields("H100", "fp8")
    for k in ("gemm_eff_max", "gemm_tokens_half", "weight_bw_eff", "kv_bw_eff"):
        assert got[k] == pytest.approx(TRUE[("H100", "fp8")][k], rel=0.05), k
    # tp_loss, link_eff and allreduce_overhead_s all stretch tp > 1 steps: only their sum is pinned down.
    assert got["tp_loss"] == pytest.approx(0.03, rel=0.25)
    # An unfitted slice keeps the start's entry (the seed's B200 FP4 GEMM fields, from measured kernel tables)
    # and inherits the rest from its family's fitted entry (B200 -> Hopper), never another vendor's.
    # Its MoE efficiency is its own dense one times the family's MoE / dense ratio (families.toml).
    hopper, seed_b200 = fit.profile.fields("H100", "fp8"), packaged_profile().fields("B200", "fp4")
    ratio = hopper["moe_eff_max"] / hopper["gemm_eff_max"]
    got_b200 = fit.profile.fields("B200", "fp4")
    assert got_b200["moe_eff_max"] == pytest.approx(seed_b200["gemm_eff_max"] * ratio)
    assert got_b200 == hopper | {"gemm_eff_max": seed_b200["gemm_eff_max"], "gemm_tokens_half":
                                 seed_b200["gemm_tokens_half"], "moe_eff_max": got_b200["moe_eff_max"]}
    assert fit.profile.fields("MI300X", "fp8") == packaged_profile().fields("MI300X", "fp8") | fit.profile.overheads


def test_fields_no_training_row_pins_down_are_inherited_and_leave_every_row_unchanged():
    # At tp = 1 no all-reduce runs (its term is exactly 0), and a dense model runs no grouped MoE GEMM: those
    # fields' columns of d log model / d theta are zero, where the GEMM and KV fields' are not.
    h200 = {**TRUE[("H100", "fp8")], "link_eff": 0.5, "allreduce_overhead_s": 3e-5, "tp_loss": 0.2}
    prof = dataclasses.replace(packaged_profile(), entries={**TRUE, ("H200", "fp8"): h200}, overheads=OVERHEADS)
    rows = [dataclasses.replace(_row("llama-3.1-8b", tp, i, o), device=dev)
            for dev, tps in (("H100", (1, 2)), ("H200", (1,))) for tp in tps for i, o in PAIRS]
    keys = [(m.device, m.compute_format) for m in rows]
    with jax.enable_x64(True):
        ident = identified_fields(row_inputs(rows, 1024, 8192), keys, prof)
    assert {"link_eff", "allreduce_overhead_s", "tp_loss", "moe_eff_max", "moe_tokens_half"}.isdisjoint(
        ident[("H200", "fp8")])
    assert {"gemm_eff_max", "kv_bw_eff"} <= ident[("H200", "fp8")]
    assert {"link_eff", "tp_loss"} <= ident[("H100", "fp8")]            # its tp = 2 rows all-reduce
    pruned = without_unidentified(prof, rows)
    # H200's unpinned link fields are now its family's fitted H100 values; every training row is unchanged.
    for k in ("link_eff", "allreduce_overhead_s", "tp_loss"):
        assert k not in pruned.entries[("H200", "fp8")]
        assert pruned.fields("H200", "fp8")[k] == TRUE[("H100", "fp8")][k]
    assert {"link_eff", "tp_loss", "gemm_eff_max", "kv_bw_eff"} <= pruned.entries[("H100", "fp8")].keys()
    np.testing.assert_allclose(profile_values(rows, [pruned] * len(rows)), profile_values(rows, [prof] * len(rows)),
                               rtol=1e-9)


def test_the_shipped_tensorrt_llm_profile_prices_h200_weight_streaming_as_h100s_fit():
    # Its H200 FP8 max-throughput rows never bind on weight streaming at the seed's 0.8 or at H100's fitted
    # value, so the entry leaves the field to the family (families.toml: H200 -> H100 FP8), BF16 rows too.
    p = profile_for("TensorRT-LLM")
    assert "weight_bw_eff" not in p.entries[("H200", "fp8")]
    h100 = p.entries[("H100", "fp8")]["weight_bw_eff"]
    assert p.fields("H200", "fp8")["weight_bw_eff"] == p.fields("H200", "bf16")["weight_bw_eff"] == h100


def test_a_profile_prices_only_its_framework_and_never_fits_excluded_sources():
    trt = dataclasses.replace(packaged_profile(), framework="TensorRT-LLM")
    assert row_profile(_row("llama-3.1-8b", 1, 128, 128), trt) is trt
    # Another framework's row keeps its own shipped profile, or the serving engine without one.
    assert row_profile(_row("llama-3.1-8b", 1, 128, 128, framework="vLLM"), trt) is profile_for("vLLM")
    assert row_profile(_row("llama-3.1-8b", 1, 128, 128, framework="LMDeploy"), trt) is None
    assert row_profile(_row("llama-3.1-8b", 1, 128, 128), REFERENCE) is None
    assert row_profile(_row("llama-3.1-8b", 1, 128, 128, framework="LMDeploy"), None) is None
    assert not fittable(_row("llama-3.1-8b", 1, 128, 128, split="check"))
    for split in ("train", "test"):
        assert fittable(_row("llama-3.1-8b", 1, 128, 128, split=split))
    # The packaged independent checks (TensorRT-LLM 1.0's H100 rows, MLPerf v5.0's, and the DeepSeek-R1 MI300X
    # rows measured on pre-release staging containers) are marked so.
    points, _, _ = load_measurements()
    checks = [m for m in points if m.split == "check"]
    staging = [m for m in checks if "-staging" in m.framework]
    assert (len(checks) - len(staging), len(staging)) == (9, 81) and not any(map(fittable, checks))


HEAD = ("source,device,model,metric,value,unit,framework,tp,gpus,weight_format,kv_format,compute_format,"
        "input_tokens,output_tokens,split\n")


def test_calibrate_framework_writes_a_profile_that_validate_reads(tmp_path):
    rows = _synthetic()
    csv = tmp_path / "m.csv"
    csv.write_text(HEAD + "".join(f"syn,H100,{m.model},max_output_throughput,{m.value!r},tok/s,TensorRT-LLM,{m.tp},"
                                  f"{m.gpus},fp8,fp8,fp8,{m.input_tokens},{m.output_tokens},train\n" for m in rows)
                   + "syn,H100,llama-3.1-8b,max_output_throughput,1000,tok/s,LMDeploy,1,1,fp8,fp8,fp8,128,128,test\n")
    out = tmp_path / "trt.toml"
    res = CliRunner().invoke(main, ["calibrate", str(csv), "--framework", "TensorRT-LLM", "--out", str(out),
                                    "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    table = json.loads(res.stdout)
    assert [r["slice"] for r in table] == ["H100 dense fp8", "H100 moe fp8"]
    assert all(r["abs_error_after_pct"] < 1.0 < r["abs_error_before_pct"] for r in table)
    profile = load_profile(out)
    assert profile.framework == "TensorRT-LLM" and "m.csv" in profile.source
    res = CliRunner().invoke(main, ["validate", "--measurements", str(csv), "--profile", str(out), "--no-serving",
                                    "--warehouse", str(tmp_path / "wh"), "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert all(abs(r["error_pct"]) < 1.0 for r in got[:-1])
    assert got[-1]["status"] == "not simulated (--no-serving)"          # LMDeploy: no profile


@pytest.mark.parametrize("args, message", [
    (["--framework", "SGLang"], "max_output_throughput rows with framework 'SGLang' and split = train"),
    ([], "calibrate needs --device DEVICE"),
])
def test_calibrate_without_rows_or_target_is_one_line(tmp_path, args, message):
    csv = tmp_path / "m.csv"
    csv.write_text(HEAD + "syn,H100,llama-3.1-8b,max_output_throughput,1000,tok/s,vLLM,1,1,fp8,fp8,fp8,128,128,train\n")
    res = CliRunner().invoke(main, ["calibrate", str(csv), *args, "--out", str(tmp_path / "p.toml")])
    assert res.exit_code == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [["--framework", "TensorRT-LLM"], ["--device", "H100"]])
def test_calibrate_refuses_an_unwritable_out_before_fitting(tmp_path, args):
    csv = tmp_path / "m.csv"
    csv.write_text(HEAD + "syn,H100,llama-3.1-8b,max_output_throughput,1000,tok/s,vLLM,1,1,fp8,fp8,fp8,128,128,train\n")
    out = tmp_path / "no-such-folder" / "p.toml"
    res = CliRunner().invoke(main, ["calibrate", str(csv), *args, "--out", str(out)])
    assert res.exit_code == 2 and "expected a file in an existing folder" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not out.parent.exists()


def test_validate_with_a_bad_profile_file_is_one_line(tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text("[profile]\nname = 'x'\n[framework]\nstep_overhead_s = 0.001\n")
    csv = tmp_path / "m.csv"
    csv.write_text(parse_free := HEAD + "syn,H100,llama-3.1-8b,max_output_throughput,1000,tok/s,vLLM,1,1,fp8,fp8,"
                                        "fp8,128,128,test\n")
    assert parse_measurements(parse_free, "m.csv")
    res = CliRunner().invoke(main, ["validate", "--measurements", str(csv), "--profile", str(bad), "--no-serving",
                                    "--warehouse", str(tmp_path / "wh")])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [f"Error: {bad} [framework]: missing field token_overhead_s (a "
                                               "profile's table needs step_overhead_s, token_overhead_s)"]


def test_cauchy_residuals_square_to_the_cauchy_loss_and_least_squares_stay_as_they_are():
    # rho(z) = c^2 log(1 + (z / c)^2) (Triggs et al. 2000, sec. 3.3): at z = c it is c^2 log 2.
    z = np.array([-40.0, -3.0, -1e-7, 0.0, 1e-7, 0.5, 3.0, 40.0])
    with jax.enable_x64(True):
        got = np.asarray(robust(jnp.asarray(z, jnp.float64), "cauchy", 3.0))
        assert np.asarray(robust(jnp.asarray(z, jnp.float64), "l2")) == pytest.approx(z)
    assert got ** 2 == pytest.approx(9.0 * np.log1p((z / 3.0) ** 2), rel=1e-12, abs=1e-20)
    assert np.sign(got) == pytest.approx(np.sign(z))


@hypothesis.given(st.floats(-1e3, 1e3, allow_nan=False), st.floats(0.5, 10.0))
@hypothesis.settings(deadline=None, max_examples=60)
def test_cauchy_residuals_never_exceed_the_least_squares_ones_and_grow_with_the_misfit(z, c):
    with jax.enable_x64(True):
        r = float(robust(jnp.float64(z), "cauchy", c))
        r_more = float(robust(jnp.float64(z * 1.5 + np.sign(z)), "cauchy", c))
    assert abs(r) <= abs(z) * (1 + 1e-12)
    assert abs(r_more) >= abs(r)


def test_a_cauchy_fit_recovers_the_fields_that_a_few_slow_rows_pull_a_least_squares_fit_off():
    """Three of 42 generated rows measured 3.3 x slower than the model (a benchmark whose front end, not
    the GPU, sets the pace): least squares moves every field toward them (clean rows up to 25 % off, GEMM
    efficiency at 0.69 of the truth); under Cauchy's loss the clean rows fit within 1 % and the fields
    within 5 % of the truth."""
    slow = lambda m: m.model == "llama-3.1-70b" and (m.input_tokens, m.output_tokens) == (2048, 128)  # noqa: E731
    rows = [dataclasses.replace(m, value=0.3 * m.value, value_si=0.3 * m.value_si) if slow(m) else m
            for m in _synthetic()]
    out = np.array([slow(m) for m in rows])
    l2 = calibrate_framework(rows, "TensorRT-LLM", file="synthetic.csv", sha256="-")
    cauchy = calibrate_framework(rows, "TensorRT-LLM", file="synthetic.csv", sha256="-", loss="cauchy")
    assert out.sum() == 3 and np.max(np.abs(l2.after_pct[~out])) > 10.0
    assert np.max(np.abs(cauchy.after_pct[~out])) < 2.0
    assert np.all(cauchy.after_pct[out] > 200.0)                        # the slow rows are left as outliers
    got, true = cauchy.profile.fields("H100", "fp8"), TRUE[("H100", "fp8")]
    for k in ("gemm_eff_max", "weight_bw_eff", "kv_bw_eff", "attn_prefill_eff"):
        assert got[k] == pytest.approx(true[k], rel=0.05), k
    assert abs(l2.profile.fields("H100", "fp8")["gemm_eff_max"] / true["gemm_eff_max"] - 1) > 0.2


def _small_csv(tmp_path):
    """A measurement CSV of 14 generated TensorRT-LLM rows (two length pairs), split train."""
    csv = tmp_path / "m.csv"
    csv.write_text(HEAD + "".join(f"syn,H100,{m.model},max_output_throughput,{m.value!r},tok/s,TensorRT-LLM,{m.tp},"
                                  f"{m.gpus},fp8,fp8,fp8,{m.input_tokens},{m.output_tokens},train\n"
                                  for m in _synthetic(((1000, 1000), (2048, 128)))))
    return csv


def test_calibrate_loss_option_is_written_into_the_lineage_and_refused_for_a_device_fit(tmp_path):
    csv = _small_csv(tmp_path)
    out = tmp_path / "trt.toml"
    res = CliRunner().invoke(main, ["calibrate", str(csv), "--framework", "TensorRT-LLM", "--loss", "cauchy",
                                    "--out", str(out), "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "--loss cauchy" in out.read_text().splitlines()[0]
    res = CliRunner().invoke(main, ["calibrate", str(csv), "--device", "H100", "--loss", "cauchy",
                                    "--out", str(tmp_path / "d.toml")])
    assert res.exit_code == 2 and "--loss cauchy applies to a framework's profile" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    with pytest.raises(InputError, match="loss 'huber' is not one of l2, cauchy"):
        calibrate_framework(_synthetic(((1000, 1000),)), "TensorRT-LLM", file="s.csv", sha256="-", loss="huber")


def test_held_fields_stay_at_their_values_while_the_rest_is_fitted():
    """A field held at a measured kernel table's value is data, not a parameter: held at the truth, the fit
    recovers the rest; held off it, it stays exactly there and the rows cannot all be fitted."""
    rows = _synthetic(((128, 2048), (1000, 1000), (2048, 128), (5000, 500)))
    at_truth = calibrate_framework(rows, "TensorRT-LLM", file="s.csv", sha256="-",
                                   held={("H100", "fp8"): {"gemm_eff_max": 0.65}})
    got = at_truth.profile.fields("H100", "fp8")
    assert got["gemm_eff_max"] == 0.65 and np.max(np.abs(at_truth.after_pct)) < 1.0
    assert got["weight_bw_eff"] == pytest.approx(TRUE[("H100", "fp8")]["weight_bw_eff"], rel=0.05)
    off = calibrate_framework(rows, "TensorRT-LLM", file="s.csv", sha256="-",
                              held={("H100", "fp8"): {"gemm_eff_max": 0.3, "gemm_tokens_half": 50.0}})
    held = off.profile.fields("H100", "fp8")
    assert (held["gemm_eff_max"], held["gemm_tokens_half"]) == (0.3, 50.0)
    assert np.max(np.abs(off.after_pct)) > 5.0
    # a held field of a slice no row runs on is written too, over the start's entry for it
    other = calibrate_framework(rows, "TensorRT-LLM", file="s.csv", sha256="-",
                                held={("B200", "fp4"): {"gemm_eff_max": 0.5}})
    assert other.profile.fields("B200", "fp4")["gemm_eff_max"] == 0.5
    assert other.profile.fields("B200", "fp4")["gemm_tokens_half"] == \
        packaged_profile().fields("B200", "fp4")["gemm_tokens_half"]


def test_calibrate_hold_keeps_a_field_at_its_value_and_bad_holds_are_one_line(tmp_path):
    csv = _small_csv(tmp_path)
    out = tmp_path / "trt.toml"
    res = CliRunner().invoke(main, ["calibrate", str(csv), "--framework", "TensorRT-LLM", "--hold",
                                    "H100:fp8:gemm_eff_max=0.65", "--out", str(out), "--format", "json"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "--hold H100:fp8:gemm_eff_max=0.65" in out.read_text().splitlines()[0]
    assert load_profile(out).fields("H100", "fp8")["gemm_eff_max"] == 0.65
    for args, message in ((["--framework", "TensorRT-LLM", "--hold", "H100:fp8:gemm=0.6"], "field 'gemm' is not one of"),
                          (["--framework", "TensorRT-LLM", "--hold", "H100:fp8:gemm_eff_max=1.5"], "outside its range"),
                          (["--framework", "TensorRT-LLM", "--hold", "X9:fp8:gemm_eff_max=0.5"], "device = 'X9'"),
                          (["--framework", "TensorRT-LLM", "--hold", "H100:fp8"], "expected DEVICE:FORMAT:FIELD=VALUE"),
                          (["--device", "H100", "--hold", "H100:fp8:gemm_eff_max=0.5"], "--hold applies to")):
        res = CliRunner().invoke(main, ["calibrate", str(csv), *args, "--out", str(tmp_path / "p.toml")])
        assert res.exit_code == 2 and message in res.stderr, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1
