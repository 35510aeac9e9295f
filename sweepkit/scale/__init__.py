"""Scale-out: a sweep's work as deterministic parts, executed here or on a Ray cluster, resumable.

Pipeline position: {sweep, serving} -> store -> **scale** -> cli. ``sweepkit.scale.run_decode`` and
``run_serving`` are the Python entry points (the CLI's ``--executor``, ``--address``, ``--resume``);
docs/scale-out.md describes the parts, the executors and what they cost.
"""

from sweepkit.scale.api import run_decode, run_serving
from sweepkit.scale.executors import EXECUTORS, TaskFailed, make_executor

__all__ = ["EXECUTORS", "TaskFailed", "make_executor", "run_decode", "run_serving"]
