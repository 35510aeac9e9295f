"""Expert and attention-data parallel layouts (sweepkit.costmodel.layout) against closed forms and invariants."""

import dataclasses

import jax.numpy as jnp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.layout import (INTERCONNECTS, check_layout, kv_replicas, layout_kv_capacity_tokens,
                                       layout_work, make_layout, per_gpu_weight_bytes)
from sweepkit.costmodel.memory import MEM_UTIL
from sweepkit.costmodel.moe_comm import all_to_all_bytes, all_to_all_s, remote_copies
from sweepkit.costmodel.passes import Work, chunk_work, combine, decode_work, experts_read
from sweepkit.costmodel.steps import instance, target_pass
from sweepkit.errors import InputError

pytestmark = pytest.mark.usefixtures("x64")
F = jnp.float64
DSV3, H200 = get_model("deepseek-v3"), get_device("H200")


def _lay(tp=1, dp=1, ep=1, imbalance=1.0, model=DSV3, device=H200, **kw):
    return make_layout(device, model, tp, dp=dp, ep=ep, imbalance=imbalance, dtype=F, **kw)


def test_mla_kv_per_token_and_dp_capacity_closed_form():
    # DeepSeek-V3 MLA caches d_c + d_r = 512 + 64 values per layer: 61 x 576 x 1 B = 35,136 B in FP8
    # (HF deepseek-ai/DeepSeek-V3 config.json: kv_lora_rank 512, qk_rope_head_dim 64, 61 layers).
    assert DSV3.kv_bytes_per_token(1.0) == 61 * (512 + 64) * 1.0 == 35136.0
    dev, tgt, none = device_arrays(H200, F), model_arrays(DSV3, F), model_arrays(None, F)
    experts = DSV3.n_experts * DSV3.routed_expert_params
    rep = DSV3.resident_params - experts
    for tp, dp, r in ((8, 1, 8), (1, 8, 1), (2, 4, 2)):
        lay = _lay(tp=tp, dp=dp, ep=tp * dp)
        assert float(lay.kv_replicas) == r
        got = float(layout_kv_capacity_tokens(lay, dev, F(8), tgt, none, F(1.0), F(1.0)))
        free = 141e9 * 8 * MEM_UTIL - (DSV3.resident_params + (dp - 1) * rep)
        assert got == pytest.approx(free // (35136.0 * r), abs=1.0)
    # GQA: Qwen3-30B-A3B's 4 KV heads split over tp <= 4 and are copied beyond
    q = get_model("qwen3-30b-a3b")
    assert [kv_replicas(q, t) for t in (1, 2, 4, 8)] == [1.0, 1.0, 1.0, 2.0]


def test_all_to_all_bytes_and_time_closed_forms():
    dev = device_arrays(H200, F)
    # 32 tokens per GPU, ep 8, k 8, D 7168, FP8: c = 8 (1 - (7/8)^8) x 7/8
    c = 8 * (1 - (7 / 8) ** 8) * 7 / 8
    assert float(remote_copies(F(8), F(8))) == pytest.approx(c, rel=1e-12) and c == pytest.approx(4.5947, rel=1e-4)
    lay = _lay(dp=8, ep=8, imbalance=1.3)
    b = float(all_to_all_bytes(lay, F(32), F(7168), F(8), F(1.0)))
    assert b == pytest.approx(32 * c * 7168 * 1.0 * 1.3, rel=1e-12)
    # inside one 8-GPU NVLink domain: bytes / link + one link latency + the call's fixed time
    assert float(all_to_all_s(lay, dev, F(b), F(41e-6))) == pytest.approx(b / 450e9 + 5e-6 + 41e-6, rel=1e-12)
    # ep 16 over two domains: 7 of 15 peers on NVLink, 8 of 15 over InfiniBand NDR (50 GB/s), at once
    wide = _lay(dp=16, ep=16)
    want = max(b * 7 / 15 / 450e9, b * 8 / 15 / 50e9) + 5e-6 + INTERCONNECTS["ib-ndr"][1]
    assert float(all_to_all_s(wide, dev, F(b), F(0.0))) == pytest.approx(want, rel=1e-12)
    # a cluster of 4 GPUs per node sees a domain of 4; more GPUs per node than H200's baseboard of 8 do not
    assert float(_lay(dp=16, ep=16, gpus_per_node=4).domain_gpus) == 4.0
    assert float(_lay(dp=16, ep=16, gpus_per_node=16).domain_gpus) == 8.0
    # ep 1: no all-to-all at all
    one = _lay()
    assert float(all_to_all_bytes(one, F(32), F(7168), F(8), F(1.0))) == 0.0
    assert float(all_to_all_s(one, dev, F(1e6), F(41e-6))) == 0.0


def test_per_rank_expert_bytes_and_flops_closed_form():
    net = model_arrays(DSV3, F)
    t = F(64.0)
    work = Work(t, F(0.0), F(1000.0))             # 64 positions reading 1,000 KV tokens
    e_read = float(experts_read(t, net))
    p_e, k, w = DSV3.routed_expert_params, DSV3.experts_per_token, 1.0
    for imb in (1.0, 1.3, 8.0):
        d_f, d_w, d_o = layout_work(_lay(tp=8, ep=8, imbalance=imb), net, work, F(w), F(1.0))
        assert float(d_f) == pytest.approx(2 * k * p_e * 64 * (imb - 1), rel=1e-12)
        assert float(d_w) == pytest.approx(p_e * w * (min(256, imb * e_read) - e_read), rel=1e-12, abs=1e-3)
        assert float(d_o) == pytest.approx(1000 * 61 * 576 * 7, rel=1e-12)   # TP8 copies the latent 8 times
    # DEP8: the non-expert weights once per DP rank; no KV copies
    d_f, d_w, d_o = layout_work(_lay(dp=8, ep=8), net, work, F(w), F(1.0))
    rep = DSV3.matmul_params - k * p_e
    assert (float(d_f), float(d_o)) == (0.0, 0.0) and float(d_w) == pytest.approx(7 * rep * w, rel=1e-12)
    # per GPU: 671 B of FP8 weights over TP8 = 83.9 GB; DEP8 keeps the ~17 B non-expert ones on every GPU
    assert per_gpu_weight_bytes(DSV3, 8, 1, 1, 1.0) == pytest.approx(DSV3.resident_params / 8, rel=1e-12)
    experts = DSV3.n_experts * DSV3.routed_expert_params
    assert per_gpu_weight_bytes(DSV3, 1, 8, 1, 1.0) == pytest.approx(DSV3.resident_params - experts * 7 / 8)


@pytest.mark.parametrize("model,tp", [("llama-3-70b", 4), ("deepseek-v3", 2)])
def test_identity_layout_prices_exactly_as_no_layout(model, tp):
    m, dev = get_model(model), get_device("H100")
    bare = instance(dev, m, None, tp, "bf16", "bf16", "bf16", 0, F)
    lay = make_layout(dev, m, tp, dtype=F)
    if m.is_mla:
        lay = dataclasses.replace(lay, kv_replicas=F(1.0))     # what the bare instance assumes
    laid = instance(dev, m, None, tp, "bf16", "bf16", "bf16", 0, F, layout=lay)
    for work in (decode_work(F(4096.0), F(8.0)), combine(decode_work(F(9000.0), F(3.0)), chunk_work(F(0), F(700)))):
        assert tuple(map(float, target_pass(bare, work))) == tuple(map(float, target_pass(laid, work)))


def test_dep8_beats_tp8_for_deepseek_decode_at_batch_256():
    # DeepSeek-V3 FP8 on 8 x H200, 256 rows of 2,048 cached tokens: TP8 reads every latent 8 times and pays
    # 122 all-reduces; DEP8 re-reads ~17 B non-expert weights per rank and pays 58 x 2 small all-to-alls.
    def t(tp, dp):
        lay = _lay(tp=tp, dp=dp, ep=tp * dp if dp > 1 else 1, imbalance=1.3, compute_format="fp8")
        inst = instance(H200, DSV3, None, tp, "fp8", "fp8", "fp8", 0, F, layout=lay)
        return float(target_pass(inst, decode_work(F(256 * 2048.0), F(256.0)))[0])
    assert t(1, 8) < t(8, 1)


def test_bad_layouts_name_the_field_value_and_what_is_allowed():
    cases = [
        (DSV3, 1, 1, 7, "ep = 7 is not allowed; expected a divisor of deepseek-v3's 256 routed experts"),
        (get_model("llama-3-70b"), 8, 1, 8, "ep = 8 is not allowed; llama-3-70b is dense"),
        (get_model("llama-3-70b"), 4, 2, 1, "dp = 2 is not allowed; attention data parallelism needs"),
        (DSV3, 4, 1, 8, "ep = 8 is not allowed with dp = 1; expected a divisor of tp = 4"),
        (DSV3, 1, 8, 4, "ep = 4 is not allowed with dp = 8; expected ep = tp x dp = 8"),
        (DSV3, 16, 1, 1, "tp = 16 is not allowed on H200; expected at most its scale-up domain of 8 GPUs"),
    ]
    for model, tp, dp, ep, msg in cases:
        with pytest.raises(InputError, match=msg.replace("(", r"\(").replace(")", r"\)")) as exc:
            check_layout(model, H200, tp, dp, ep, "cluster.toml [cluster]")
        assert "\n" not in str(exc.value) and str(exc.value).startswith("cluster.toml [cluster]: ")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["deepseek-v3", "qwen3-30b-a3b", "mixtral-8x7b"]), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([1, 2]))
def test_more_ep_ranks_never_increase_per_gpu_weight_bytes(model, tp, dp, more):
    m = get_model(model)
    assert per_gpu_weight_bytes(m, tp, dp * more, 1, 1.0) <= per_gpu_weight_bytes(m, tp, dp, 1, 1.0) * (1 + 1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 256]), st.floats(0.0, 4096.0), st.floats(1.0, 4.0),
       st.sampled_from(["H100", "H200", "B200"]), st.sampled_from(sorted(INTERCONNECTS)))
def test_all_to_all_time_is_non_negative_monotone_and_zero_at_ep_one(ep, tokens, imb, device, net):
    dev = device_arrays(get_device(device), F)
    lay = make_layout(get_device(device), DSV3, 1, dp=max(ep, 2), ep=ep, imbalance=imb, interconnect=net, dtype=F)
    b = all_to_all_bytes(lay, F(tokens), F(7168.0), F(8.0), F(2.0))
    t, t_more = float(all_to_all_s(lay, dev, b, F(66e-6))), float(all_to_all_s(lay, dev, b * 2.0 + 1.0, F(66e-6)))
    assert 0.0 <= t <= t_more
    if ep == 1:
        assert float(b) == 0.0 and t == 0.0
