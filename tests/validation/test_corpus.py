"""The packaged measured corpus: what it holds, what it leaves out, and how its names reach the catalogue."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from support.scripts import load_script
from sweepkit.errors import InputError
from sweepkit.validation import load_measurements, parse_measurements, status
from sweepkit.validation.aliases import device_name, model_name
from sweepkit.validation.measurements import CORPUS, public_text


def _builder():
    return load_script("benchmarks/data/build_measured.py")


@pytest.mark.parametrize("written, name", [
    ("meta-llama/Llama-3.1-70B", "llama-3.1-70b"), ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.1-70b"),     # same config.json shapes as 3.1-70B
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"), ("meta-llama/Llama-2-70b-hf", "llama-2-70b"),
    ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"), ("deepseek-ai/DeepSeek-R1-0528", "deepseek-v3"),
    ("llama-3.1-8b", "llama-3.1-8b"), ("acme/unknown-9b", None),
])
def test_model_ids_resolve_to_catalogue_names(written, name):
    assert model_name(written) == name


@pytest.mark.parametrize("written, name", [
    ("H100", "H100"), ("H100 SXM (80GB HBM3)", "H100"), ("H200 (141GB HBM3; doc says 131GB)", "H200"),
    ("A100-SXM4-80GB", "A100"), ("A100 SXM 80GB", "A100"), ("B200", "B200"), ("TPU v9", None),
])
def test_device_names_resolve_to_catalogue_names(written, name):
    assert device_name(written) == name


def test_corpus_rows_cite_public_sources_and_leave_out_later_releases():
    rows = list(csv.DictReader(io.StringIO(public_text(CORPUS))))
    assert len(rows) > 1000
    for r in rows:
        assert r["source"] and r["url"].startswith("https://"), r
        text = (r["source"] + r["framework"]).lower()
        assert not re.search(r"mlperf.*v5", text) and "inferencex" not in text
        assert not any(f"tensorrt-llm v1.{k}" in text for k in range(10)), r["framework"]
        assert "/work/" not in ",".join(r.values())
    assert {r["split"] for r in rows} == {"train", "test", "check"}
    assert {r["split"] for r in rows if "-staging" in r["framework"]} == {"check"}
    assert {r["split"] for r in rows if r["source"].startswith("mlperf-inference-v4")} == {"test"}
    v17 = {r["split"] for r in rows if r["source"] == "trtllm-perf-overview-v0.17"}
    v20 = {r["split"] for r in rows if r["source"] == "trtllm-perf-overview-v0.20"}
    assert v17 == {"train"} and v20 == {"test"}


def test_corpus_parses_and_unknown_names_stay_as_not_modelled():
    points, _, _ = load_measurements()
    reasons = {status(m) for m in points}
    assert "not modelled: unknown model deepseek-ai/DeepSeek-Coder-V2-Instruct" in reasons
    assert "not modelled: unknown device RTX-3090" in reasons
    assert any(m.model == "llama-3.1-70b" and m.model_as_written == "meta-llama/Llama-3.1-70B" for m in points)


SHARED_HEAD = ("source,url,framework,device,gpus,tp,pp,ep,dp,model,weight_format,kv_format,input_tokens,"
               "output_tokens,concurrency,request_rate,scenario,metric,value,unit,percentile,lever,pair_id,notes\n")


def test_builder_converts_units_names_and_cells_and_drops_later_releases(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text(SHARED_HEAD + "\n".join([
        'a,github.com/x/y,TensorRT-LLM v0.14,H100 SXM (80GB HBM3),4,4,,,,meta-llama/Llama-3.1-70B,BF16,,467,256,,'
        '"inf (all prompts at once)","online serving, 500 requests at fixed QPS",total_throughput,1406,'
        '"tok/s (input+output, total across 4 GPUs)",,,,',
        'b,arXiv 2503.01840 (EAGLE-3) Table 3,SGLang,H100 (80GB),,,,,,deepseek-ai/DeepSeek-V3,FP8 (native),,'
        '"~20000 (+-15%)",,,,decode,output_throughput,22282,output tok/s per node (8 GPUs),,,,',
        'c,github.com/x/z,TensorRT-LLM v1.2.0rc1 (trtllm-serve),H100,1,1,,,,meta-llama/Llama-3.1-8B,FP8,,1,1,,,'
        ',tpot,3,ms,mean,,,',
        'd,github.com/x/w,vLLM,A100 80GB,1,1,,,,Qwen/Qwen3-8B,FP8,,128,4,,1,,tpot,3,ms,mean,'
        'cfg:with,P1,']) + "\n")
    out = tmp_path / "out.csv"
    assert _builder().main([str(src), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["source"] for r in rows] == ["a", "b", "d"]          # the TensorRT-LLM 1.2 row is left out
    a, b, d = rows
    assert (a["device"], a["unit"], a["gpus"], a["request_rate"], a["requests"]) == ("H100", "tok/s", "4", "inf",
                                                                                      "500")
    assert a["url"] == "https://github.com/x/y" and a["value"] == "1406"
    assert (b["unit"], float(b["value"]), b["input_tokens"]) == ("tok/s/gpu", 22282 / 8, "20000")
    assert b["url"] == "https://arxiv.org/abs/2503.01840" and "(computed)" in b["notes"]
    assert (b["weight_format"], b["compute_format"]) == ("fp8", "fp8")
    assert (d["weight_format"], d["compute_format"]) == ("fp8", "bf16")  # A100 has no FP8 tensor cores
    assert (d["lever"], d["pair_id"], d["percentile"]) == ("cfg:with", "P1", "mean")
    parsed = parse_measurements(out.read_text(), "out.csv")
    assert parsed[0].value_si == 1406 and parsed[0].request_rate == float("inf")
    assert parsed[1].value_si == pytest.approx(22282 / 8)


def test_builder_gives_gpustack_bursts_their_prompt_counts(tmp_path):
    # GPUStack's performance-lab pages print "Successful requests" 500 for the 2,000-token random case
    src = tmp_path / "in.csv"
    row = ('gpustack-performance-lab,github.com/g/p,vLLM v0.11.0,H100 SXM,1,1,,,,Qwen/Qwen3-14B,BF16,,{isl},{osl},,'
           '"inf (all prompts at once)",burst,tpot,3,ms,mean,,,"dataset case \'{case}\'; flags: defaults"')
    src.write_text(SHARED_HEAD + "\n".join([row.format(isl=2000, osl=100, case="Medium Prompt"),
                                             row.format(isl=32000, osl=100, case="Very Long Prompt"),
                                             row.format(isl=2000, osl=100, case="Other")]) + "\n")
    out = tmp_path / "out.csv"
    assert _builder().main([str(src), "--out", str(out)]) == 0
    assert [r["requests"] for r in csv.DictReader(out.open())] == ["500", "100", ""]


def test_a_paired_row_needs_its_side():
    head = "source,device,model,metric,value,unit,lever,pair_id\n"
    with pytest.raises(InputError) as exc:
        parse_measurements(head + "s,H100,llama-3.1-8b,speedup,2,x,fp8 kv,P1\n", "f.csv")
    assert str(exc.value).startswith("f.csv row 1 (line 2): lever = 'fp8 kv' is not allowed; expected a lever ending")


def test_builder_keeps_a_prefill_node_test_that_states_its_tokens_per_gpu_after_the_other_rows(tmp_path):
    # LMSYS's EP32 prefill pair: 16,384 tokens per device of 4,096-token prompts, input tok/s per node of 8 GPUs;
    # its 1K-4K rows state no tokens per device and stay out (input-token throughput alone).
    src = tmp_path / "in.csv"
    node = ('lmsys,github.com/l/b,SGLang (TBO),"H100 (80GB), 8 per node",32,,,32,,deepseek-ai/DeepSeek-V3,FP8,,'
            '{isl},,{conc},,prefill-only,total_throughput,{v},input tok/s per node (8 GPUs),,,,')
    src.write_text(SHARED_HEAD + "\n".join([
        node.format(isl=4096, conc="16384 tokens per device", v=50302),
        node.format(isl=1000, conc="", v=57674),
        'b,github.com/x/w,vLLM,A100 80GB,1,1,,,,Qwen/Qwen3-8B,FP8,,128,4,,1,,tpot,3,ms,mean,,,']) + "\n")
    out = tmp_path / "out.csv"
    assert _builder().main([str(src), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["source"] for r in rows] == ["b", "lmsys"]          # the node test after the rest, the 1K row out
    r = rows[1]
    assert (r["metric"], r["unit"], r["concurrency"], r["output_tokens"], r["ep"]) == (
        "total_throughput", "tok/s/gpu", "4", "", "32")
    assert float(r["value"]) == pytest.approx(50302 / 8) and "4 prompts of 4096 per GPU" in r["notes"]


def test_builder_appends_each_input_after_the_previous_and_copies_draft_and_gamma(tmp_path):
    # the shared base file first (its prefill node test last among its rows), then a second file whose rows
    # carry draft / gamma columns (benchmarks/data/measurements-blackwell-moe.csv); exclusions hold in both
    node = ('lmsys,github.com/l/b,SGLang (TBO),"H100 (80GB), 8 per node",32,,,32,,deepseek-ai/DeepSeek-V3,FP8,,'
            '4096,,16384 tokens per device,,prefill-only,total_throughput,50302,input tok/s per node (8 GPUs),,,,')
    base = tmp_path / "base.csv"
    base.write_text(SHARED_HEAD + node + "\n" +
                    'b,github.com/x/w,vLLM,A100 80GB,1,1,,,,Qwen/Qwen3-8B,FP8,,128,4,,1,,tpot,3,ms,mean,,,\n')
    extra = tmp_path / "extra.csv"
    extra.write_text(SHARED_HEAD.rstrip("\n") + ",draft,gamma\n" + "\n".join([
        'm,github.com/x/m,TensorRT-LLM (PyTorch backend),B200,8,8,,2,,deepseek-ai/DeepSeek-R1,NVFP4,BF16,1024,2048,1,,'
        'batch 1,output_throughput,274.4168,tok/s (total across 8 GPUs),,,,MTP,mtp,3',
        'n,github.com/x/n,TensorRT-LLM v1.0 (trtllm-bench),B200,8,8,,8,8,deepseek-ai/DeepSeek-R1,NVFP4,FP8,1024,2048,'
        '64,,x,output_throughput,1,tok/s (total across 8 GPUs),,,,,,']) + "\n")
    out = tmp_path / "out.csv"
    assert _builder().main([str(base), str(extra), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["source"] for r in rows] == ["b", "lmsys", "m"]     # TensorRT-LLM 1.0 left out of the second file
    assert (rows[2]["draft"], rows[2]["gamma"], rows[2]["ep"], rows[2]["compute_format"]) == ("mtp", "3", "2", "fp4")
    assert rows[0]["draft"] == "" and rows[0]["split"] in ("train", "test")
    parsed = parse_measurements(out.read_text(), "out.csv")
    assert (parsed[2].draft, parsed[2].gamma, parsed[2].value_si) == ("mtp", 3, pytest.approx(274.4168))
    one = tmp_path / "one.csv"
    assert _builder().main([str(base), "--out", str(one)]) == 0
    assert out.read_text().startswith(one.read_text())            # the first file's rows and row numbers stay


def test_builder_writes_several_inputs_in_order_and_maps_amd_devices(tmp_path):
    # The first input stays a prefix of the output (its node test after its rows), so the row numbers fitted
    # profiles cite stay; MI325X is CDNA 3 like MI300X: FP8 matrix cores (AMD MI325X datasheet, 2,614.9 TF FP8).
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    node = ('lmsys,github.com/l/b,SGLang,"H100 (80GB), 8 per node",32,,,32,,deepseek-ai/DeepSeek-V3,FP8,,4096,,'
            '16384 tokens per device,,prefill-only,total_throughput,50302,input tok/s per node (8 GPUs),,,,')
    first.write_text(SHARED_HEAD + node + "\n" + 'a,github.com/x/w,vLLM,H100,1,1,,,,Qwen/Qwen3-8B,FP8,,128,4,,1,,'
                     'tpot,3,ms,mean,,,\n')
    second.write_text(SHARED_HEAD + "\n".join(
        f'amd,github.com/x/v,vLLM (ROCm),"{dev}",8,8,,,,meta-llama/Llama-3.1-70B-Instruct,FP8,FP8,128,2048,,inf,'
        f'"offline, 1500 requests",max_output_throughput,9000,tok/s (total across 8 GPUs),,,,'
        for dev in ("MI325X (256GB HBM3E)", "MI300X (192GB HBM3)")) + "\n"
        + 'amd,github.com/x/v,"SGLang 0.4.2 (rocm/sglang-staging:20250212)",MI300X,8,8,,,,deepseek-ai/DeepSeek-R1,'
        'FP8,,3200,800,4,,"500 requests",tpot,35,ms,mean,,,\n')
    out = tmp_path / "out.csv"
    assert _builder().main([str(first), str(second), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["source"] for r in rows] == ["a", "lmsys", "amd", "amd", "amd"]
    assert [(r["device"], r["compute_format"], r["requests"]) for r in rows[2:4]] == [
        ("MI325X", "fp8", "1500"), ("MI300X", "fp8", "1500")]
    assert rows[4]["split"] == "check"                    # a pre-release staging container: no fit uses it
    only_first = tmp_path / "first.csv"
    assert _builder().main([str(first), "--out", str(only_first)]) == 0
    assert out.read_text().startswith(only_first.read_text())


def test_builder_copies_an_input_in_sweepkits_own_format_and_checks_its_rows(tmp_path):
    """benchmarks/data/measurements-mlperf-v4.csv is such an input: its rows arrive as written (split included),
    an MLPerf v5.x row is left out, and a bad row stops the build with the format's one-line error."""
    own = tmp_path / "own.csv"
    mlperf = (Path(__file__).resolve().parents[2] / "benchmarks/data/measurements-mlperf-v4.csv").read_text()
    head, first = mlperf.splitlines()[:2]
    v5 = first.replace("mlperf-inference-v4.1", "mlperf-inference-v5.0")
    own.write_text("\n".join([head, first, v5]) + "\n")
    out = tmp_path / "out.csv"
    assert _builder().main([str(own), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 1 and rows[0] == next(csv.DictReader(io.StringIO(head + "\n" + first + "\n")))
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([head, first.replace(",tok/s,", ",furlongs,", 1)]) + "\n")
    with pytest.raises(InputError) as exc:
        _builder().main([str(bad), "--out", str(out)])
    assert str(exc.value).startswith(f"{bad} row 1 (line 2): unit = 'furlongs' is not allowed")
