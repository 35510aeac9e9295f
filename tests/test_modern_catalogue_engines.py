"""The cost model, the sweep and the serving engine accept the modern catalogue: new models on new devices,
named by HF ids and vendor spellings."""

from pathlib import Path

import numpy as np
import pytest

import sweepkit
from sweepkit.catalogue import get_model

GRIDS = Path(__file__).resolve().parent / "grids"

# (device, model, tp, weight format): each point fits in HBM.
POINTS = [
    ("GB200", "gpt-oss-120b", 1, "fp4"), ("B300", "openai/gpt-oss-20b", 1, "fp4"),
    ("H200", "llama-4-maverick", 8, "fp8"), ("MI355X", "Qwen/Qwen3-235B-A22B-Instruct-2507", 4, "fp8"),
    ("GB300 NVL72", "kimi-k2", 8, "fp4"), ("L40S", "mistral-7b", 1, "fp8"), ("RTX PRO 6000", "qwen3-32b", 1, "fp8"),
    ("B200 (HGX)", "deepseek-ai/DeepSeek-R1", 8, "fp4"), ("MI325X", "glm-4.5-air", 2, "fp8"),
    ("H800", "mixtral-8x22b", 4, "fp8"), ("GH200", "qwen3-8b", 1, "bf16"), ("MI300X", "llama-4-scout", 2, "bf16"),
]


@pytest.mark.parametrize("device, model, tp, fmt", POINTS)
def test_evaluate_prices_every_new_model(device, model, tp, fmt):
    r = sweepkit.evaluate(device=device, model=model, tp=tp, weight_format=fmt, batch=16, context=8192)
    assert r["fits_in_memory"] and r["kv_capacity_tokens"] > 16 * 8192
    assert 0.0 < r["s_per_token_plain"] < 1.0


def test_sliding_window_makes_long_context_decode_cheaper():
    # gpt-oss-120b at 64K context, batch 64, on GB200: half the layers read 129 positions per row instead of
    # 65,537, so a step is faster than the same model with every layer attending to the whole context.
    import dataclasses

    from sweepkit.catalogue import model_registry as catalogue_models

    full = catalogue_models.register_model(dataclasses.replace(get_model("gpt-oss-120b"), name="gpt-oss-120b-full",
                                                               window_layers=0, sliding_window=0))
    args = dict(device="GB200", weight_format="fp4", batch=64, context=65536)
    try:
        windowed = sweepkit.evaluate(model="gpt-oss-120b", **args)["s_per_token_plain"]
        assert windowed < 0.75 * sweepkit.evaluate(model=full.name, **args)["s_per_token_plain"]
    finally:
        catalogue_models._REGISTERED.pop(full.name)


def test_serving_engine_runs_a_windowed_moe_on_an_nvl72_gpu():
    # The one serving simulation of this file (~30 s on a 2-core VM, most of it compiling): gpt-oss-20b named by
    # its HF id on a GB200 named by its rack spelling, 16 single-turn sessions all finish.
    from sweepkit.serving.cluster import make_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.lanes import run_configs
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads

    w = load_workloads(GRIDS / "tiny-workloads.toml")["tiny"]
    cluster = make_cluster(model="openai/gpt-oss-20b", instances=1, tp=1, devices=["GB200 NVL72"], batch_cap=32,
                           weight_format="fp4")
    lanes = run_configs(w, cluster, [Config("GB200", load_levers()["baseline"])], np.ones((1, 1)), early_stop=False)
    assert np.isfinite(lanes.state(0, 0).finish_s).sum() == w.min_sessions
