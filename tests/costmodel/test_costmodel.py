"""Cost model against the seed's hand check, decode table and anchors (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sweepkit import evaluate
from sweepkit.catalogue import get_device, get_draft, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.passes import chunk_work, combine, decode_work, flops_and_bytes
from sweepkit.costmodel.roofline import CLOCK_FLOOR, _cardano_root, cubic_root_newton, roofline
from sweepkit.costmodel.steps import pass_cost

# The chapter's decode table (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim, "Why it helps at low batch and hurts at high"):
# Llama-3-8B, MTP draft, gamma 3, alpha 0.7, context 512.
SEED_TABLE = [
    ("H100", 1, 6.126, 3.076, "memory", 1.99),
    ("H100", 32, 0.216, 0.107, "memory", 2.02),
    ("H100", 128, 0.073, 0.053, "power", 1.37),
    ("H100", 512, 0.037, 0.048, "compute", 0.77),
    ("A100", 1, 9.743, 4.927, "memory", 1.98),
    ("A100", 128, 0.117, 0.153, "compute", 0.76),
]


@pytest.mark.parametrize("device, batch, plain_ms, spec_ms, bound, speedup", SEED_TABLE)
def test_seed_decode_table(device, batch, plain_ms, spec_ms, bound, speedup):
    r = evaluate(device=device, model="llama-3-8b", draft="mtp", batch=batch, context=512, gamma=3, alpha=0.7)
    assert r["s_per_token_plain"] * 1e3 == pytest.approx(plain_ms, rel=0.02)
    assert r["s_per_token_spec"] * 1e3 == pytest.approx(spec_ms, rel=0.02)
    assert r["verify_bound"] == bound
    assert r["speedup"] == pytest.approx(speedup, rel=0.02)


def test_seed_hand_check_to_three_digits():
    # the reference simulator (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim): bytes 15.0766e9 / (3.35e12 x 0.8) = 5.626 ms + 0.5 ms = 6.126 ms; verify 6.126 ms;
    # one MTP pass 1.489e9 B -> 0.556 ms, x 3 = 1.667 ms; (6.126 + 1.667) / 2.533 = 3.076 ms -> 1.99x.
    r = evaluate(device="H100", model="llama-3-8b", draft="mtp", batch=1, context=512, gamma=3, alpha=0.7)
    assert round(r["t_plain_pass_s"] * 1e3, 3) == 6.126
    assert round(r["t_verify_pass_s"] * 1e3, 3) == 6.126
    assert round(r["t_draft_s"] * 1e3, 3) == 1.667
    assert round(r["tokens_per_pass"], 3) == 2.533
    assert round(r["s_per_token_spec"] * 1e3, 3) == 3.076
    assert round(r["speedup"], 2) == 1.99
    assert r["draft_cost_ratio"] == pytest.approx(0.556 / 6.126, rel=1e-3)   # Leviathan's c on an H100


def test_decode_bytes_of_the_hand_check():
    with jax.enable_x64(True):
        m = model_arrays(get_model("llama-3-8b"), jnp.float64)
        _, bytes_ = flops_and_bytes(decode_work(jnp.float64(512), jnp.float64(1)), m, 2.0, 2.0)
    assert float(bytes_) == pytest.approx(15.0766e9, rel=1e-5)


@pytest.mark.parametrize("model, draft, tp, expected", [
    ("llama-3-8b", "none", 1, 426_788), ("llama-3-8b", "mtp", 1, 410_628), ("llama-3-70b", "none", 4, 448_288)])
def test_kv_capacity_anchors(model, draft, tp, expected):
    # the reference simulator (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim): 8B on 1 x H100 426,788 (410,628 with MTP); 70B on 4 x H100 448,288 tokens.
    r = evaluate(device="H100", model=model, draft=draft, tp=tp, batch=1, context=1)
    assert r["kv_capacity_tokens"] == pytest.approx(expected, abs=2)


def test_tp4_70b_decode_step_and_allreduce_share():
    # the reference simulator (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim): TP4 70B decode b=1: 18.3 ms of which 26.2% all-reduce (4.8 ms, latency-dominated).
    r = evaluate(device="H100", model="llama-3-70b", draft="none", tp=4, batch=1, context=1)
    assert r["t_plain_pass_s"] * 1e3 == pytest.approx(18.3, abs=0.05)
    dev, m = device_arrays(get_device("H100")), model_arrays(get_model("llama-3-70b"))
    free_links = dataclasses.replace(dev, link_latency_s=jnp.float32(0.0), link_bytes_per_s=jnp.float32(1e30))
    seconds = (pass_cost(decode_work(1.0, 1.0), m, dev, 4.0, 2.0, 2.0, 1.0).t_s
               - pass_cost(decode_work(1.0, 1.0), m, free_links, 4.0, 2.0, 2.0, 1.0).t_s)
    assert float(seconds) * 1e3 == pytest.approx(4.8, abs=0.01)
    assert float(seconds) / r["t_plain_pass_s"] == pytest.approx(0.262, abs=0.002)


def test_70b_does_not_fit_on_one_h100():
    r = evaluate(device="H100", model="llama-3-70b", draft="none", batch=1, context=512)
    assert r["fits_in_memory"] is False and r["kv_capacity_tokens"] == 0.0


def test_prefill_is_compute_bound_and_decode_memory_bound():
    dev, m = device_arrays(get_device("H100")), model_arrays(get_model("llama-3-8b"))
    prefill = pass_cost(chunk_work(0.0, 2048.0), m, dev, 1.0, 2.0, 2.0, 1.0)
    decode = pass_cost(decode_work(512.0, 1.0), m, dev, 1.0, 2.0, 2.0, 1.0)
    assert int(prefill.bound) in (1, 2) and int(decode.bound) == 0


def test_mixed_step_reads_weights_once():
    m = model_arrays(get_model("llama-3-8b"))
    a, b = chunk_work(0.0, 100.0), decode_work(1000.0, 4.0)
    f_a, by_a = flops_and_bytes(a, m, 2.0, 2.0)
    f_b, by_b = flops_and_bytes(b, m, 2.0, 2.0)
    f_ab, by_ab = flops_and_bytes(combine(a, b), m, 2.0, 2.0)
    assert float(f_ab) == pytest.approx(float(f_a + f_b), rel=1e-6)
    weights = float(m.matmul_params) * 2.0
    assert float(by_ab) == pytest.approx(float(by_a + by_b) - weights, rel=1e-6)


def test_newton_matches_cardano_closed_form():
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        root = rng.uniform(CLOCK_FLOOR, 1.0, 2000)
        p = rng.uniform(0.0, 5.0, 2000) * 10 ** rng.uniform(-3, 1, 2000)
        q = -(root ** 3 + p * root)
        np.testing.assert_allclose(np.asarray(cubic_root_newton(jnp.asarray(p), jnp.asarray(q))), root, rtol=1e-9)
        np.testing.assert_allclose(np.asarray(_cardano_root(jnp.asarray(p), jnp.asarray(q))), root, rtol=1e-9)


def test_power_bound_pass_respects_the_budget():
    # H100 verify at batch 128 is power bound (seed table); its dynamic power must equal the 600 W budget.
    with jax.enable_x64(True):
        dev = device_arrays(get_device("H100"), jnp.float64)
        flops, bytes_ = 7.8e12, 23.7e9
        cost = roofline(jnp.float64(flops), jnp.float64(bytes_), dev, 1.0, 1.0, 0.0)
        dynamic_w = (float(cost.energy_j) - 100.0 * float(cost.t_s)) / float(cost.t_s)
    assert int(cost.bound) == 2
    assert dynamic_w == pytest.approx(600.0, rel=1e-6)


def test_clock_floor_stretches_time():
    # A pass too hot even at the 0.4 clock floor is stretched until its energy fits the budget.
    # No catalogue device gets there (H100 pure compute draws 544 W < 600 W), so use a hypothetical 20 pJ/FLOP
    # part: s^3 = 600 / (20 x 544) = 0.055 puts the solved clock (0.38) under the floor.
    with jax.enable_x64(True):
        dev = dataclasses.replace(device_arrays(get_device("H100"), jnp.float64), energy_per_flop_j=jnp.float64(20e-12))
        flops = 1e15
        cost = roofline(jnp.float64(flops), jnp.float64(1.0), dev, 1.0, 1.0, 0.0)
        t_c = flops / (989e12 * 0.55)
        e_dyn = flops * 20e-12 * CLOCK_FLOOR ** 2
        expected = max(t_c / CLOCK_FLOOR, e_dyn / 600.0)
    assert float(cost.t_s) == pytest.approx(expected, rel=1e-9) and int(cost.bound) == 2


def test_energy_accounts_add_up():
    # energy = dynamic (FLOPs x e_flop / k + bytes x e_byte at clock s) + idle power x devices x time.
    with jax.enable_x64(True):
        dev = device_arrays(get_device("A100"), jnp.float64)
        cost = roofline(jnp.float64(1e11), jnp.float64(2e10), dev, 2.0, 2.0, 5e-4)
        expected = 1e11 * 1.6e-12 / 2.0 + 2e10 * 70e-12 + 60.0 * 2.0 * float(cost.t_s)
    assert float(cost.energy_j) == pytest.approx(expected, rel=1e-9)


def test_weight_formats_shrink_memory_bound_decode():
    bf16 = evaluate(device="H100", model="llama-3-8b", draft="none", batch=1, context=512)
    int4 = evaluate(device="H100", model="llama-3-8b", draft="none", batch=1, context=512, weight_format="int4")
    fp8kv = evaluate(device="H100", model="llama-3-8b", draft="none", batch=64, context=4096, kv_format="fp8")
    bf16kv = evaluate(device="H100", model="llama-3-8b", draft="none", batch=64, context=4096)
    assert int4["t_plain_pass_s"] < 0.35 * bf16["t_plain_pass_s"] + 0.5e-3
    assert fp8kv["t_plain_pass_s"] < bf16kv["t_plain_pass_s"]
    assert int4["weight_bytes_per_device"] == pytest.approx(8.03e9 * 0.515625, rel=0.01)


def test_fp8_compute_speeds_up_compute_bound_passes_only_where_native():
    h100 = [evaluate(device="H100", model="llama-3-8b", draft="none", batch=2048, context=64, compute_format=f)
            for f in ("bf16", "fp8")]
    a100 = [evaluate(device="A100", model="llama-3-8b", draft="none", batch=2048, context=64, compute_format=f)
            for f in ("bf16", "fp8")]
    assert h100[1]["t_plain_pass_s"] < h100[0]["t_plain_pass_s"]
    assert a100[1]["t_plain_pass_s"] == a100[0]["t_plain_pass_s"]


def test_separate_draft_model_costs_its_own_weights_and_kv():
    mtp = evaluate(device="H100", model="llama-3-8b", draft="mtp", batch=1, context=512)
    small = evaluate(device="H100", model="llama-3-8b", draft="llama-3.2-1b", batch=1, context=512, gamma=4)
    assert small["kv_capacity_tokens"] < mtp["kv_capacity_tokens"]
    assert small["weight_bytes_per_device"] > mtp["weight_bytes_per_device"]
    assert get_draft("llama-3.2-1b", get_model("llama-3-8b")).model.n_layers == 16
