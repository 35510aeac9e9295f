"""Cost model: a power-aware roofline per forward pass, tensor parallelism, memory fit, decode points.

Pipeline position: catalogue -> **cost model** -> sweep -> warehouse -> queries -> reports.
Every function here is written for ONE point on scalar arrays and contains no Python branching on traced
values, so ``jax.vmap`` builds any grid from it. Every pass is priced by :mod:`sweepkit.costmodel.steps`
(one :class:`Instance` per replica), for the decode grid, the serving engine and the trace alike.
"""

from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays, device_arrays, model_arrays
from sweepkit.costmodel.passes import Work, chunk_work, combine, decode_work, verify_work
from sweepkit.costmodel.roofline import BOUNDS, PassCost, roofline
from sweepkit.costmodel.steps import (Instance, draft_pass, draft_pass_cost, instance, pass_cost, step_cost,
                                      target_pass, target_pass_cost)

__all__ = [
    "BOUNDS", "DeviceArrays", "Instance", "ModelArrays", "PassCost", "Work",
    "chunk_work", "combine", "decode_work", "device_arrays", "draft_pass", "draft_pass_cost", "instance",
    "model_arrays", "pass_cost", "roofline", "step_cost", "target_pass", "target_pass_cost", "verify_work",
]
