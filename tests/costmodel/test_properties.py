"""Invariants of the cost model and the speculative maths, as Hypothesis property tests."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sweepkit import evaluate
from sweepkit.catalogue import device_names, format_names, get_device, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.passes import decode_work, verify_work
from sweepkit.costmodel.steps import pass_cost
from sweepkit.speculative import expected_tokens

devices = st.sampled_from(device_names())
models = st.sampled_from(["llama-3-8b", "llama-3.2-1b", "llama-3.2-3b", "qwen2.5-7b", "llama-3-70b"])
drafts = st.sampled_from(["mtp", "llama-3.2-1b"])
alphas = st.floats(0.0, 1.0, allow_nan=False)
gammas = st.integers(0, 12)
batches = st.integers(1, 1024)
contexts = st.integers(1, 32768)
tps = st.sampled_from([1, 2, 4, 8])
fmts = st.sampled_from(format_names())


@given(alphas, st.integers(0, 64))
def test_expected_tokens_between_one_and_gamma_plus_one(alpha, gamma):
    e = float(expected_tokens(alpha, gamma))
    assert 1.0 - 1e-6 <= e <= gamma + 1.0 + 1e-5


@jax.jit
def _verify_pass_s(m, dev, ctx, batch, positions, tp, wb, kb):
    """A verify pass's time, compiled once: every device and model is data of one program."""
    f = jnp.float64
    return pass_cost(verify_work(ctx, batch, positions), m, dev, tp, wb, kb, f(1.0)).t_s


def _pass_s(device, model, ctx, batch, positions, tp, wb, kb):
    with jax.enable_x64(True):
        f = jnp.float64
        dev, m = device_arrays(get_device(device), f), model_arrays(get_model(model), f)
        return float(_verify_pass_s(m, dev, f(ctx), f(batch), f(positions), f(tp), f(wb), f(kb)))


@given(devices, models, batches, contexts, st.integers(1, 9), tps, st.integers(1, 256), st.integers(1, 4096),
       st.integers(1, 4))
def test_pass_time_never_falls_as_batch_context_or_positions_grow(device, model, batch, context, positions, tp,
                                                                   d_batch, d_context, d_positions):
    base = _pass_s(device, model, batch * context, batch, positions, tp, 2.0, 2.0)
    more_batch = _pass_s(device, model, (batch + d_batch) * context, batch + d_batch, positions, tp, 2.0, 2.0)
    more_ctx = _pass_s(device, model, batch * (context + d_context), batch, positions, tp, 2.0, 2.0)
    more_pos = _pass_s(device, model, batch * context, batch, positions + d_positions, tp, 2.0, 2.0)
    assert more_batch >= base * (1 - 1e-12)
    assert more_ctx >= base * (1 - 1e-12)
    assert more_pos >= base * (1 - 1e-12)


@given(devices, models, batches, contexts, tps)
def test_verify_with_gamma_zero_equals_decode(device, model, batch, context, tp):
    with jax.enable_x64(True):
        f = jnp.float64
        dev, m = device_arrays(get_device(device), f), model_arrays(get_model(model), f)
        dec, ver = _decode_and_verify(m, dev, f(batch * context), f(batch), f(tp))
    assert float(ver.t_s) == pytest.approx(float(dec.t_s), rel=1e-12)
    assert float(ver.energy_j) == pytest.approx(float(dec.energy_j), rel=1e-12)
    assert int(ver.bound) == int(dec.bound)


@jax.jit
def _decode_and_verify(m, dev, ctx, batch, tp):
    """A decode pass and a verify pass of one position, compiled once for every device and model."""
    f = jnp.float64
    return (pass_cost(decode_work(ctx, batch), m, dev, tp, f(2.0), f(2.0), f(1.0)),
            pass_cost(verify_work(ctx, batch, f(1.0)), m, dev, tp, f(2.0), f(2.0), f(1.0)))


@given(devices, drafts, batches, contexts, gammas, tps)
def test_speculation_never_helps_at_alpha_zero(device, draft, batch, context, gamma, tp):
    r = evaluate(device=device, model="llama-3-8b", draft=draft, batch=batch, context=context, gamma=gamma,
                 alpha=0.0, tp=tp)
    assert r["tokens_per_pass"] == 1.0
    assert r["speedup"] <= 1.0 + 1e-12
    assert r["energy_per_token_spec_j"] >= r["energy_per_token_plain_j"] * (1 - 1e-12)


@given(devices, drafts, batches, contexts, gammas, alphas, tps, fmts, fmts)
def test_energy_and_time_accounts_add_up(device, draft, batch, context, gamma, alpha, tp, wf, kf):
    r = evaluate(device=device, model="llama-3-8b", draft=draft, batch=batch, context=context, gamma=gamma,
                 alpha=alpha, tp=tp, weight_format=wf, kv_format=kf)
    tokens = r["tokens_per_pass"]
    assert 1.0 <= tokens <= gamma + 1.0 + 1e-9
    assert r["s_per_token_spec"] * batch * tokens == pytest.approx(r["t_verify_pass_s"] + r["t_draft_s"], rel=1e-9)
    assert r["speedup"] == pytest.approx(r["s_per_token_plain"] / r["s_per_token_spec"], rel=1e-9)
    assert r["s_per_token_plain"] * batch == pytest.approx(r["t_plain_pass_s"], rel=1e-12)
    # Each pass draws at least idle power for its duration; the draft costs something whenever gamma > 0.
    idle_w = get_device(device).idle_w * tp
    assert r["energy_per_token_plain_j"] * batch >= idle_w * r["t_plain_pass_s"] * (1 - 1e-12)
    assert (r["t_draft_s"] > 0) == (gamma > 0)


@given(devices, models, st.integers(1, 512), contexts, tps, st.integers(1, 512))
def test_memory_fit_is_monotone_in_batch(device, model, batch, context, tp, d_batch):
    assume(get_model(model).n_heads % tp == 0)              # evaluate refuses a tp that splits a head
    a = evaluate(device=device, model=model, draft="none", batch=batch, context=context, tp=tp)
    b = evaluate(device=device, model=model, draft="none", batch=batch + d_batch, context=context, tp=tp)
    assert a["fits_in_memory"] or not b["fits_in_memory"]
