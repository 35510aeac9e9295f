"""One tensor-parallel all-reduce per layer where attention and MLP outputs are summed first (Falcon's parallel
attention), against closed forms, in every path that counts all-reduces: the catalogue flag, the measured
profile's classes, the reference target pass, the plan screen and the numpy oracle.

Sources: TensorRT-LLM tensorrt_llm/models/falcon/model.py (v0.9: ``is_parallel_attention`` = new_decoder_architecture
or parallel_attn builds Attention and MLP without a TP group, then one ``allreduce`` of their sum); vLLM
vllm/model_executor/models/falcon.py (``reduce_row_parallel_results``); GPT-J reduces twice in both
(tensorrt_llm/models/gptj/model.py, vllm/model_executor/models/gpt_j.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model, model_from_hf_config
from sweepkit.catalogue.model_registry import load_hf_config
from sweepkit.costmodel.allreduce import tp_allreduces
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import Efficiency, step_time_by_class
from sweepkit.costmodel.passes import Work, as_prefill, decode_work
from sweepkit.costmodel.steps import instance, target_pass
from sweepkit.errors import InputError

pytestmark = pytest.mark.usefixtures("x64")
ROOT = Path(__file__).resolve().parents[2]
FALCON = {"model_type": "falcon", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "vocab_size": 100}
EFF = Efficiency(gemm_eff_max=0.8, gemm_tokens_half=100.0, moe_eff_max=0.6, moe_tokens_half=90.0,
                 attn_prefill_eff=0.5, weight_bw_eff=0.9, kv_bw_eff=0.8, link_eff=1.0, allreduce_overhead_s=0.0,
                 tp_loss=0.0, step_overhead_s=0.0, token_overhead_s=0.0, kernel_s=0.0)


def _sequential(model):
    return dataclasses.replace(model, shared_allreduce=False)


def test_catalogue_flags_follow_the_engines():
    falcon, gptj, llama = get_model("falcon-180b"), get_model("gpt-j-6b"), get_model("llama-3-70b")
    assert (falcon.shared_allreduce, falcon.allreduces_per_layer) == (True, 1)
    assert (gptj.shared_allreduce, gptj.allreduces_per_layer) == (False, 2)      # parallel block, two reduces
    assert (llama.shared_allreduce, llama.allreduces_per_layer) == (False, 2)
    assert load_hf_config(ROOT / "tests/data/hf/falcon-180b/config.json").allreduces_per_layer == 1


@pytest.mark.parametrize("fields, shared", [
    ({}, True),                                                        # transformers' default parallel_attn: true
    ({"parallel_attn": True}, True),                                   # Falcon-7B / 40B style
    ({"parallel_attn": False}, False),                                 # Falcon-RW: sequential block
    ({"parallel_attn": False, "new_decoder_architecture": True, "num_kv_heads": 2}, True),   # TensorRT-LLM's or
    ({"parallel_attn": True, "shared_allreduce": False}, False),      # a config may say otherwise
])
def test_falcon_configs(fields, shared):
    m = model_from_hf_config({**FALCON, **fields})
    assert m.shared_allreduce is shared and m.allreduces_per_layer == (1 if shared else 2)


def test_other_families_reduce_twice_unless_told():
    llama = {**FALCON, "model_type": "llama", "intermediate_size": 128}
    assert model_from_hf_config(llama).allreduces_per_layer == 2
    assert model_from_hf_config({**llama, "shared_allreduce": True}).allreduces_per_layer == 1


@pytest.mark.parametrize("fields, message", [
    ({"shared_allreduce": "yes"}, "shared_allreduce = 'yes' is not allowed; expected true or false"),
    ({"parallel_attn": 1}, "parallel_attn = 1 is not allowed; expected true or false"),
    ({"num_local_experts": 4, "num_experts_per_tok": 2},
     "shared_allreduce .* on a model with 4 experts; sweepkit prices a shared all-reduce on dense models only"),
])
def test_bad_values_are_one_line_errors(fields, message):
    with pytest.raises(InputError, match=message) as err:
        model_from_hf_config({**FALCON, **fields}, where="x/config.json")
    assert str(err.value).startswith("x/config.json") and "\n" not in str(err.value)


def test_profiled_communication_closed_form():
    """Falcon-180B on 8 A100s (NVLink 300 GB/s, 5 us per hop), a 128-token prompt, link_eff 1, t_ar 0:
    one ring all-reduce moves 2 x 7/8 x 128 x 14,848 x 2 B = 6,651,904 B in 22.173 us plus 14 x 5 us of
    latency, 92.173 us; 80 of them 7.374 ms, half of the 160 a sequential block runs. The other classes
    are the same."""
    falcon = get_model("falcon-180b")
    dev = device_arrays(get_device("A100"))
    prompt = as_prefill(Work(tokens=128.0, attn_pairs=128.0 * 129.0, kv_tokens=128.0, rows=1.0))
    none = decode_work(0.0, 0.0)
    parts = [step_time_by_class(none, prompt, model_arrays(m), dev, EFF, 8.0, 2.0, 2.0, 1.0)
             for m in (falcon, _sequential(falcon))]
    one = 2.0 * 7.0 / 8.0 * 128 * 14_848 * 2 / 300e9 + 14 * 5e-6
    assert one == pytest.approx(92.173e-6, rel=1e-4)
    assert float(parts[0]["comm"]) == pytest.approx(80 * one, rel=1e-6)
    assert float(parts[1]["comm"]) == pytest.approx(160 * one, rel=1e-6)
    assert {k: float(v) for k, v in parts[0].items() if k != "comm"} == \
        {k: float(v) for k, v in parts[1].items() if k != "comm"}


def test_reference_and_profiled_target_pass_save_exactly_l_all_reduces():
    """The reference roofline's target pass (serving engine, decode grid) and the profiled one (steady state)
    both drop L all-reduces of T D x 2 bytes; nothing changes at tp = 1."""
    falcon = get_model("falcon-180b")
    work = decode_work(64.0 * 2000.0, 64.0)
    one = 2.0 * 7.0 / 8.0 * 64 * 14_848 * 2 / 300e9 + 14 * 5e-6
    for tp, saved in ((8, 80 * one), (1, 0.0)):
        insts = [instance(get_device("A100"), m, None, tp, "bf16", "bf16", "bf16", dtype=jnp.float64)
                 for m in (falcon, _sequential(falcon))]
        ref = [float(target_pass(i, work)[0]) for i in insts]
        prof = [float(target_pass(dataclasses.replace(i, efficiency=EFF), work)[0]) for i in insts]
        assert ref[1] - ref[0] == pytest.approx(saved, rel=1e-6, abs=1e-12)
        assert prof[1] - prof[0] == pytest.approx(saved, rel=1e-6, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(tp=st.sampled_from([1.0, 2.0, 4.0, 8.0]), tokens=st.floats(1.0, 1e5), overhead=st.floats(0.0, 1e-4),
       link_eff=st.floats(0.1, 1.0))
def test_shared_all_reduce_halves_communication(tp, tokens, overhead, link_eff):
    """Whatever the step, a shared all-reduce halves the communication class and leaves the rest."""
    falcon = get_model("falcon-180b")
    dev = device_arrays(get_device("H100"), jnp.float64)
    eff = dataclasses.replace(EFF, allreduce_overhead_s=overhead, link_eff=link_eff)
    work = decode_work(tokens * 100.0, tokens)
    none = decode_work(0.0, 0.0)
    shared, seq = (step_time_by_class(work, none, model_arrays(m, jnp.float64), dev, eff, tp, 1.0, 1.0, 2.0)
                   for m in (falcon, _sequential(falcon)))
    assert float(shared["comm"]) == pytest.approx(float(seq["comm"]) / 2.0, rel=1e-9, abs=1e-15)
    assert all(float(shared[k]) == float(seq[k]) for k in shared if k != "comm")


def test_numpy_oracle_counts_the_same_all_reduces():
    from sweepkit.sweep.numpy_reference import evaluate_numpy

    axes = dict(device=("A100",), model=("falcon-180b",), draft=("none",), tp=(1, 8), weight_format=("bf16",),
                kv_format=("bf16",), compute_format=("bf16",), batch=(1,), context=(2048,), gamma=(0,),
                alpha=(0.0,))
    got = evaluate_numpy(axes, dtype=np.float64)["t_plain_pass_s"].reshape(-1)
    falcon = get_model("falcon-180b")
    want = [float(target_pass(instance(get_device("A100"), falcon, None, tp, "bf16", "bf16", "bf16",
                                       dtype=jnp.float64, pipelined=False), decode_work(2048.0, 1.0))[0])
            for tp in (1, 8)]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_the_pass_counts_one_all_reduce_a_layer_for_a_parallel_block_less_the_all_to_all_layers():
    # n_ar L - L_a2a: Falcon-180B 1 x 80, Llama-3.1-70B 2 x 80; 58 MoE layers of DeepSeek-V3 under DEP each give
    # one up to their all-to-all (2 x 61 - 58 = 64)
    assert float(tp_allreduces(model_arrays(get_model("falcon-180b")))) == 80.0
    assert float(tp_allreduces(model_arrays(get_model("llama-3.1-70b")))) == 160.0
    assert float(tp_allreduces(model_arrays(get_model("deepseek-v3")), 58.0)) == 64.0
