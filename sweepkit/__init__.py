"""sweepkit: which inference lever helps which workload, on which hardware, at what cost.

Pipeline: catalogue -> cost model -> sweep -> warehouse -> queries -> reports.
"""

__version__ = "0.1.0"

from sweepkit import xla_options  # before anything starts a JAX backend

xla_options.apply()

from sweepkit.evaluate import evaluate  # noqa: E402

__all__ = ["__version__", "evaluate"]
