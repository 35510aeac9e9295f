"""Hybrid linear-attention models in the serving engine: each request holds its Gated DeltaNet state beside its KV.

Qwen3.5-9B (HF Qwen/Qwen3.5-9B config.json): 24 Gated DeltaNet layers of 32 x 128 x 128 float32 state values
plus a 3 x 8,192 bf16 convolution state (2,146,304 B per layer), 8 full-attention layers of 4 KV heads of 256
(32,768 B of bf16 KV per token): one request's state is 51,511,296 / 32,768 = 1,572 token positions, 99 paged
blocks of 16 (vLLM's hybrid KV-cache manager allocates the state from the same pool as the KV).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.catalogue import get_device, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.passes import chunk_work, combine, decode_work
from sweepkit.costmodel.steps import pass_cost
from sweepkit.serving.config import policy, state_tokens
from sweepkit.serving.lever_fields import resolve
from sweepkit.validation import MODELLED, parse_measurements, status
from sweepkit.validation.serving_points import point_config
from sweepkit.validation.serving_runs import evaluate_serving

HEAD = "source,device,model,metric,value,unit,weight_format,kv_format,input_tokens,output_tokens,requests\n"
B, P, O = 8, 32, 8
ROW = f"tiny,H100,Qwen/Qwen3.5-9B,max_output_throughput,2000,tok/s,bf16,bf16,{P},{O},{B}\n"


def _pass_s(work) -> float:
    with jax.enable_x64(True):
        f = jnp.float64
        return float(pass_cost(work, model_arrays(get_model("qwen3.5-9b"), f), device_arrays(get_device("H100"), f),
                               f(1), f(2), f(2), f(1)).t_s)


def test_each_request_holds_its_state_in_kv_units():
    m = parse_measurements(HEAD + ROW, "tiny.csv")[0]
    cluster, cfg = point_config(m)
    assert state_tokens(cluster, cfg, resolve(cluster, cfg.lever)) == 51_511_296 / 32_768 == 1_572.0
    with jax.enable_x64(True):
        pol = policy(cluster, cfg)
    assert float(pol.state_units) == -(-1_572 // int(pol.block_tokens))
    assert float(pol.kv_token_bytes) == 32_768.0


def test_a_hybrid_burst_is_priced_within_its_closed_form_bracket():
    # as tests/test_validation_serving.py for a dense model: one prefill pass of B x P tokens (B chunks, each
    # reading and writing one state) and O - 1 decode passes of B rows, plus at most one single-request prefill
    m = parse_measurements(HEAD + ROW, "tiny.csv")[0]
    assert status(m) == MODELLED
    lower = _pass_s(combine(*[chunk_work(0.0, float(P))] * B)) + sum(
        _pass_s(decode_work(float(B * (P + j - 1)), float(B))) for j in range(1, O))
    upper = lower + _pass_s(chunk_work(0.0, float(P)))
    tok_s = evaluate_serving(m)
    assert B * O / upper <= tok_s <= B * O / lower
