"""Configurations sweepkit can express (sweepkit.validation.coverage): each check in order, with its reason."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.errors import InputError
from sweepkit.serving.cluster import make_cluster
from sweepkit.validation.coverage import REASONS, Deployment, as_measurement, decode_pass, parse_deployments, why_not

HEAD = "release,model,device,gpus,tp,pp,ep,attention_dp,weight_format,kv_format,isl,osl,label\n"


def _dep(model, device, gpus, tp, pp=1, ep=1, adp=0, fmt="fp8", isl=1024, osl=1024):
    return Deployment("demo", model, device, gpus, tp, pp, ep, adp, fmt, "fp8", isl, osl)


def test_a_file_parses_skipping_comments_and_bad_fields_name_file_row_and_value():
    rows = parse_deployments("# a comment\n" + HEAD + "1.2,Qwen/Qwen3-30B-A3B,B200,1,1,1,1,0,fp4,fp8,1024,8192,TP1\n",
                             "c.csv")
    assert rows == [Deployment("1.2", "Qwen/Qwen3-30B-A3B", "B200", 1, 1, 1, 1, 0, "fp4", "fp8", 1024, 8192, "TP1")]
    with pytest.raises(InputError, match=r"c.csv row 1: .*tp.*'zero'"):
        parse_deployments(HEAD + "1,m,B200,1,zero,1,1,0,fp4,fp8,1,1,x\n", "c.csv")
    with pytest.raises(InputError, match=r"c.csv row 1: .*attention_dp.*'2'.*0 or 1"):
        parse_deployments(HEAD + "1,m,B200,2,2,1,1,2,fp4,fp8,1,1,x\n", "c.csv")
    with pytest.raises(InputError, match=r"c.csv: missing column\(s\) osl"):
        parse_deployments("release,model,device,gpus,tp,pp,ep,attention_dp,weight_format,kv_format,isl\n", "c.csv")


def test_attention_dp_reads_trtllm_bench_tp_as_data_parallel_ranks():
    m = as_measurement(_dep("deepseek-ai/DeepSeek-R1-0528", "B200", 4, 4, ep=4, adp=1, fmt="fp4"))
    assert (m.model, m.tp, m.dp, m.ep, m.gpus, m.compute_format) == ("deepseek-v3", 1, 4, 4, 4, "fp4")
    m = as_measurement(_dep("meta-llama/Llama-3.3-70B-Instruct", "H200", 2, 2))
    assert (m.model, m.tp, m.dp) == ("llama-3.1-70b", 2, 1)
    assert math.isnan(m.value) and math.isnan(m.value_si)      # a configuration carries no measured value


@pytest.mark.parametrize("dep, kind, detail", [
    (_dep("deepseek-ai/DeepSeek-R1-0528", "H200", 8, 8, ep=8, adp=1), "expressible", ""),
    (_dep("Qwen/Qwen3-235B-A22B", "RTX PRO 6000 Blackwell Server Edition", 4, 2, pp=2, ep=2, adp=1, fmt="fp4"),
     "expressible", ""),
    (_dep("acme/none-9b", "H100", 1, 1), "unknown model", "acme/none-9b"),
    (_dep("openai/gpt-oss-20b", "TPU v9", 1, 1), "unknown device", "TPU v9"),
    (_dep("meta-llama/Llama-3.3-70B-Instruct", "H100", 8, 8, ep=4), "layout", "ep = 4 is not allowed"),
    (_dep("deepseek-ai/DeepSeek-R1-0528", "H100", 1, 1), "serving engine", "weights take"),
])
def test_each_check_gives_its_reason(dep, kind, detail):
    got_kind, got_detail = why_not(dep)
    assert got_kind == kind and detail in got_detail


def test_pipeline_stages_share_the_weights_so_a_model_fits_where_one_gpu_cannot_hold_it():
    # Qwen3-235B-A22B in FP4 is ~118 GB of weights: over one RTX PRO 6000's 86 GB usable, under four's
    one = why_not(_dep("Qwen/Qwen3-235B-A22B", "RTX PRO 6000 Blackwell Server Edition", 1, 1, fmt="fp4"))
    four = why_not(_dep("Qwen/Qwen3-235B-A22B", "RTX PRO 6000 Blackwell Server Edition", 4, 1, pp=4, fmt="fp4"))
    assert one[0] == "serving engine" and "larger tp or pp" in one[1]
    assert four == ("expressible", "")
    c = make_cluster(model="qwen3-235b-a22b", instances=1, tp=1, pp=4, devices=["RTX-PRO-6000"], weight_format="fp4")
    assert (c.gpus, c.pp) == (4, 4)
    with pytest.raises(InputError, match=r"gpus = 2 is not allowed; expected instances x tp x dp x pp = 4"):
        make_cluster(model="qwen3-235b-a22b", instances=1, tp=1, pp=4, gpus=2, devices=["RTX-PRO-6000"],
                     weight_format="fp4")


def test_the_decode_pass_is_finite_and_one_microbatch_crosses_the_stages_in_turn():
    base = as_measurement(_dep("meta-llama/Llama-3.3-70B-Instruct", "RTX PRO 6000 Blackwell Server Edition", 1, 1,
                               fmt="fp4"))
    piped = as_measurement(_dep("meta-llama/Llama-3.3-70B-Instruct", "RTX PRO 6000 Blackwell Server Edition", 2, 1,
                                pp=2, fmt="fp4"))
    (t1, e1), (t2, e2) = decode_pass(base), decode_pass(piped)
    assert all(math.isfinite(x) and x > 0 for x in (t1, e1, t2, e2))
    # GPipe with one micro-batch (sweepkit.costmodel.steps): t = pp (t1 / pp + t_hop), the whole pass in turn
    # plus one stage-to-stage hop per stage; the second GPU idles while the first works, so energy grows
    assert t1 < t2 == pytest.approx(t1, rel=0.01) and e2 > e1


def test_a_request_longer_than_one_rank_s_kv_is_refused_in_one_line():
    # Llama-3.3-70B FP4 on one RTX PRO 6000 holds ~300k KV tokens at FP8 (tests above: it fits);
    # a 1M-token request cannot be held whole
    kind, detail = why_not(_dep("meta-llama/Llama-3.3-70B-Instruct", "RTX PRO 6000 Blackwell Server Edition", 1, 1,
                                fmt="fp4", isl=1_000_000, osl=1024))
    assert kind == "KV" and "fewer than one request's ISL + OSL = 1,001,024" in detail
    assert why_not(_dep("meta-llama/Llama-3.3-70B-Instruct", "RTX PRO 6000 Blackwell Server Edition", 1, 1,
                        fmt="fp4", isl=32768, osl=1024)) == ("expressible", "")


MODELS = ("deepseek-ai/DeepSeek-R1-0528", "openai/gpt-oss-120b", "openai/gpt-oss-20b", "Qwen/Qwen3-30B-A3B",
          "meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Llama-4-Maverick-17B-128E-Instruct", "acme/none-9b")
DEVICES = ("H100", "H200", "B200", "GB200", "B300", "RTX PRO 6000 Blackwell Server Edition", "TPU v9")


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), device=st.sampled_from(DEVICES), tp=st.sampled_from([1, 2, 3, 4, 8, 16]),
       pp=st.sampled_from([1, 2, 4]), ep=st.sampled_from([1, 2, 3, 4, 8, 16]), adp=st.sampled_from([0, 1]),
       extra=st.sampled_from([1, 2]), fmt=st.sampled_from(["fp8", "fp4", "bf16"]),
       isl=st.integers(1, 200_000), osl=st.integers(1, 40_000))
def test_every_configuration_gets_a_verdict_never_a_traceback(model, device, tp, pp, ep, adp, extra, fmt, isl, osl):
    d = Deployment("p", model, device, tp * pp * extra, tp, pp, ep, adp, fmt, "fp8", isl, osl)
    kind, detail = why_not(d)
    assert kind in ("expressible",) + REASONS and (kind == "expressible") == (detail == "")
    if kind == "expressible":
        m = as_measurement(d)
        assert m.tp * m.dp * m.pp <= m.gpus and m.gpus % (m.tp * m.dp * m.pp) == 0
        t_s, energy_j = decode_pass(m)
        assert t_s > 0 and energy_j > 0
