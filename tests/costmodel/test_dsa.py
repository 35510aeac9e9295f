"""DeepSeek Sparse Attention (DeepSeek-V3.2): attention FLOPs and KV bytes per pass, against closed forms.

DSA (DeepSeek-V3.2-Exp tech report, github.com/deepseek-ai/DeepSeek-V3.2-Exp; HF deepseek-ai/DeepSeek-V3.2
config.json: index_n_heads 64, index_head_dim 128, index_topk 2048): per layer a lightning indexer scores every
cached position (2 H_I d_I FLOPs each, FP8 keys of d_I bytes + one FP32 scale: vLLM ``indexer_k_quant_and_cache``,
132 B), then MLA attends to the top k = 2,048 positions. In FP8 the latents take FlashMLA's sparse layout, 512 FP8
values + 4 FP32 scales + 64 bf16 RoPE values = 656 B (vLLM ``fp8_ds_mla``). DeepSeek-V3 has the same shapes
without the indexer, so it is the dense-MLA counterpart (576 B per token and layer in FP8).
"""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_draft, get_model
from sweepkit.costmodel.arrays import model_arrays
from sweepkit.costmodel.layout import layout_work, make_layout
from sweepkit.costmodel.memory import kv_bytes_per_token
from sweepkit.costmodel.passes import (attention_flops, chunk_work, decode_work, flops_and_bytes, index_flops,
                                      kv_bytes_read, verify_work)

Q = 128 * (512 + 64 // 2)          # absorbed MLA width H (d_c + d_r / 2) = 69,632
INDEX = 2 * 64 * 128               # indexer FLOPs per (token, position) pair and layer
KV, KEY = 512 + 64, 128 + 4        # latent values, indexer-key bytes per token and layer
FP8 = 512 + 4 * 4 + 2 * 64         # FP8 latent bytes per token and layer of a DSA model: 656


def _f(x):
    return jnp.float64(x)


def _arrays(name, layers=None):
    m = get_model(name)
    return model_arrays(m if layers is None else m.with_layers(layers), jnp.float64)


def _attn(name, work_fn, *args, layers=None, kv_bytes=1.0):
    """(attention FLOPs, KV bytes read) of one pass."""
    with jax.enable_x64(True):
        net, work = _arrays(name, layers), work_fn(*[_f(a) for a in args])
        return float(attention_flops(work, net)), float(kv_bytes_read(work, net, _f(kv_bytes)))


@pytest.mark.parametrize("ctx, flops, bf16, fp8", [
    # one layer, one decode row at ctx cached (A = 2 (ctx + 1), K = ctx + 1); KV read in a bf16 and an FP8 cache
    (1_000, 2 * Q * 2 * 1_001 + INDEX * 1_001, (2 * KV + KEY) * 1_001, (FP8 + KEY) * 1_001),  # below k
    (32_000, 2 * Q * 2 * 2_048 + INDEX * 32_001, 2 * KV * 2_048 + KEY * 32_001, FP8 * 2_048 + KEY * 32_001),
])
def test_one_layer_decode_closed_forms(ctx, flops, bf16, fp8):
    for kv, read in ((2.0, bf16), (1.0, fp8)):
        assert _attn("deepseek-v3.2", decode_work, ctx, 1, layers=1, kv_bytes=kv) == (
            pytest.approx(flops, rel=1e-12), pytest.approx(read, rel=1e-12))
    assert (flops, bf16, fp8) == {1_000: (295_206_912, 1_285_284, 788_788),
                                  32_000: (1_094_729_728, 6_583_428, 5_567_620)}[ctx]


def test_below_k_the_main_attention_is_mla_and_above_it_only_the_indexer_grows():
    with jax.enable_x64(True):
        v32, v3 = _arrays("deepseek-v3.2", 1), _arrays("deepseek-v3", 1)
        for ctx in (0, 500, 2_047):
            w = decode_work(_f(ctx), _f(1))
            assert float(attention_flops(w, v32) - index_flops(w, v32)) == float(attention_flops(w, v3))
        main = [float(attention_flops(w, v32) - index_flops(w, v32))
                for w in (decode_work(_f(c), _f(1)) for c in (2_047, 4_000, 32_000, 128_000))]
        assert main == [2.0 * Q * 2 * 2_048] * 4
        grow = _attn("deepseek-v3.2", decode_work, 64_000, 1, layers=1)[0] - \
            _attn("deepseek-v3.2", decode_work, 32_000, 1, layers=1)[0]
        assert grow == pytest.approx(INDEX * 32_000, rel=1e-12)


def test_dense_mla_charges_32k_in_full():
    # the full model at 32,000 cached: DeepSeek-V3 reads 61 x 576 x 32,001 B, DeepSeek-V3.2 61 x (656 x 2,048 +
    # 132 x 32,001) B (FP8 KV), 30 % of it
    _, dense = _attn("deepseek-v3", decode_work, 32_000, 1)
    _, sparse = _attn("deepseek-v3.2", decode_work, 32_000, 1)
    assert dense == 61 * 576 * 32_001 and sparse == 61 * (656 * 2_048 + 132 * 32_001)
    assert sparse / dense == pytest.approx(0.30205, abs=1e-5)


def test_prefill_chunk_caps_each_token_at_k():
    # a chunk of 4,096 new tokens after 30,000 cached: A = 4,096 (60,000 + 4,097), attention <= 2 x 4,096 x 2,048
    # pairs, the indexer scores all A / 2; K = 34,096 keys, of which 4,096 x 2,048 capped latents (more than K)
    flops, kv = _attn("deepseek-v3.2", chunk_work, 30_000, 4_096, layers=1)
    pairs = 4_096 * (2 * 30_000 + 4_096 + 1)
    assert flops == pytest.approx(2 * Q * min(pairs, 2 * 4_096 * 2_048) + INDEX * pairs / 2, rel=1e-12)
    assert kv == pytest.approx(FP8 * 34_096 + KEY * 34_096, rel=1e-12)


def test_kv_bytes_per_token_hold_the_indexer_keys():
    v32 = get_model("deepseek-v3.2")
    # 61 x (512 + 64) x 2 B of bf16 latents + 61 x 132 B of FP8 indexer keys; in FP8 61 x 656 + 61 x 132
    assert v32.kv_bytes_per_token(2.0) == 70_272 + 8_052 == 78_324
    assert v32.kv_bytes_per_token(1.0) == 61 * 656 + 8_052 == 48_068
    assert get_model("deepseek-v3").kv_bytes_per_token(1.0) == 61 * 576        # no FP8 sparse layout without DSA
    with jax.enable_x64(True):
        mtp = model_arrays(get_draft("mtp", v32), jnp.float64)
        absent = model_arrays(None, jnp.float64)
        assert float(kv_bytes_per_token(_arrays("deepseek-v3.2"), mtp, _f(1.0))) == 62 * (656 + 132) == 48_856
        assert float(kv_bytes_per_token(_arrays("deepseek-v3.2"), absent, _f(2.0))) == 78_324
        assert float(kv_bytes_per_token(_arrays("deepseek-v3.2"), absent, _f(1.0))) == v32.kv_bytes_per_token(1.0)


def test_attention_tp_replicates_the_indexer():
    # TP8 without attention data parallelism: every rank runs the (replicated) indexer and reads its keys
    from sweepkit.catalogue import get_device

    with jax.enable_x64(True):
        m = get_model("deepseek-v3.2")
        lay = make_layout(get_device("H200"), m, 8, dtype=jnp.float64)
        net, work = _arrays("deepseek-v3.2"), decode_work(_f(64 * 4_000), _f(64))
        d_f, _, d_o = layout_work(lay, net, work, _f(1.0), _f(1.0))
        v3 = layout_work(make_layout(get_device("H200"), get_model("deepseek-v3"), 8, dtype=jnp.float64),
                         _arrays("deepseek-v3"), work, _f(1.0), _f(1.0))
        assert float(d_f - v3[0]) == pytest.approx(7 * float(index_flops(work, net)), rel=1e-12)
        assert float(d_o) == pytest.approx(7 * float(kv_bytes_read(work, net, _f(1.0))), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(4_096, 1 << 20), st.integers(1, 256), st.sampled_from([1.0, 2.0]))
def test_dsa_costs_no_more_than_dense_mla_past_4k(ctx, batch, kv_bytes):
    # per row: DSA <= MLA once 656 x 2,048 + 132 ctx <= 576 ctx in FP8 (ctx >= 3,027; bf16: 2,313) and
    # 2 q 2 x 2,048 + 2 H_I d_I ctx <= 2 q 2 ctx (ctx >= 2,177); a verify pass of c positions per row reads
    # k positions for each of them (c k per row), so its bound is c times as deep
    for fn in (decode_work, verify_work):
        args = (ctx * batch, batch) if fn is decode_work else (2 * ctx * batch, batch, 2)
        f32, b32 = _attn("deepseek-v3.2", fn, *args, kv_bytes=kv_bytes)
        f3, b3 = _attn("deepseek-v3", fn, *args, kv_bytes=kv_bytes)
        assert f32 <= f3 and b32 <= b3


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 1 << 20), st.integers(1, 1 << 16), st.integers(1, 128))
def test_dsa_cost_is_monotone_in_context(ctx, more, batch):
    for fn in (decode_work, chunk_work):
        lo = _attn("deepseek-v3.2", fn, ctx, batch)
        hi = _attn("deepseek-v3.2", fn, ctx + more, batch)
        assert hi[0] >= lo[0] and hi[1] >= lo[1]


def test_a_pass_of_v32_is_cheaper_than_v3_at_long_context_and_dearer_at_short():
    import sweepkit

    # the decode sweep: 200 rows at 32K on 8 x H200 in FP8, memory-bound (weights 17 ms, KV of V3 6 ms)
    kw = dict(device="H200", tp=8, batch=200, context=32_768, weight_format="fp8", kv_format="fp8",
              compute_format="fp8")
    v32, v3 = sweepkit.evaluate(model="deepseek-v3.2", **kw), sweepkit.evaluate(model="deepseek-v3", **kw)
    assert v32["fits_in_memory"] and v32["t_plain_pass_s"] < 0.9 * v3["t_plain_pass_s"]
    # the indexer keys and the FP8 layout take KV capacity: 61 x (656 + 132) B per token against 61 x 576 B
    assert v32["kv_capacity_tokens"] < v3["kv_capacity_tokens"] * 576 / (656 + 132) * 1.001
    # short context: the indexer and its 0.85 B weights make V3.2 a little dearer
    short = dict(kw, context=512)
    assert sweepkit.evaluate(model="deepseek-v3.2", **short)["t_plain_pass_s"] > \
        sweepkit.evaluate(model="deepseek-v3", **short)["t_plain_pass_s"]
    with jax.enable_x64(True):
        f32 = flops_and_bytes(decode_work(_f(64 * 32_768), _f(64)), _arrays("deepseek-v3.2"), _f(1.0), _f(1.0))
        f3 = flops_and_bytes(decode_work(_f(64 * 32_768), _f(64)), _arrays("deepseek-v3"), _f(1.0), _f(1.0))
        kv_v3 = 64 * 32_769 * 61 * 576                   # V3's FP8 latents: 73.7 GB of the 658 GB
        assert float(f32[1]) < float(f3[1]) - 0.5 * kv_v3


def test_the_indexer_adds_nine_kernels_per_layer():
    # q GEMM, key + head-weight GEMM, key LayerNorm, RoPE, rotation + FP8 quantisation of queries and key (2),
    # key-cache store, logits, top-k on each of the 61 layers; the activation quantisations are MLA's
    from sweepkit.costmodel.kernels import layer_kernels

    n32, q32 = layer_kernels(get_model("deepseek-v3.2"))
    n3, q3 = layer_kernels(get_model("deepseek-v3"))
    assert n32 == pytest.approx(n3 + 9, rel=1e-12) and q32 == q3


def test_the_engines_step_api_prices_a_mixed_step_with_mtp_on_a_dep8_layout():
    # costmodel.steps.step_cost (the serving engine's and the trace's pricing): 64 decode rows at 32K plus a
    # 4,096-token prompt chunk after 28,000 cached, MTP gamma 1, DEP8 on 8 x H200 in FP8: V3.2 prices under V3
    from sweepkit.catalogue import get_device
    from sweepkit.costmodel.steps import instance, step_cost

    dev = get_device("H200")
    with jax.enable_x64(True):
        costs = {}
        for name in ("deepseek-v3.2", "deepseek-v3"):
            m = get_model(name)
            lay = make_layout(dev, m, 1, dp=8, ep=8, compute_format="fp8", dtype=jnp.float64)
            inst = instance(dev, m, get_draft("mtp", m), 1, "fp8", "fp8", "fp8", 1, jnp.float64, pipelined=False,
                            layout=lay)
            t, e = step_cost(inst, _f(64 * 32_768), _f(64), chunk_work(_f(28_000), _f(4_096)), 1)
            costs[name] = (float(t), float(e))
        assert 0.0 < costs["deepseek-v3.2"][0] < costs["deepseek-v3"][0]
        assert 0.0 < costs["deepseek-v3.2"][1] < costs["deepseek-v3"][1]


def test_docstring_examples():
    # passes.index_flops: one decode token at 32,000 cached, 2 x 61 x 64 x 128 x 32,001 = 32.0 GFLOP;
    # passes.sparse_positions: min(32,001, 2,048) for one row, 64,064 (dense) for 64 rows of 1,000;
    # passes.kv_bytes_read: 81.95 MB of FP8 latents + 257.7 MB of indexer keys (V3: 1,124 MB)
    from sweepkit.catalogue.sparse import fp8_latent_overhead_bytes, indexer_key_bytes, indexer_params
    from sweepkit.costmodel.passes import sparse_positions

    with jax.enable_x64(True):
        net, one = _arrays("deepseek-v3.2"), decode_work(_f(32_000), _f(1))
        assert float(index_flops(one, net)) == 2 * 61 * 64 * 128 * 32_001 == 31_982_567_424
        assert float(index_flops(one, _arrays("deepseek-v3"))) == 0.0
        assert float(sparse_positions(one.kv_tokens, one, net)) == 2_048
        many = decode_work(_f(64 * 1_000), _f(64))
        assert float(sparse_positions(many.kv_tokens, many, net)) == 64_064
        assert float(kv_bytes_read(one, net, _f(1.0))) == 81_952_768 + 257_672_052
        assert float(kv_bytes_read(one, _arrays("deepseek-v3"), _f(1.0))) == 1_124_387_136
    assert (indexer_key_bytes(128), indexer_key_bytes(129), fp8_latent_overhead_bytes(512, 64)) == (132, 137, 80)
    assert indexer_params(7_168, dict(index_n_heads=64, index_head_dim=128, q_lora_rank=1_536)) == 13_959_168


def test_each_attention_gpu_holds_and_reads_the_whole_indexer():
    # vLLM's and SGLang's Indexer use ReplicatedLinear wq_b, wk, weights_proj: TP8 holds 8 copies of the
    # 61 x 13,959,168 indexer weights, DEP8 (attention TP 1 per DP rank) one per DP rank as before
    import dataclasses

    from sweepkit.catalogue import get_device
    from sweepkit.costmodel.layout import layout_resident_bytes, per_gpu_weight_bytes

    p_i = 61 * 13_959_168
    with jax.enable_x64(True):
        m, dev = get_model("deepseek-v3.2"), get_device("H200")
        net, absent, work = _arrays("deepseek-v3.2"), model_arrays(None, jnp.float64), decode_work(_f(4_000), _f(1))
        mtp = model_arrays(get_draft("mtp", m), jnp.float64)
        assert float(net.indexer_params) == p_i and float(mtp.indexer_params) == 13_959_168
        assert float(_arrays("deepseek-v3").indexer_params) == 0.0
        bare, bare_mtp = (dataclasses.replace(a, indexer_params=jnp.float64(0.0)) for a in (net, mtp))
        for tp, dp, ep, extra in ((8, 1, 1, 7), (1, 8, 8, 0), (2, 4, 8, 4)):
            lay = make_layout(dev, m, tp, dp=dp, ep=ep, dtype=jnp.float64)
            d_w = layout_work(lay, net, work, _f(1.0), _f(1.0))[1] - layout_work(lay, bare, work, _f(1.0), _f(1.0))[1]
            assert float(d_w) == pytest.approx(extra * p_i, rel=1e-12)
            held = layout_resident_bytes(lay, net, mtp, _f(1.0)) - layout_resident_bytes(lay, bare, bare_mtp, _f(1.0))
            assert float(held) == pytest.approx(extra * (p_i + 13_959_168), rel=1e-12)
            assert float(layout_resident_bytes(lay, net, absent, _f(1.0))) > 0
    per_gpu = per_gpu_weight_bytes(m, 8, 1, 1, 1.0) - per_gpu_weight_bytes(get_model("deepseek-v3"), 8, 1, 1, 1.0)
    assert per_gpu == pytest.approx(p_i, rel=1e-12)             # 1/8 of the indexers + 7/8 replicated
