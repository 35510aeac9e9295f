"""Routed experts in their own weight format: weight bytes = dense params x w + expert params x min(w, w_e)
(and, where the checkpoint keeps them wider, attention, head and embedding at max(w, w_a): test_kept_weights.py).

gpt-oss ships its MoE experts in MXFP4 (4 bits + one 8-bit scale per 32 values: 0.53125 B) and keeps
attention, router and embeddings in bf16 (HF openai/gpt-oss-120b config.json, quantization_config
modules_to_not_convert). The model card (arXiv 2508.10925, Table 1) gives checkpoints of 60.8 GiB
(gpt-oss-120b) and 12.8 GiB (gpt-oss-20b).
"""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_draft, get_format, get_model, model_names
from sweepkit.costmodel.arrays import model_arrays
from sweepkit.costmodel.memory import resident_bytes
from sweepkit.costmodel.passes import (chunk_work, decode_work, flops_and_bytes, kv_bytes_read, streamed_params,
                                      verify_work)
from sweepkit.evaluate import evaluate

MXFP4 = 0.53125
GIB = 2.0 ** 30


def _closed_form(name: str, w: float) -> float:
    # experts at min(w, MXFP4); attention, output head and embedding (kept bf16) at max(w, 2); the rest at w
    m = get_model(name)
    experts, kept = m.n_experts * m.routed_expert_params, m.kept_resident_params
    return (m.resident_params - experts - kept) * w + kept * max(w, 2.0) + experts * min(w, MXFP4)


@pytest.mark.parametrize("name, card_gib", [("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)])
def test_gpt_oss_bf16_weights_are_its_mxfp4_checkpoint(name, card_gib):
    r = evaluate(device="H200", model=name, weight_format="bf16")
    assert r["weight_bytes_per_device"] == pytest.approx(_closed_form(name, 2.0), rel=1e-12)
    assert r["weight_bytes_per_device"] / GIB == pytest.approx(card_gib, rel=5e-3)   # 60.69 and 12.80 GiB


@pytest.mark.parametrize("fmt", ["fp8", "fp4", "int4", "nvfp4"])
def test_a_narrower_weight_format_narrows_the_experts_too_but_not_the_kept_attention(fmt):
    w = get_format(fmt).bytes_per_value
    r = evaluate(device="H200", model="gpt-oss-120b", weight_format=fmt)
    assert r["weight_bytes_per_device"] == pytest.approx(_closed_form("gpt-oss-120b", w), rel=1e-12)
    m = get_model("gpt-oss-120b")
    if w <= MXFP4:       # everything at w but the 1.53 B attention / head + 0.58 B embedding parameters kept at 2 B
        assert r["weight_bytes_per_device"] == pytest.approx(
            m.resident_params * w + m.kept_resident_params * (2.0 - w), rel=1e-12)


@pytest.mark.parametrize("name, card_gib", [("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)])
def test_gpt_oss_at_its_native_fp4_is_its_checkpoint_too(name, card_gib):
    # the row's fp4 narrows what the checkpoint already keeps in MXFP4; attention, head and embedding stay bf16
    r = evaluate(device="H200", model=name, weight_format="fp4")
    assert r["weight_bytes_per_device"] / GIB == pytest.approx(card_gib, rel=5e-3)   # 60.67 and 12.80 GiB


def test_a_decode_step_reads_its_active_experts_at_mxfp4():
    # One token, bf16: 4 experts x 36 layers x 3 x 2,880^2 params cost 0.53125 B instead of 2 B.
    m = get_model("gpt-oss-120b")
    with jax.enable_x64(True):
        f = jnp.float64
        work = decode_work(f(0.0), f(1.0))
        mixed = flops_and_bytes(work, model_arrays(m, f), f(2.0), f(2.0))
        uniform = flops_and_bytes(work, model_arrays(dataclasses.replace(m, expert_weight_format=""), f), f(2.0),
                                  f(2.0))
    assert float(mixed[0]) == float(uniform[0])
    saved = 4 * 36 * 3 * 2880 ** 2 * (2.0 - MXFP4)
    assert float(uniform[1] - mixed[1]) == pytest.approx(saved, rel=1e-9)


UNIFORM = [n for n in model_names() if not (get_model(n).expert_weight_format or get_model(n).attention_weight_format)]


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(UNIFORM), st.sampled_from(["none", "mtp"]), st.sampled_from([2.0, 1.0, 0.53125, 0.5625]),
       st.integers(0, 1 << 20), st.integers(1, 512), st.integers(1, 8))
def test_models_without_an_expert_format_price_weights_as_before_bit_for_bit(name, draft, w, ctx, batch, positions):
    m = get_model(name)
    with jax.enable_x64(True):
        f = jnp.float64
        t, d = model_arrays(m, f), model_arrays(get_draft(draft, m), f)
        assert float(resident_bytes(t, d, f(w))) == float((t.resident_params + d.resident_params * d.present) * w)
        for work in (decode_work(f(ctx), f(batch)), verify_work(f(ctx), f(batch), f(positions)),
                     chunk_work(f(ctx), f(batch))):
            _, got = flops_and_bytes(work, t, f(w), f(1.0))
            old = (streamed_params(work.tokens, t) * w + work.tokens * t.d_model * w + kv_bytes_read(work, t, f(1.0)))
            assert float(got) == float(old)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["gpt-oss-120b", "gpt-oss-20b"]), st.sampled_from([2.0, 1.0, 0.53125, 0.5]),
       st.integers(0, 1 << 16), st.integers(1, 512))
def test_experts_in_their_own_format_never_cost_more(name, w, ctx, batch):
    m = get_model(name)
    with jax.enable_x64(True):
        f = jnp.float64
        mixed, uniform = model_arrays(m, f), model_arrays(dataclasses.replace(m, expert_weight_format=""), f)
        none = model_arrays(get_draft("none", m), f)
        work = decode_work(f(ctx * batch), f(batch))
        b_mixed, b_uniform = flops_and_bytes(work, mixed, f(w), f(2.0))[1], flops_and_bytes(work, uniform, f(w), f(2.0))[1]
        r_mixed, r_uniform = resident_bytes(mixed, none, f(w)), resident_bytes(uniform, none, f(w))
    assert float(b_mixed) <= float(b_uniform) and float(r_mixed) <= float(r_uniform)
    if w <= MXFP4:
        assert float(b_mixed) == float(b_uniform) and float(r_mixed) == float(r_uniform)


def test_the_catalogue_and_the_serving_cluster_fit_use_the_same_checkpoint_bytes():
    # One H100 may use 0.9 x 80 GB = 72 GB: gpt-oss-120b's bf16 checkpoint (65.17 GB) fits, all-bf16 (233.6 GB)
    # would not; llama-3-70b in bf16 (141 GB) is still refused with tp = 1.
    from sweepkit.errors import InputError
    from sweepkit.serving.cluster import parse_cluster

    m = get_model("gpt-oss-120b")
    assert m.resident_weight_bytes(2.0) == _closed_form("gpt-oss-120b", 2.0)
    assert get_model("llama-3-8b").resident_weight_bytes(2.0) == get_model("llama-3-8b").resident_params * 2.0
    cluster = parse_cluster({"model": "gpt-oss-120b", "instances": 1, "tp": 1, "devices": ["H100"]}, "c.toml")
    assert cluster.weight_format == "bf16"
    with pytest.raises(InputError, match="llama-3-70b's bf16 weights take"):
        parse_cluster({"model": "llama-3-70b", "instances": 1, "tp": 1, "devices": ["H100"]}, "c.toml")


def test_a_models_file_may_name_the_experts_format(tmp_path, monkeypatch):
    # A DeepSeek-V3-shaped model with its routed experts in NVFP4 (0.5625 B) and everything else in fp8.
    import json
    import tomllib
    from importlib.resources import files

    raw = tomllib.loads(files("sweepkit.catalogue").joinpath("models.toml").read_text())["models"]["deepseek-v3"]
    fields = {k: v for k, v in raw.items() if k not in ("quantization_config", "official_params",
                                                         "official_active_params")}
    body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in fields.items())
    (tmp_path / "mine.toml").write_text(f'[models.v3-nvfp4-experts]\n{body}\nexpert_weight_format = "nvfp4"\n')
    monkeypatch.chdir(tmp_path)
    r = evaluate(device="B200", model="v3-nvfp4-experts", weight_format="fp8", tp=8, models_file="mine.toml")
    m = get_model("deepseek-v3")
    experts = m.n_experts * m.routed_expert_params
    assert r["weight_bytes_per_device"] * 8 == pytest.approx((m.resident_params - experts) * 1.0 + experts * 0.5625,
                                                             rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["gpt-oss-120b", "gpt-oss-20b", "deepseek-v3", "qwen3-30b-a3b", "llama-3.1-8b"]),
       fmt=st.sampled_from(["bf16", "fp8", "fp4", "nvfp4", "int4"]))
def test_the_layout_holds_the_weights_as_the_instance_does(name, fmt):
    # costmodel.layout.layout_resident_bytes on the identity layout == costmodel.memory.resident_bytes
    from sweepkit.catalogue import get_device
    from sweepkit.costmodel.layout import layout_resident_bytes, make_layout

    w = get_format(fmt).bytes_per_value
    with jax.enable_x64(True):
        m = model_arrays(get_model(name), jnp.float64)
        absent = jax.tree_util.tree_map(jnp.zeros_like, m)
        lay = make_layout(get_device("H200"), get_model(name), 1, dtype=jnp.float64)
        assert float(layout_resident_bytes(lay, m, absent, w)) == pytest.approx(float(resident_bytes(m, absent, w)),
                                                                                rel=1e-12)


def test_an_expert_parallel_layout_keeps_the_experts_in_their_own_format():
    # gpt-oss-120b in bf16 as attention DP2 + EP2 on two GPUs: the non-expert weights once per DP rank at 2 B,
    # the 128 experts once at MXFP4: 2 x 2.127 B x 2 + 114.66 B x 0.53125 = 69.42 GB (237.8 GB all at 2 B)
    from sweepkit.catalogue import get_device
    from sweepkit.costmodel.layout import layout_resident_bytes, make_layout

    model = get_model("gpt-oss-120b")
    experts = model.n_experts * model.routed_expert_params
    closed = 2 * (model.resident_params - experts) * 2.0 + experts * MXFP4
    with jax.enable_x64(True):
        m = model_arrays(model, jnp.float64)
        absent = jax.tree_util.tree_map(jnp.zeros_like, m)
        lay = make_layout(get_device("H200"), model, 1, dp=2, ep=2, dtype=jnp.float64)
        assert float(layout_resident_bytes(lay, m, absent, 2.0)) == pytest.approx(closed, rel=1e-12)
    assert closed / 1e9 == pytest.approx(69.42, abs=0.01)


def test_the_serving_engine_gives_gpt_oss_in_bf16_its_kv_room_on_one_h100():
    # (0.9 x 80 GB - 65.17 GB) of KV; the engine refused the cluster ("the weights do not fit") while it
    # held every expert at 2 B
    from sweepkit.serving.cluster import parse_cluster
    from sweepkit.serving.config import Config, check, kv_tokens
    from sweepkit.serving.levers import Lever
    from sweepkit.costmodel.memory import kv_bytes_per_token

    cluster = parse_cluster({"model": "gpt-oss-120b", "instances": 1, "tp": 1, "devices": ["H100"]}, "c.toml")
    cfg = Config(device="H100", lever=Lever(name="baseline", description="b"))
    res = check(cluster, cfg, "c.toml")
    with jax.enable_x64(True):
        m = model_arrays(get_model("gpt-oss-120b"), jnp.float64)
        per_token = float(kv_bytes_per_token(m, jax.tree_util.tree_map(jnp.zeros_like, m), 2.0))
    free = 0.9 * 80e9 - _closed_form("gpt-oss-120b", 2.0)
    assert kv_tokens(cluster, cfg, res) == pytest.approx(free // per_token, abs=1.0)
