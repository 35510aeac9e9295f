"""Measured rows with expert, data and pipeline parallelism priced with their layouts (tiny runs)."""

from __future__ import annotations

import dataclasses
import math
import re

import jax
import pytest

from sweepkit.catalogue import get_device
from sweepkit.costmodel.layout import scale_out
from sweepkit.errors import InputError
from sweepkit.serving.config import pool_layout, resolve
from sweepkit.validation import parse_measurements
from sweepkit.validation.row_layout import RowLayout, row_layout, sglang_dp_unset
from sweepkit.validation.serving_points import MODELLED, point_config, serving_status
from sweepkit.validation.serving_runs import evaluate_serving

HEAD = ("source,device,model,metric,value,unit,weight_format,kv_format,compute_format,gpus,tp,pp,ep,dp,"
        "input_tokens,output_tokens,requests,request_rate,notes\n")


def _row(device, model, gpus, tp, pp, ep, dp, fmt="fp8", inp=32, out=8, n=8, flags=""):
    csv = HEAD + f"demo,{device},{model},total_throughput,1000,tok/s,{fmt},{fmt},{fmt},{gpus},{tp},{pp},{ep},{dp}," \
                 f"{inp},{out},{n},inf,{'flags: ' + flags if flags else ''}\n"
    return parse_measurements(csv, "demo.csv")[0]


@pytest.mark.parametrize("row, expected", [
    # SGLang --tp 8 --dp 8 --enable-dp-attention (GPUStack's DeepSeek-V3.2 on 8 x H200): attention DP8, the experts
    # tensor-parallel over the 8 GPUs on the gathered tokens ("DP for attention, TP for FFN").
    (("H200", "deepseek-v3", 8, 8, 1, 1, 8), RowLayout(1, 1, 8, 1, 1, 0)),
    # The same with an all-to-all backend (GPUStack's GLM-5.2 rows: --moe-a2a-backend=deepep): DEP8.
    (("H200", "deepseek-v3", 8, 8, 1, 1, 8, "fp8", 32, 8, 8, "--tp-size=8 --dp-size=8 --enable-dp-attention "
      "--moe-a2a-backend=deepep"), RowLayout(1, 1, 8, 8, 1, 0)),
    (("H200", "deepseek-v3", 8, 8, 1, 1, 8, "fp8", 32, 8, 8, "--enable-dp-attention --moe-a2a-backend none"),
     RowLayout(1, 1, 8, 1, 1, 0)),
    # SGLang --tp 4 --ep 4 (GPUStack's GLM-4.5-Air): experts inside the TP group.
    (("H100", "glm-4.5-air", 4, 4, 1, 4, 1), RowLayout(1, 4, 1, 4, 1, 0)),
    # Wide EP over 4 H100 nodes (LMSYS's EP32 prefill): attention data parallel on every GPU, 4 nodes.
    (("H100", "deepseek-v3", 32, 1, 1, 32, 1), RowLayout(1, 1, 32, 32, 1, 4)),
    # LMSYS's EP72 decode over 9 nodes: 256 routed experts + 32 EPLB replicas = 288 slots, 4 per GPU.
    (("H100", "deepseek-v3", 72, 1, 1, 72, 1), RowLayout(1, 1, 72, 72, 1, 9, redundant_experts=32)),
    # vLLM DP2 x TP2 with expert parallelism: ep = 4 over the stage.
    (("H200", "qwen3-30b-a3b", 4, 2, 1, 4, 2), RowLayout(1, 2, 2, 4, 1, 0)),
    # A dense model's data parallelism is more instances; pipeline stages multiply a replica's GPUs.
    (("A100", "llama-3.1-8b", 8, 1, 1, 1, 8), RowLayout(8, 1, 1, 1, 1, 0)),
    (("A100", "llama-3.1-70b", 16, 4, 2, 1, 1), RowLayout(2, 4, 1, 1, 2, 0)),
])
def test_a_row_builds_the_layout_its_engine_runs(row, expected):
    assert row_layout(_row(*row)) == expected


@pytest.mark.parametrize("flags, expected", [
    # GPUStack's DeepSeek-R1 on 8 x H200 (SGLang v0.5.3 --tp 8 --enable-dp-attention, no --dp-size): SGLang's
    # dp_size defaults to 1 and DP attention is off at dp 1, so attention runs tensor-parallel over the 8 GPUs.
    ("--tp 8 --enable-dp-attention", RowLayout(1, 8, 1, 1, 1, 0)),
    ("--tp-size 8 --dp-size 8 --enable-dp-attention", RowLayout(1, 1, 8, 1, 1, 0)),
    ("--tp 8 --dp 8 --enable-dp-attention", RowLayout(1, 1, 8, 1, 1, 0)),
    ("--tp-size=8 --dp-size=8 --enable_dp_attention", RowLayout(1, 1, 8, 1, 1, 0)),
])
def test_sglang_dp_attention_without_a_dp_size_runs_attention_tensor_parallel(flags, expected):
    csv = ("source,device,model,metric,value,unit,framework,gpus,tp,dp,input_tokens,output_tokens,notes\n"
           f"demo,H200,deepseek-v3,total_throughput,1,tok/s,SGLang v0.5.3,8,8,8,128,4,flags: {flags}\n")
    m = parse_measurements(csv, "demo.csv")[0]
    assert sglang_dp_unset(m) == (expected.dp == 1)
    assert row_layout(m) == expected
    # another framework's row keeps the dp it states
    assert not sglang_dp_unset(dataclasses.replace(m, framework="vLLM v0.11.0"))


def test_the_cluster_carries_the_layout_and_spans_nodes_over_the_scale_out_network():
    m = _row("H100", "deepseek-v3", 32, 1, 1, 32, 1)
    cluster, cfg = point_config(m)
    assert (cluster.gpus, cluster.instances, cluster.tp, cluster.dp, cluster.ep, cluster.nodes) == (32, 1, 1, 32, 32, 4)
    with jax.enable_x64(True):
        lay = pool_layout(cluster, cfg, resolve(cluster, cfg.lever))
    bw, lat = scale_out(get_device("H100"))
    assert (float(lay.dp), float(lay.ep), float(lay.domain_gpus)) == (32.0, 32.0, 8.0)
    assert (float(lay.scale_out_bytes_per_s), float(lay.scale_out_latency_s)) == (bw, lat)
    pp_cluster, pp_cfg = point_config(_row("A100", "llama-3.1-70b", 16, 4, 2, 1, 1))
    res = resolve(pp_cluster, pp_cfg.lever)
    assert (pp_cluster.gpus, pp_cluster.instances, pp_cluster.pp, res.instances, res.pp, res.microbatches) == \
        (16, 2, 2, 2, 2, 2)


@pytest.mark.parametrize("row, why", [
    (("H100", "llama-3.1-8b", 2, 1, 1, 2, 1), "ep = 2 is not allowed; llama-3.1-8b is dense"),
    (("H100", "qwen3-30b-a3b", 12, 4, 1, 6, 1), "ep = 6 is not a multiple of tp = 4"),
    (("H100", "qwen3-30b-a3b", 12, 2, 1, 8, 1), "gpus = 12 is not a multiple of tp x dp x pp = 8"),
])
def test_an_inexpressible_layout_is_reported_as_not_modelled_with_why(row, why):
    status = serving_status(_row(*row))
    assert status.startswith("not modelled: ") and why in status, status
    with pytest.raises(InputError, match=re.escape(why)):
        row_layout(_row(*row))


def test_a_small_dep_row_is_priced_end_to_end_and_differs_from_tensor_parallelism():
    # 8 requests of 32 + 8 tokens at once on 2 x H100 running Qwen3-30B-A3B as DEP2 (tp 1, dp 2, ep 2): each
    # DP rank holds half the requests, so the run is priced on rows split over two attention ranks and every
    # MoE layer pays two all-to-alls; as TP2 the same GPUs all-reduce instead.
    m = _row("H100", "qwen3-30b-a3b", 2, 1, 1, 2, 1)
    assert serving_status(m) == MODELLED
    dep = evaluate_serving(m)
    tp2 = evaluate_serving(dataclasses.replace(m, tp=2, ep=1))
    assert math.isfinite(dep) and dep > 0 and math.isfinite(tp2) and tp2 > 0
    assert dep != pytest.approx(tp2, rel=1e-3)
    # total tokens / makespan: the makespan is at least O = 8 passes (one prefill, 7 decode steps) of the
    # device's per-pass overhead each, and under a second for 320 tokens of a 3B-active model.
    dev = get_device("H100")
    assert 8 * 40 / 1.0 < dep <= 8 * 40 / (8 * dev.pass_overhead_s)


def test_a_gathered_moe_tp_row_is_priced_end_to_end_by_the_serving_engine():
    # SGLang --tp 2 --dp 2 --enable-dp-attention on 2 x H100 (Qwen3-30B-A3B): two attention ranks, the experts
    # tensor-parallel over both GPUs on the gathered tokens; priced, and not as DEP2's all-to-alls.
    m = _row("H100", "qwen3-30b-a3b", 2, 2, 1, 1, 2)
    assert row_layout(m) == RowLayout(1, 1, 2, 1, 1, 0) and serving_status(m) == MODELLED
    gathered = evaluate_serving(m)
    dep = evaluate_serving(dataclasses.replace(m, ep=2))
    assert math.isfinite(gathered) and gathered > 0 and gathered != pytest.approx(dep, rel=1e-3)


def test_the_packaged_gpustack_sglang_rows_keep_the_dp_their_commands_set():
    """GPUStack's DeepSeek-R1 rows (``--tp 8 --enable-dp-attention``) are attention TP8; its DeepSeek-V3.2 and
    GLM-5.2 rows state ``--dp-size 8`` and keep DP8 (github.com/gpustack/gpustack, docs/performance-lab)."""
    from sweepkit.validation import load_measurements

    rows = [m for m in load_measurements()[0] if "--enable-dp-attention" in (m.notes or "")]
    unset = [m for m in rows if sglang_dp_unset(m)]
    assert len(unset) == 10 and {m.model for m in unset} == {"deepseek-v3"}
    assert all(m.dp == 8 for m in rows)                           # as the corpus states them
    assert {row_layout(m).dp for m in unset if m.input_tokens and m.output_tokens} == {1}
    assert not any(sglang_dp_unset(m) for m in rows if "--dp-size" in m.notes)


def test_a_closed_loop_wider_than_the_engine_batch_is_not_modelled_with_why():
    # TensorRT-LLM's DeepSeek-R1 DEP8 on 8 x B200 at --concurrency 7168 (NVIDIA/TensorRT-LLM
    # Best_perf_practice_on_DeepSeek-R1_in_TensorRT-LLM.md) as a closed loop: one instance of 7,168 users, more
    # than the serving engine's 4,096 running requests per instance; 4,096 users is priced.
    csv = ("source,device,model,metric,value,unit,weight_format,kv_format,compute_format,gpus,tp,ep,dp,"
           "input_tokens,output_tokens,concurrency\n"
           "demo,B200,deepseek-v3,output_throughput,43146,tok/s,fp4,fp8,fp4,8,8,8,8,1024,2048,{c}\n")
    wide = parse_measurements(csv.format(c=7168), "demo.csv")[0]
    assert serving_status(wide) == ("not modelled: a closed loop of 7168 users per instance (the serving engine "
                                    "runs at most 4096 requests per instance)")
    assert serving_status(parse_measurements(csv.format(c=4096), "demo.csv")[0]) == MODELLED


def test_a_tensorrt_llm_dep_row_gathers_and_reduce_scatters():
    # TensorRT-LLM's attention-DP MoE all-gathers and reduce-scatters (fused_moe_cutlass.py); its wide-EP backend
    # and the other frameworks' DEP backends exchange by all-to-alls
    from sweepkit.validation.row_layout import moe_exchange
    from sweepkit.validation.steady_rows import _layout

    def row(framework, notes=""):
        csv = ("source,device,model,metric,value,unit,framework,weight_format,kv_format,compute_format,gpus,tp,ep,dp,"
               f"input_tokens,output_tokens,requests,notes\ndemo,B200,deepseek-v3,max_output_throughput,1,tok/s,"
               f"{framework},fp4,fp8,fp4,8,8,8,8,1024,2048,64,{notes}\n")
        return parse_measurements(csv, "demo.csv")[0]

    trt = row("TensorRT-LLM (PyTorch backend)", "attention DP (enable_attention_dp: true) + EP8")
    assert moe_exchange(trt) == "gather"
    assert moe_exchange(row("TensorRT-LLM (PyTorch backend)", "moe backend WIDEEP")) == "all-to-all"
    assert moe_exchange(row("SGLang v0.5.6", "flags: --moe-a2a-backend deepep")) == "all-to-all"
    with jax.enable_x64(True):
        lay = _layout(trt, jax.numpy.float64)[0]
    assert (float(lay.exchange), float(lay.dispatch_bytes), float(lay.ep)) == (1.0, 0.5625, 8.0)


def test_a_simulated_tensorrt_llm_dep_point_gathers_too():
    # the serving engine's configuration of a loaded row takes the row's exchange, as the steady state does
    csv = ("source,device,model,metric,value,unit,framework,weight_format,kv_format,compute_format,gpus,tp,ep,dp,"
           "input_tokens,output_tokens,request_rate,notes\ndemo,H200,deepseek-v3,ttft,1,s,TensorRT-LLM,fp8,fp8,fp8,"
           "8,8,8,8,1024,128,2,attention DP\n")
    m = parse_measurements(csv, "demo.csv")[0]
    cluster, cfg = point_config(m)
    res = resolve(cluster, cfg.lever)
    with jax.enable_x64(True):
        lay = pool_layout(cluster, cfg, res)
    assert (res.moe_exchange, float(lay.exchange), float(lay.ep), float(lay.dp)) == ("gather", 1.0, 8.0, 8.0)
    sglang = parse_measurements(csv.replace("TensorRT-LLM", "SGLang").replace("attention DP",
                                                                            "flags: --moe-a2a-backend deepep"),
                                "demo.csv")[0]
    cluster, cfg = point_config(sglang)
    assert resolve(cluster, cfg.lever).moe_exchange == "all-to-all"
