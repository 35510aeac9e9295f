"""sweepkit: which inference lever helps which workload, on which hardware, at what cost.

Pipeline: catalogue -> cost model -> sweep -> warehouse -> queries -> reports.
"""

__version__ = "0.1.0"

import sys
import types

from sweepkit import xla_options  # before anything starts a JAX backend

xla_options.apply()

__all__ = ["__version__", "evaluate"]


class _Package(types.ModuleType):
    """The package, whose ``evaluate`` is always the function :func:`sweepkit.evaluate.evaluate`, imported on
    first use (it imports JAX, which the CLI's listing and its non-computing commands never need): the
    import system's binding of the submodule to that name binds the function instead."""

    def __getattr__(self, name: str):
        if name == "evaluate":
            from sweepkit.evaluate import evaluate

            return evaluate
        raise AttributeError(f"module 'sweepkit' has no attribute {name!r}")

    def __setattr__(self, name: str, value) -> None:
        if name == "evaluate" and isinstance(value, types.ModuleType):
            value = value.evaluate
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
