"""Target passes timed by a measured profile (sweepkit.costmodel.profiled) inside the step pricing API."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import profile_for
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time
from sweepkit.costmodel.layout import make_layout
from sweepkit.costmodel.passes import Work, chunk_work, decode_work
from sweepkit.costmodel.roofline import roofline
from sweepkit.costmodel.steps import instance, step_cost, target_pass, target_pass_cost

FIELDS_08 = dict(gemm_eff_max=0.7, gemm_tokens_half=0.0, moe_eff_max=0.5, moe_tokens_half=16.0,
                 attn_prefill_eff=0.5, weight_bw_eff=0.8, kv_bw_eff=0.8, link_eff=1.0, allreduce_overhead_s=0.0,
                 tp_loss=0.0, step_overhead_s=0.0, token_overhead_s=0.0)
NONE = Work(0.0, 0.0, 0.0)


def _inst(model="llama-3.1-8b", fields=FIELDS_08, tp=1, fmt="fp8", layout=None, pipelined=True, **kw):
    f = jnp.float64
    inst = instance(get_device("H100"), get_model(model), None, tp, fmt, fmt, fmt, 0, f, pipelined=pipelined,
                    layout=layout, **kw)
    return dataclasses.replace(inst, efficiency=None if fields is None else efficiency_arrays(fields, f))


def test_a_profiled_decode_step_is_the_closed_form_of_efficiency_py():
    # Llama-3.1-8B fp8 on one H100, 256 rows at 1,000 cached tokens, b_w = b_kv = 0.8, t_0 = 0: weights
    # 7.505 GB / 2.68 TB/s = 2.80 ms, KV 256,256 x 65.5 kB / 2.68 TB/s = 6.27 ms (efficiency.py's docstring).
    with jax.enable_x64(True):
        inst = _inst()
        t, _ = step_cost(inst, jnp.float64(256e3), jnp.float64(256.0), NONE, 0)
        closed = step_time(decode_work(256e3, 256.0), NONE, inst.target, inst.device, inst.efficiency, inst.tp,
                           inst.weight_bytes, inst.kv_bytes, inst.compute_speedup)
        assert float(t) == float(closed)                                  # the same sum, term for term
        assert float(t) == pytest.approx(9.07e-3, rel=2e-3)


@pytest.mark.parametrize("pipelined", [True, False])
def test_the_identity_layout_and_the_pipeline_slots_at_pp_1_change_nothing(pipelined):
    with jax.enable_x64(True):
        m, dev = get_model("mixtral-8x7b"), get_device("H100")
        fields = profile_for("tensorrt-llm").fields("H100", "fp8")
        lay = make_layout(dev, m, 2, compute_format="fp8", dtype=jnp.float64)
        work = chunk_work(jnp.float64(300.0), jnp.float64(700.0))
        plain = target_pass(_inst("mixtral-8x7b", fields, tp=2, pipelined=pipelined), work)[0]
        laid = target_pass(_inst("mixtral-8x7b", fields, tp=2, layout=lay), work)[0]
        inst = _inst("mixtral-8x7b", fields, tp=2)
        closed = step_time(NONE, work, inst.target, inst.device, inst.efficiency, inst.tp, inst.weight_bytes,
                           inst.kv_bytes, inst.compute_speedup)
        assert float(plain) == pytest.approx(float(closed), rel=1e-12)
        assert float(laid) == pytest.approx(float(closed), rel=1e-12)


def test_a_mixed_step_prices_decode_and_prefill_attention_as_separate_classes():
    # Each attention class is max(FLOPs term, KV term): the decode rows are KV-bound, the chunk FLOP-bound,
    # so the mixed step costs more than one max over their sums (what one combined Work would price).
    with jax.enable_x64(True):
        inst = _inst(fields={**FIELDS_08, "step_overhead_s": 1e-3})
        ctx, rows, chunk = jnp.float64(64e3), jnp.float64(64.0), chunk_work(jnp.float64(0.0), jnp.float64(4096.0))
        t, _ = step_cost(inst, ctx, rows, chunk, 0)
        closed = step_time(decode_work(ctx, rows), chunk, inst.target, inst.device, inst.efficiency, inst.tp,
                           inst.weight_bytes, inst.kv_bytes, inst.compute_speedup)
        assert float(t) == pytest.approx(float(closed), rel=1e-12)
        whole = target_pass(inst, Work(*(a + b for a, b in zip(
            (rows, 2.0 * (ctx + rows), ctx + rows), (chunk.tokens, chunk.attn_pairs, chunk.kv_tokens)))))[0]
        assert float(t) > float(whole)


def test_profiled_energy_is_the_reference_dynamic_energy_plus_idle_power_over_the_profiled_time():
    with jax.enable_x64(True):
        ref, prof = _inst(fields=None), _inst()
        work = decode_work(jnp.float64(32e3), jnp.float64(32.0))
        _, e_ref = target_pass(ref, work)
        t, e = target_pass(prof, work)
        assert float(e) == float(e_ref)
        cost = target_pass_cost(prof, work)
        assert float(cost.energy_j) == pytest.approx(float(e + prof.device.idle_w * prof.devices * t), rel=1e-12)
        slot = roofline(cost.flops, cost.bytes, ref.device, ref.tp, ref.compute_speedup, 0.0)
        assert int(cost.bound) == int(slot.bound)                        # the reference slot's bound


def test_pipeline_stages_add_a_bubble_and_hops():
    # pp = 2, two micro-batches: 3 slots of half the layers over half the rows each, plus one hop per slot
    # (decode work is linear: half of decode_work(ctx, b) is decode_work(ctx / 2, b / 2)).
    with jax.enable_x64(True):
        one = _inst(fields={**FIELDS_08, "gemm_tokens_half": 64.0})
        two = _inst(fields={**FIELDS_08, "gemm_tokens_half": 64.0}, pp=2, microbatches=2)
        work = decode_work(jnp.float64(64e3), jnp.float64(256.0))
        half = target_pass(one, decode_work(jnp.float64(32e3), jnp.float64(128.0)))[0]
        size = 128.0 * one.target.d_model * 2.0
        hop = size / one.device.link_bytes_per_s + one.device.link_latency_s
        assert float(target_pass(two, work)[0]) == pytest.approx(float(3 * (half / 2 + hop)), rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(ctx=st.floats(0.0, 2e6), rows=st.floats(0.0, 512.0), cached=st.floats(0.0, 8e3), new=st.floats(0.0, 8e3),
       tp=st.sampled_from([1, 2, 8]))
def test_any_mixed_step_under_a_profile_is_the_class_split_of_its_parts(ctx, rows, cached, new, tp):
    # Property: with no pipeline and no layout, a step (decode rows + one prompt chunk) costs exactly
    # efficiency.step_time of its decode rows and its chunk apart (0 for an empty step), and never less than
    # the profile's host time per step.
    with jax.enable_x64(True):
        fields = profile_for("tensorrt-llm").fields("H100", "fp8")
        t, closed, floor = _mixed(tp, fields, ctx, rows, cached, new)
        assert float(t) == pytest.approx(float(closed), rel=1e-12, abs=1e-15)
        assert float(t) == 0.0 or float(t) >= float(floor)


_INSTS = {}


def _mixed(tp, fields, ctx, rows, cached, new):
    inst = _INSTS.setdefault(tp, _inst("llama-3.1-70b", fields, tp=tp))
    f = jnp.float64
    return _mixed_step(inst, f(ctx), f(rows), f(cached), f(new))


@jax.jit
def _mixed_step(inst, ctx, rows, cached, new):
    """(step_cost's time, step_time of its parts, the host time per step), compiled once per instance layout."""
    chunk = chunk_work(cached, new)
    t, _ = step_cost(inst, ctx, rows, chunk, 0)
    closed = step_time(decode_work(ctx, rows), chunk, inst.target, inst.device, inst.efficiency, inst.tp,
                       inst.weight_bytes, inst.kv_bytes, inst.compute_speedup)
    return t, closed, inst.efficiency.step_overhead_s
