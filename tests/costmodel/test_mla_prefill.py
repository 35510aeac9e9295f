"""MLA prompt chunks priced in MHA form, decode over the latent: attention FLOPs against closed forms.

DeepSeek-V3 (HF deepseek-ai/DeepSeek-V3 config.json: 128 heads, kv_lora_rank d_c 512, qk_nope_head_dim 128,
qk_rope_head_dim d_r 64, v_head_dim 128, 61 layers). Decode attends over the latent with the up-projections
absorbed (FlashMLA): 2 H (d_c + d_r) + 2 H d_c = 278,528 FLOPs per (token, position) pair. Prefill runs
ordinary multi-head attention on keys and values up-projected from the latent (vLLM
vllm/v1/attention/backends/mla/common.py ``_forward_prefill``; SGLang
python/sglang/srt/models/deepseek_common/attention_backend_handler.py, MHA for extends): 2 H (d_nope + d_r) +
2 H d_v = 81,920 FLOPs per pair, plus 2 d_c H (d_nope + d_v) FLOPs per cached prefix position and layer that
a chunk up-projects (vLLM ``_compute_prefill_context``). DeepSeek-V3.2's sparse kernels attend over the latent
in prefill too (FlashMLA ``flash_mla_sparse_fwd``, d_qk 576): no change there.
"""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import Efficiency, step_time_by_class
from sweepkit.costmodel.passes import (Work, as_prefill, attention_flops, chunk_work, combine, decode_work,
                                      verify_work)

DECODE_PAIR = 2 * 128 * (512 + 64) + 2 * 128 * 512          # 278,528
PREFILL_PAIR = 2 * 128 * (128 + 64) + 2 * 128 * 128         # 81,920
UP = 2 * 512 * 128 * (128 + 128)                            # 33,554,432 per cached position and layer


def _net(name, layers=1):
    return model_arrays(get_model(name).with_layers(layers), jnp.float64)


def _flops(name, work_fn, *args, layers=1):
    with jax.enable_x64(True):
        return float(attention_flops(work_fn(*[jnp.float64(a) for a in args]), _net(name, layers)))


def test_pair_widths_of_deepseek_v3():
    m = get_model("deepseek-v3")
    assert (DECODE_PAIR, PREFILL_PAIR) == (278_528, 81_920)
    assert 4 * m.attention_width == DECODE_PAIR and 4 * m.prefill_attention_width == PREFILL_PAIR
    assert m.prefix_upprojection_flops == 61 * UP == 2_046_820_352
    # Kimi-K2: the same head shapes over 64 heads
    k = get_model("kimi-k2")
    assert (4 * k.attention_width, 4 * k.prefill_attention_width) == (139_264, 40_960)


def test_a_4096_token_prompt_per_layer_by_hand():
    # causal prompt of n = 4,096 tokens: n (n + 1) / 2 = 8,390,656 (token, position) pairs per layer
    pairs = 4_096 * 4_097 // 2
    assert _flops("deepseek-v3", chunk_work, 0, 4_096) == PREFILL_PAIR * pairs == 687_362_539_520
    # the same pairs as decode rows would cost 3.4 x as much
    with jax.enable_x64(True):
        absorbed = Work(jnp.float64(4_096), jnp.float64(2 * pairs), jnp.float64(4_096))
        assert float(attention_flops(absorbed, _net("deepseek-v3"))) == DECODE_PAIR * pairs == 2_337_032_634_368


def test_a_chunk_after_a_cached_prefix_adds_the_up_projection():
    # 2,048 new tokens after 2,048 cached: 2,048 x 2,048 + 2,048 x 2,049 / 2 pairs, 2,048 latents up-projected
    pairs = 2_048 * 2_048 + 2_048 * 2_049 // 2
    want = PREFILL_PAIR * pairs + UP * 2_048
    assert _flops("deepseek-v3", chunk_work, 2_048, 2_048) == want == 584_199_438_336
    assert _flops("deepseek-v3", chunk_work, 2_048, 2_048, layers=61) == pytest.approx(61 * want, rel=1e-12)


def test_decode_and_verify_stay_absorbed():
    assert _flops("deepseek-v3", decode_work, 10_000, 4) == DECODE_PAIR * 10_004
    assert _flops("deepseek-v3", verify_work, 10_000, 4, 3) == DECODE_PAIR * 3 * (2 * 10_000 + 4 * 4) / 2


def test_a_mixed_step_prices_each_part_in_its_own_form():
    with jax.enable_x64(True):
        net, f = _net("deepseek-v3"), jnp.float64
        d, c = decode_work(f(10_000), f(4)), chunk_work(f(2_048), f(2_048))
        whole = float(attention_flops(combine(d, c), net))
        assert whole == pytest.approx(float(attention_flops(d, net)) + float(attention_flops(c, net)), rel=1e-12)


def test_prompt_chunks_given_as_totals_are_marked_by_as_prefill():
    with jax.enable_x64(True):
        f = jnp.float64
        bare = Work(f(4_096), f(4_096 * 4_097), f(4_096))
        assert float(attention_flops(as_prefill(bare), _net("deepseek-v3"))) == PREFILL_PAIR * 4_096 * 4_097 / 2


def test_dsa_prompt_chunks_stay_on_the_latent_under_the_top_k_cap():
    # DeepSeek-V3.2: 8,192 new tokens, each attends to at most k = 2,048 positions: A' = min(A, 2 T k)
    pairs = min(8_192 * 8_193, 2 * 8_192 * 2_048) / 2
    index = 2 * 64 * 128 * 8_192 * 8_193 / 2
    assert _flops("deepseek-v3.2", chunk_work, 0, 8_192) == pytest.approx(DECODE_PAIR * pairs + index, rel=1e-12)


GQA = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "gpt-oss-120b")


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(GQA), cached=st.integers(0, 200_000), new=st.integers(0, 16_384))
def test_gqa_prompt_chunks_price_exactly_as_decode_form(name, cached, new):
    """q_p = q and no up-projection: a GQA chunk costs exactly what its T, A, K cost as one form."""
    with jax.enable_x64(True):
        net, f = model_arrays(get_model(name), jnp.float64), jnp.float64
        c = chunk_work(f(cached), f(new))
        plain = Work(c.tokens, c.attn_pairs, c.kv_tokens)
        assert float(attention_flops(c, net)) == float(attention_flops(plain, net))


@settings(max_examples=25, deadline=None)
@given(new=st.integers(1, 32_768))
def test_mla_whole_prompts_cost_less_than_absorbed(new):
    """Without a cached prefix MHA form is q_p / q = 81,920 / 278,528 of the absorbed FLOPs."""
    with jax.enable_x64(True):
        net, f = _net("deepseek-v3"), jnp.float64
        c = chunk_work(f(0), f(new))
        ratio = float(attention_flops(c, net)) / float(attention_flops(Work(c.tokens, c.attn_pairs, c.kv_tokens), net))
        assert ratio == pytest.approx(PREFILL_PAIR / DECODE_PAIR, rel=1e-12)


def test_the_profiled_prefill_class_prices_mha_form():
    """step_time_by_class: a compute-bound prompt's attention seconds = 2 L q_p A / (P a), decode rows absorbed."""
    with jax.enable_x64(True):
        f = jnp.float64
        net, dev = _net("deepseek-v3"), device_arrays(get_device("H100"), jnp.float64)
        eff = Efficiency(*[f(v) for v in (0.8, 64.0, 0.6, 16.0, 0.5, 0.8, 0.8, 0.7, 0.0, 0.0, 0.0, 0.0, 0.0)])
        bare = Work(f(4_096), f(4_096 * 4_097), f(4_096))      # the prompt given as totals
        zero = Work(f(0.0), f(0.0), f(0.0))
        parts = step_time_by_class(zero, bare, net, dev, eff, f(1.0), f(1.0), f(1.0), f(2.0))
        want = PREFILL_PAIR * 4_096 * 4_097 / 2 / (float(dev.peak_flops_per_s) * 0.5)
        assert float(parts["attn_prefill"]) == pytest.approx(want, rel=1e-12)
        dec = step_time_by_class(bare, zero, net, dev, eff, f(1.0), f(1.0), f(1.0), f(2.0))
        assert float(dec["attn_decode"]) == pytest.approx(want * DECODE_PAIR / PREFILL_PAIR, rel=1e-12)


def test_the_roofline_pass_and_the_step_price_mha_form():
    """target_pass_cost's FLOPs: 2 P_mm T + 61 layers of the 4,096-token prompt by hand; step_cost marks prompt
    chunks given as totals (split -> as_prefill), so they cost what chunk_work's do."""
    from sweepkit.costmodel.steps import instance, step_cost, target_pass_cost
    m = get_model("deepseek-v3")
    with jax.enable_x64(True):
        f = jnp.float64
        inst = instance(get_device("H200"), m, None, 8, "fp8", "fp8", "fp8", dtype=f)
        cost = target_pass_cost(inst, chunk_work(f(0.0), f(4_096.0)))
        want = 2.0 * m.matmul_params * 4_096 + 61 * PREFILL_PAIR * 4_096 * 4_097 / 2
        assert float(cost.flops) == pytest.approx(want, rel=1e-12)
        bare = Work(f(4_096.0), f(4_096.0 * 4_097.0), f(4_096.0))
        t_bare = step_cost(inst, f(0.0), f(0.0), bare, 0)[0]
        t_chunk = step_cost(inst, f(0.0), f(0.0), chunk_work(f(0.0), f(4_096.0)), 0)[0]
        assert float(t_bare) == pytest.approx(float(t_chunk), rel=1e-12)


def test_the_serving_engines_step_chunks_carry_prompt_pairs_and_prefix():
    """step_chunks: a partial row (1,024 done, 512 more) and an admission (256 cached hit, 2,048 new)."""
    from sweepkit.serving.engine.schedule import step_chunks
    with jax.enable_x64(True):
        f = jnp.float64
        w = step_chunks(f([1_024.0, 0.0]), f([512.0, 0.0]), jnp.array([True, False]),
                        f([256.0, 0.0]), f([2_048.0, 0.0]), jnp.array([True, False]))
        pairs = 512 * (2 * 1_024 + 513) + 2_048 * (2 * 256 + 2_049)
        assert (float(w.attn_pairs), float(w.prefill_pairs), float(w.prefix_tokens)) == (pairs, pairs, 1_280.0)
