"""The tensor-parallel degree of a measured row that states its GPUs but not its layout.

MLPerf Inference results and many benchmark pages give a system's GPU count and not how a model was laid out
on it. Such a row runs the smallest tensor-parallel degree whose weights leave a quarter of the usable memory
to the KV cache, as many replicas as the GPUs allow (each replica's GEMMs stay widest and no GPU holds a
second copy of anything, while the KV cache keeps room for a batch):

    tp = min { t = 2^j : t | G / pp,  t | H,  W(t) <= r u M },   r = 3/4

else, where no t leaves that room, the smallest t with W(t) < u M; G is the row's GPUs, pp its pipeline
stages, H the model's attention heads, W(t) the weight bytes one GPU holds at tensor-parallel degree t
(:func:`sweepkit.costmodel.layout.per_gpu_weight_bytes`, the row's weight format), M the device's HBM and
u = 0.9 its usable share (:data:`sweepkit.costmodel.memory.MEM_UTIL`, the bound the serving cluster checks).
Where nothing fits (or the model or device is unknown) the row keeps tp = 1 and is reported with the
cluster's reason. NVIDIA's MLPerf Llama-2-70B FP8 runs come out as published: TP2 on an H100 (69.0 GB at
TP1 against 0.75 x 72 GB), TP1 on an H200.

Example:
  Llama-3.1-405B in FP8 on 8 H200 (141 GB): 405.8 GB / 4 = 101.5 GB a GPU is above 0.75 x 126.9 GB = 95.2 GB,
  / 8 = 50.7 GB is not: tp = 8, one replica (tests/validation/test_assumed_tp.py).
"""

from __future__ import annotations

from sweepkit.catalogue import get_device, get_format, get_model
from sweepkit.costmodel.layout import per_gpu_weight_bytes
from sweepkit.costmodel.memory import MEM_UTIL
from sweepkit.errors import InputError

KV_SHARE_KEPT = 0.75
"""r: the share of the usable memory the weights may take, leaving the rest to the KV cache and activations."""


def assumed_tp(model: str, device: str, weight_format: str, gpus: int, pp: int = 1) -> int:
    """The smallest power-of-two tp (module docstring) for ``model`` in ``weight_format`` on ``gpus`` GPUs of
    ``device`` in ``pp`` stages; 1 where none fits or a name is unknown."""
    try:
        target, dev = get_model(model), get_device(device)
        w = get_format(weight_format).bytes_per_value
    except InputError:
        return 1
    per_stage, usable = gpus // max(pp, 1), dev.hbm_capacity_bytes * MEM_UTIL
    degrees = [t for t in (2 ** j for j in range(per_stage.bit_length())) if per_stage % t == 0
               and target.n_heads % t == 0]
    weights = {t: per_gpu_weight_bytes(target, t, 1, pp, w) for t in degrees}
    roomy = [t for t in degrees if weights[t] <= KV_SHARE_KEPT * usable]
    fits = [t for t in degrees if weights[t] < usable]
    return (roomy or fits or [1])[0]
