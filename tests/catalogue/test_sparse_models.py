"""Mixture-of-experts and multi-head latent attention: counts, KV bytes, expert reads (closed forms, citations)."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_draft, get_model, model_from_hf_config
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.passes import decode_work, experts_read, flops_and_bytes
from sweepkit.costmodel.steps import pass_cost
from sweepkit.errors import InputError


@pytest.mark.parametrize("name", ["mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3"])
def test_active_parameters_near_official(name):
    # Official active counts: Mixtral 12.9 B (arXiv 2401.04088 sec. 2), Qwen3-30B-A3B 3.3 B (model card),
    # DeepSeek-V3 37 B (arXiv 2412.19437 abstract). They are printed to 2-3 digits and the vendors differ on
    # whether embeddings count; sweepkit counts the input embedding and the LM head: 12.88 / 3.35 / 37.55 B.
    model = get_model(name)
    assert model.active_params == pytest.approx(model.official_active_params, rel=0.02)
    assert model.resident_params == pytest.approx(model.official_params, rel=0.01)


def test_mixtral_counts_exact():
    # Mixtral-8x7B: 32 x (attention 41.94 M + 8 experts x 176.16 M + router 32,768) + 2 x 32,000 x 4,096.
    m = get_model("mixtral-8x7b")
    assert m.expert_params == 3 * 4096 * 14336
    assert m.resident_params == 32 * (41_943_040 + 8 * 176_160_768 + 32_768) + 2 * 32_000 * 4096
    assert m.active_params == 32 * (41_943_040 + 2 * 176_160_768 + 32_768) + 2 * 32_000 * 4096


@pytest.mark.parametrize("name, kv", [("deepseek-v3", 70_272), ("llama-3.1-405b", 516_096),
                                      ("mixtral-8x7b", 131_072), ("qwen3-30b-a3b", 98_304)])
def test_kv_bytes_per_token(name, kv):
    # DeepSeek-AI, "Insights into DeepSeek-V3" (ISCA 2025, arXiv 2505.09343), Table 1: KV cache per token
    # (BF16) DeepSeek-V3 (MLA) 70.272 KB = 61 x (512 + 64) x 2 B; LLaMA-3.1 405B (GQA) 516.096 KB.
    assert get_model(name).kv_bytes_per_token(2.0) == kv


def test_deepseek_mla_and_moe_layout():
    # arXiv 2412.19437 sec. 4.2: 61 layers, first 3 dense, 256 routed + 1 shared expert, 8 routed per token.
    m = get_model("deepseek-v3")
    assert (m.n_dense_layers, m.n_moe_layers, m.n_experts, m.experts_per_token) == (3, 58, 256, 8)
    assert m.attention_params == 187_105_280             # MLA projections, computed from the config
    assert m.attention_width == 128 * (512 + 32)         # absorbed MLA: QK over d_c + d_r, PV over d_c


def test_deepseek_mtp_draft_is_one_moe_layer():
    # HF deepseek-ai/DeepSeek-V3 README: the MTP module is 14 B of weights with its own copies of the embedding
    # and head (2 x 0.93 B) and a 2D x D projection; the one MoE layer sweepkit adds is the rest (~11.5 B).
    target = get_model("deepseek-v3")
    mtp = get_draft("mtp", target)
    assert mtp.model.n_moe_layers == 1 and mtp.model.n_dense_layers == 0
    stored = mtp.resident_params + 2 * target.embedding_params + 2 * 7168 * 7168
    assert stored == pytest.approx(14e9, rel=0.05)


def test_experts_read_closed_form():
    # E (1 - (1 - k/E)^T): Mixtral (8, 2): T = 1 -> 2, T = 2 -> 8 (1 - 0.75^2) = 3.5; dense -> 0.
    with jax.enable_x64(True):
        mix = model_arrays(get_model("mixtral-8x7b"), jnp.float64)
        dense = model_arrays(get_model("llama-3-8b"), jnp.float64)
        assert float(experts_read(jnp.float64(1), mix)) == pytest.approx(2.0)
        assert float(experts_read(jnp.float64(2), mix)) == pytest.approx(3.5)
        assert float(experts_read(jnp.float64(64), dense)) == 0.0


def _decode_bytes(name, batch, ctx):
    with jax.enable_x64(True):
        m = model_arrays(get_model(name), jnp.float64)
        _, b = flops_and_bytes(decode_work(jnp.float64(ctx), jnp.float64(batch)), m, 2.0, 2.0)
        return float(b)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3"]), st.integers(1, 511))
def test_moe_decode_reads_more_experts_as_batch_grows(name, batch):
    # Same total context, one more row: more distinct experts are read (until all are), never fewer.
    m = get_model(name)
    kv = m.kv_bytes_per_token(2.0)
    grow = _decode_bytes(name, batch + 1, 4096) - _decode_bytes(name, batch, 4096) - kv - 2.0 * m.d_model
    assert grow > 0.0 or batch > 64
    assert grow >= -1e-3 * m.expert_params
    ceiling = 2.0 * m.total_matmul_params + (4096 + batch) * kv + 2.0 * batch * m.d_model   # every expert read
    assert _decode_bytes(name, batch, 4096) <= ceiling * (1 + 1e-12)


def test_moe_decode_saturates_at_total_weights():
    # Batch 1 reads the active weights; a large batch reads every expert (resident minus the input embedding).
    m = get_model("mixtral-8x7b")
    assert _decode_bytes("mixtral-8x7b", 1, 0) == pytest.approx(2 * (m.matmul_params + m.d_model) + 131_072)
    big = _decode_bytes("mixtral-8x7b", 4096, 0)
    assert big == pytest.approx(2 * m.total_matmul_params, rel=0.01)


def test_moe_step_time_grows_with_batch_on_h100():
    with jax.enable_x64(True):
        f = jnp.float64
        dev, m = device_arrays(get_device("H100"), f), model_arrays(get_model("mixtral-8x7b"), f)
        t = [float(pass_cost(decode_work(f(512 * b), f(b)), m, dev, f(2), f(2), f(2), f(1)).t_s) for b in (1, 2, 8)]
    assert t[0] < t[1] < t[2]


def test_bad_moe_config_is_one_line():
    config = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=100,
                  num_local_experts=4, num_experts_per_tok=5)
    with pytest.raises(InputError, match="num_experts_per_tok = 5 is not allowed; expected an integer in"):
        model_from_hf_config(config, where="x/config.json")
    config.update(num_experts_per_tok=2, mlp_only_layers=[0])
    assert model_from_hf_config(config).n_moe_layers == 1


def test_deepseek_v3_mtp_speedup_near_the_reported_1_8x():
    # arXiv 2412.19437 sec. 5.4.3: the MTP module's second-token acceptance is 85-90% and gives "1.8 times TPS";
    # the paper names no hardware or batch. Priced here on 8 x H200, FP8 weights, batch 1: 1.73x-1.78x.
    import sweepkit

    for alpha in (0.85, 0.90):
        r = sweepkit.evaluate(device="H200", model="deepseek-v3", draft="mtp", tp=8, weight_format="fp8",
                              batch=1, gamma=1, alpha=alpha)
        assert r["speedup"] == pytest.approx(1.8, rel=0.05) and r["fits_in_memory"]
