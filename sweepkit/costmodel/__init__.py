"""Cost model: a power-aware roofline per forward pass, tensor parallelism, memory fit, decode points.

Pipeline position: catalogue -> **cost model** -> sweep -> warehouse -> queries -> reports.
Every function here is written for ONE point on scalar arrays and contains no Python branching on traced
values, so ``jax.vmap`` builds any grid from it.
"""

from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays, device_arrays, model_arrays
from sweepkit.costmodel.passes import (
    Work, chunk_work, combine, decode_work, pass_cost, verify_work,
)
from sweepkit.costmodel.roofline import BOUNDS, PassCost, roofline

__all__ = [
    "BOUNDS", "DeviceArrays", "ModelArrays", "PassCost", "Work",
    "chunk_work", "combine", "decode_work", "device_arrays", "model_arrays", "pass_cost", "roofline",
    "verify_work",
]
