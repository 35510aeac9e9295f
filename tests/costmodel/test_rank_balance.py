"""The busiest attention-DP rank of a step (sweepkit.costmodel.rank_balance), alone and inside the step pricing."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import profile_for
from sweepkit.costmodel.arrays import model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time_by_class
from sweepkit.costmodel.layout import make_layout
from sweepkit.costmodel.passes import Work, attention_flops, chunk_work, combine, decode_work, kv_bytes_read
from sweepkit.costmodel.rank_balance import busiest_rank_extra, busiest_rank_scale, rank_tokens, scaled
from sweepkit.costmodel.steps import instance, step_cost, target_pass_cost


def _prompts(tokens, chunks):
    return Work(tokens=tokens, attn_pairs=tokens * 1025.0, kv_tokens=tokens, rows=chunks)


def test_the_scale_of_the_docstring_examples():
    # DeepSeek-R1 DEP8 steady state at 1,024 requests of 1,024 / 2,048: 0.5 prompts of 1,024 per step, all on
    # one rank (s = dp); 3.5 chunks of 1,024 over 8 ranks: one chunk on the busiest, 8 x 1,024 / 3,584
    with jax.enable_x64(True):
        f = jnp.float64
        def s(dp, tokens, chunks):
            return float(busiest_rank_scale(f(dp), _prompts(f(tokens), f(chunks))))
        assert s(8, 512, 0.5) == 8.0
        assert s(8, 3584, 3.5) == pytest.approx(8 * 1024 / 3584, rel=1e-12)
        assert s(8, 16384, 16) == 1.0                 # every rank has two chunks
        assert s(8, 4096, 0) == 1.0                   # chunks not stated: an even spread
        assert s(8, 0, 0) == 1.0                      # no prompt
        assert s(1, 512, 0.5) == 1.0                  # one rank
        # no rank holds more than its own budget N_r: a replica-wide chunk of 16,384 under N_r = 2,048 is the
        # 8 ranks' chunks (s = 1); under N_r = 4,096 the busiest holds 4,096 (s = 2)
        chunk = _prompts(f(16384.0), f(1.0))
        assert float(busiest_rank_scale(f(8.0), chunk, f(2048.0))) == 1.0
        assert float(busiest_rank_scale(f(8.0), chunk, f(4096.0))) == 2.0
        assert float(busiest_rank_scale(f(1.0), chunk, f(1024.0))) == 1.0


@settings(max_examples=60, deadline=None)
# token counts of at least 1e-6 (or none): XLA flushes subnormal floats to zero, which no count is
@given(dp=st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0]), tokens=st.one_of(st.just(0.0), st.floats(1e-6, 1e6)),
       chunks=st.one_of(st.just(0.0), st.floats(1e-6, 64.0)))
def test_the_busiest_rank_holds_between_an_even_share_and_every_prompt_token(dp, tokens, chunks):
    # Property: P / dp <= P_max <= P, so 1 <= s <= dp; s = 1 exactly with one rank, and with at least dp
    # equal chunks (every rank has its share).
    with jax.enable_x64(True):
        s = float(busiest_rank_scale(jnp.float64(dp), _prompts(jnp.float64(tokens), jnp.float64(chunks))))
        assert 1.0 - 1e-12 <= s <= dp * (1.0 + 1e-12)
        if dp == 1.0 or tokens == 0.0:
            assert s == 1.0
        if chunks >= dp and tokens > 0.0:
            assert s == pytest.approx(1.0, rel=1e-12)
        if tokens > 0.0:                                          # a rank budget of P / dp: an even share
            capped = busiest_rank_scale(jnp.float64(dp), _prompts(jnp.float64(tokens), jnp.float64(chunks)),
                                        jnp.float64(tokens) / dp)
            assert float(capped) == pytest.approx(1.0, rel=1e-12)
        d = decode_work(jnp.float64(1e5), jnp.float64(64.0))
        busiest = rank_tokens(jnp.float64(dp), d, _prompts(jnp.float64(tokens), jnp.float64(chunks)))
        assert float(busiest) == pytest.approx(64.0 + s * tokens, rel=1e-12)


def test_the_extra_work_is_the_other_ranks_copies_of_the_dense_and_attention_work():
    # DeepSeek-V3, one prompt chunk of 2,048 tokens on one of 8 ranks: dF = 7 (2 P_rep T + F_attn), dO = 7 (T D w
    # + KV_read kv), P_rep = P_mm - k P_e the non-expert matmul weights
    with jax.enable_x64(True):
        m = model_arrays(get_model("deepseek-v3"), jnp.float64)
        chunk = chunk_work(jnp.float64(0.0), jnp.float64(2048.0))
        d_f, d_o = busiest_rank_extra(jnp.float64(8.0), m, chunk, jnp.float64(1.0), jnp.float64(2.0))
        p_rep = float(m.matmul_params - m.experts_per_token * m.routed_expert_params)
        assert 10e9 < p_rep < 20e9                          # DeepSeek-V3: 37 B active, of it 8 of 256 routed experts
        assert float(d_f) == pytest.approx(7 * (2 * p_rep * 2048 + float(attention_flops(chunk, m))), rel=1e-12)
        assert float(d_o) == pytest.approx(7 * (2048 * 7168 + float(kv_bytes_read(chunk, m, 2.0))), rel=1e-12)
        none = busiest_rank_extra(jnp.float64(1.0), m, chunk, jnp.float64(1.0), jnp.float64(2.0))
        assert float(none[0]) == 0.0 and float(none[1]) == 0.0


def _dep8(fields):
    dev, m = get_device("H200"), get_model("deepseek-v3")
    lay = make_layout(dev, m, 1, dp=8, ep=8, imbalance=1.0, compute_format="fp8", dtype=jnp.float64)
    inst = instance(dev, m, None, 1, "fp8", "bf16", "fp8", 0, jnp.float64, pipelined=False, layout=lay)
    return inst if fields is None else dataclasses.replace(inst, efficiency=efficiency_arrays(fields, jnp.float64))


def test_one_chunk_on_one_rank_costs_what_every_rank_holding_it_costs_but_for_the_experts():
    # A DEP8 step (DeepSeek-V3 on 8 H200, no expert imbalance so the layout adds no work) of 1,024 decode rows
    # and one prompt chunk of 1,024 tokens, under the TensorRT-LLM profile: its rank-local classes are those of
    # the step where all 8 ranks hold such a chunk (8 equal chunks: s = 1), only the grouped MoE class sees the
    # step's own tokens, and the all-to-all and host time follow the busiest rank's 1,152 tokens in both.
    with jax.enable_x64(True):
        inst = _dep8(profile_for("tensorrt-llm").fields("H200", "fp8"))
        ctx, rows = jnp.float64(1024 * 2048.0), jnp.float64(1024.0)
        one = chunk_work(jnp.float64(0.0), jnp.float64(1024.0))
        eight = combine(*[one] * 8)
        t1, _ = step_cost(inst, ctx, rows, one, 0)
        t8, _ = step_cost(inst, ctx, rows, eight, 0)

        def moe(tokens):
            return step_time_by_class(decode_work(ctx, rows), Work(0.0, 0.0, 0.0), inst.target, inst.device,
                                      inst.efficiency, jnp.float64(8.0), inst.weight_bytes, inst.kv_bytes,
                                      inst.compute_speedup, expert_tokens=tokens)["moe"]
        assert float(t1 - moe(1024.0 + 1024.0)) == pytest.approx(float(t8 - moe(1024.0 + 8 * 1024.0)), rel=1e-9)
        assert float(t8) > float(t1)                 # the experts of 7 more chunks
        # spread evenly, the same 1,024 prompt tokens cost less: the rank-local work of 1 chunk, not of 8
        spread = scaled(one, jnp.float64(1.0 / 8.0))
        t_even, _ = step_cost(inst, ctx, rows, dataclasses.replace(spread, rows=jnp.float64(8.0)), 0)
        assert float(t_even) < float(t1)


def test_the_reference_roofline_adds_the_busiest_ranks_flops():
    # Without a profile the pass's slot adds dF of busiest_rank_extra: a compute-bound prompt of 16,384 tokens
    # alone on one of 8 ranks takes longer than 8 chunks of 2,048 (one per rank), whose scale is 1.
    with jax.enable_x64(True):
        inst = _dep8(None)
        big = chunk_work(jnp.float64(0.0), jnp.float64(16384.0))
        spread = combine(*[chunk_work(jnp.float64(0.0), jnp.float64(2048.0))] * 8)
        z = jnp.float64(0.0)
        t_one, _ = step_cost(inst, z, z, big, 0)
        t_spread, _ = step_cost(inst, z, z, spread, 0)
        assert float(busiest_rank_scale(jnp.float64(8.0), spread)) == 1.0
        assert float(t_one) > 3.0 * float(t_spread)
        assert float(target_pass_cost(inst, big).flops) > 0.0
