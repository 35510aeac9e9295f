"""A row that states its GPUs but no layout runs the smallest power-of-two TP that holds the weights with room.

MLPerf Inference's results give a system's GPU count, not the model's layout; at TP1 Llama-3.1-405B or
DeepSeek-V3 do not fit one GPU, and such a row was left unpriced. The degree is the smallest whose weights
take at most 3/4 of the usable memory (90 % of the datasheet HBM, sweepkit.costmodel.memory.MEM_UTIL), else the
smallest that fits at all. Closed forms.
"""

import pytest

from sweepkit.catalogue import get_device, get_model
from sweepkit.costmodel.layout import per_gpu_weight_bytes
from sweepkit.validation import parse_measurements
from sweepkit.validation.assumed_tp import assumed_tp

HEADER = "source,device,model,metric,value,unit,weight_format,gpus,tp,ep,input_tokens,output_tokens\n"


def test_llama_405b_fp8_on_8_h200_runs_tp8():
    # 405.8 GB of FP8 weights: 101.5 GB a GPU at TP4, above 3/4 of 0.9 x 141 GB = 95.2 GB; 50.7 GB at TP8
    m = get_model("llama-3.1-405b")
    assert per_gpu_weight_bytes(m, 4, 1, 1, 1.0) / 1e9 == pytest.approx(101.46, abs=0.01)
    assert per_gpu_weight_bytes(m, 8, 1, 1, 1.0) / 1e9 == pytest.approx(50.73, abs=0.01)
    assert 0.75 * get_device("H200").hbm_capacity_bytes * 0.9 / 1e9 == pytest.approx(95.175)
    assert assumed_tp("llama-3.1-405b", "H200", "fp8", 8) == 8


@pytest.mark.parametrize("model, device, fmt, gpus, tp", [
    # NVIDIA's MLPerf Llama-2-70B FP8 layouts: 69.0 GB at TP1 is above 3/4 of 72 GB on an H100, not on an H200
    ("llama-2-70b", "H100", "fp8", 8, 2),
    ("llama-2-70b", "H200", "fp8", 8, 1),
    ("llama-3.1-405b", "B200", "fp8", 8, 4),     # 101.5 GB <= 0.75 x 162 GB
    ("deepseek-v3", "B200", "fp8", 8, 8),        # 671 GB: 167.8 GB a GPU at TP4 > 162 GB, 83.9 GB at TP8
    ("deepseek-v3", "MI300X", "fp8", 8, 8),      # TP4 fits 172.8 GB but leaves 5 GB: TP8
    ("deepseek-v3", "MI325X", "fp8", 8, 4),      # 167.8 GB <= 0.75 x 230.4 GB
    ("llama-3.1-8b", "H100", "fp8", 8, 1),       # TP1 holds it: as before, eight replicas
    ("deepseek-v3", "H100", "fp8", 8, 1),        # 671 GB over 8 x 72 GB: nothing fits, TP1 and its reason stay
    ("llama-3.1-405b", "acme-x1", "fp8", 8, 1),  # an unknown device: TP1 and its reason stay
])
def test_smallest_tp_that_leaves_room(model, device, fmt, gpus, tp):
    assert assumed_tp(model, device, fmt, gpus) == tp


def test_weights_that_fit_only_without_room_take_the_smallest_fitting_tp():
    # DeepSeek-V3 FP8 on 4 MI300X: 167.8 GB a GPU at TP4 is above 0.75 x 172.8 GB = 129.6 GB but fits
    assert assumed_tp("deepseek-v3", "MI300X", "fp8", 4) == 4
    # Llama-3.1-405B: in bf16 on 16 H100 811.7 GB / 16 = 50.7 GB <= 0.75 x 72 GB = 54 GB (TP8, 101.5 GB, does
    # not fit); in FP8 on 8 A100 50.7 GB at TP8 <= 54 GB likewise
    assert assumed_tp("llama-3.1-405b", "H100", "bf16", 16) == 16
    assert assumed_tp("llama-3.1-405b", "A100", "fp8", 8) == 8


def _row(tp="", ep="", gpus="8"):
    text = HEADER + f"s,H200,llama3.1-405b,max_output_throughput,1000,tok/s,fp8,{gpus},{tp},{ep},2000,200\n"
    return parse_measurements(text, "demo.csv")[0]


def test_only_rows_without_a_layout_are_laid_out():
    assert (_row().tp, _row().gpus) == (8, 8)
    assert _row(tp="8").tp == 8                 # a stated degree is kept
    assert _row(ep="8").tp == 1                 # so is any stated layout field (the row's own conventions apply)
    assert _row(gpus="").tp == 1                # one GPU: nothing to lay out
