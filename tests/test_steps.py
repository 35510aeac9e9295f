"""The one pricing API (sweepkit.costmodel.steps) against the per-pass cost model and GPipe's closed form."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest

from sweepkit.catalogue import get_device, get_draft, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.passes import Work, chunk_work, decode_work, flops_and_bytes, verify_work
from sweepkit.costmodel.roofline import roofline
from sweepkit.costmodel.steps import Instance, draft_pass, instance, step_cost, target_pass
from sweepkit.errors import InputError
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config, check, kv_tokens, resolve
from sweepkit.serving.levers import Lever, load_levers

pytestmark = pytest.mark.usefixtures("x64")   # the pricing API in float64, as the serving engine calls it
F = jnp.float64


def _inst(tp=4.0, pp=1.0, mb=1.0, device="H100"):
    dev = device_arrays(get_device(device), F)
    return Instance(device=dev, target=model_arrays(get_model("llama-3-70b"), F), draft=model_arrays(None, F),
                    tp=F(tp), pp=F(pp), microbatches=F(mb), weight_bytes=F(2.0), kv_bytes=F(2.0),
                    compute_speedup=F(1.0), gamma=F(0.0))


def _pass(inst, work):
    """A tensor-parallel target pass written out: the roofline, the fixed overhead and 2 L ring all-reduces of
    T D x 2 bytes, each 2 (n-1)/n x S / link + 2 (n-1) x latency; (seconds, dynamic joules)."""
    m, dev, tp = inst.target, inst.device, inst.tp
    flops, bytes_ = flops_and_bytes(work, m, inst.weight_bytes, inst.kv_bytes)
    c = roofline(flops, bytes_, dev, tp, inst.compute_speedup, 0.0)
    size = work.tokens * m.d_model * 2.0
    ring_s = 2.0 * (tp - 1.0) / tp * size / dev.link_bytes_per_s + 2.0 * (tp - 1.0) * dev.link_latency_s
    t = c.t_s + dev.pass_overhead_s + dev.token_overhead_s * work.tokens + 2.0 * m.n_layers * ring_s
    link_j = 2.0 * m.n_layers * 2.0 * (tp - 1.0) * size * 8.0 * dev.link_energy_per_bit_j
    return float(t), float(c.energy_j - dev.idle_w * tp * c.t_s + link_j)


with jax.enable_x64(True):
    NONE = Work(F(0.0), F(0.0), F(0.0))


def test_decode_and_prefill_steps_equal_one_tensor_parallel_pass():
    inst = _inst()
    t, e = step_cost(inst, F(4096.0), F(8.0), NONE, 0)
    assert (float(t), float(e)) == pytest.approx(_pass(inst, decode_work(F(4096.0), F(8.0))), rel=1e-12)
    t, e = step_cost(inst, F(0.0), F(0.0), chunk_work(F(0.0), F(2048.0)), 0)
    assert (float(t), float(e)) == pytest.approx(_pass(inst, chunk_work(F(0.0), F(2048.0))), rel=1e-12)
    assert float(step_cost(inst, F(0.0), F(0.0), NONE, 0)[0]) == 0.0


def test_speculative_decode_step_is_verify_plus_gamma_draft_passes_and_prefill_adds_the_drafts_prefill():
    m = get_model("llama-3-70b")
    inst = instance(get_device("H100"), m, get_draft("mtp", m), 4, "bf16", "bf16", "bf16", 3, F)
    ctx, b, prompt = F(8 * 2048.0), F(8.0), chunk_work(F(0.0), F(1024.0))
    drafts = [draft_pass(inst, decode_work(ctx + j * b, b)) for j in range(3)]
    verify = target_pass(inst, verify_work(ctx, b, F(4.0)))
    t, e = step_cost(inst, ctx, b, NONE, 4)                  # gamma_max 4 > gamma 3: the fourth is masked
    assert float(t) == pytest.approx(float(verify[0]) + sum(float(d[0]) for d in drafts), rel=1e-12)
    assert float(e) == pytest.approx(float(verify[1]) + sum(float(d[1]) for d in drafts), rel=1e-12)
    t, _ = step_cost(inst, F(0.0), F(0.0), prompt, 4)
    assert float(t) == pytest.approx(float(target_pass(inst, prompt)[0] + draft_pass(inst, prompt)[0]), rel=1e-12)
    assert float(draft_pass(inst, prompt)[0]) > 0


def test_pipeline_step_is_gpipe_slots_plus_overhead_and_microbatches_trade_prefill_for_decode():
    # time - communication = (mb + pp - 1) x slot + overhead (GPipe, arXiv:1811.06965 sec. 2.2)
    inst = _inst(tp=2.0, pp=2.0, mb=2.0)
    work = chunk_work(F(0.0), F(4096.0))
    t, _ = target_pass(inst, work)
    no_link = dataclasses.replace(inst, device=dataclasses.replace(inst.device, link_latency_s=F(0.0),
                                                                   link_bytes_per_s=F(1e30)))
    t0, _ = target_pass(no_link, work)
    m = inst.target
    w_bytes = (m.matmul_params + 4096.0 * m.d_model) * 2.0
    flops, bytes_ = flops_and_bytes(work, m, F(2.0), F(2.0))
    slot = roofline(flops / 4.0, w_bytes / 2.0 + (bytes_ - w_bytes) / 4.0, inst.device, F(2.0), F(1.0), 0.0)
    assert float(t0) == pytest.approx(3.0 * float(slot.t_s) + float(inst.device.pass_overhead_s), rel=1e-9)
    assert float(t) > float(t0)
    pre1, pre2 = (float(target_pass(_inst(2.0, 2.0, mb), work)[0]) for mb in (1.0, 2.0))
    dec1, dec2 = (float(target_pass(_inst(2.0, 2.0, mb), decode_work(F(8192.0), F(16.0)))[0]) for mb in (1.0, 2.0))
    assert pre2 < pre1 and dec2 > dec1


def test_kv_capacity_per_layout_and_format():
    cl, lv = load_cluster(), load_levers()
    cap = {k: kv_tokens(cl, Config("H100", lv[k]), resolve(cl, lv[k]))
           for k in ("baseline", "tp2pp2", "tp8", "tp2x4", "kv-fp8")}
    assert cap["baseline"] == 448_288                     # Llama-3-70B on 4 x H100 (docs/costmodel.md)
    assert cap["tp2pp2"] == cap["baseline"]
    assert cap["tp8"] > 2.9 * cap["baseline"] and cap["tp2x4"] < 0.03 * cap["baseline"]
    assert cap["kv-fp8"] == pytest.approx(2 * cap["baseline"], abs=1)


@pytest.mark.parametrize("lever, device, words", [
    (Lever("x", kv="paged", prefix_caching=True, preemption="swap"), "H100", "preemption = 'swap'"),
    (Lever("x", prefix_caching=True), "H100", "needs kv = 'paged'"),
    (Lever("x", weight_format="fp4", compute_format="fp4"), "H100", "no fp4 compute units"),
    (Lever("x", tp=2, pp=2, draft="mtp", gamma=3, alpha=0.7), "H100", "pipeline parallelism"),
    (Lever("x", weight_format="int4", compute_format="fp8"), "H100", "must be bf16"),
    (Lever("x", instances=3), "H100", "GPUs, expected the cluster's 8"),
    (Lever("x", instances=8, tp=1), "H100", "weights do not fit"),
])
def test_impossible_combinations_are_refused_in_one_line(lever, device, words):
    with pytest.raises(InputError) as exc:
        check(load_cluster(), Config(device, lever), "levers.toml")
    msg = str(exc.value)
    assert words in msg and "\n" not in msg and msg.startswith("levers.toml: lever 'x'")


def test_fp4_lever_is_accepted_on_b200():
    lv = load_levers()["w4a4-fp4"]
    assert check(load_cluster(), Config("B200", lv), "levers.toml").compute_format == "fp4"
