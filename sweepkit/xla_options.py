"""XLA:CPU options under which the serving engine's loop compiles into one function.

The serving engine is one ``while_loop`` whose iteration is several hundred small kernels. XLA:CPU runs
such a loop kernel by kernel (a runtime dispatch each) unless its small-while-loop pass compiles the whole
loop into one function, which it does for loops under a byte threshold (1 kB by default) that hold no
scatter, sort or custom fusion. sweepkit

- raises the threshold, and skips LLVM's loop unroller and SLP vectorizer, which on a function that large
  cost compile time and buy nothing measurable (``XLA_FLAGS``' backend options, read once per process: added
  when sweepkit is imported, before a JAX backend starts);
- compiles the engine without YNNPACK fusions, custom fusions that would block the pass
  (:data:`ENGINE_COMPILE_OPTIONS`, per program);
- writes the engine's indexed updates without scatters or sorts (:mod:`sweepkit.serving.updates`).

Measured on the seed's 15 H100 points: ~140 us of CPU per engine iteration become ~100 us
(docs/performance.md). The backend options are added only for the jaxlib releases they were checked on
(:data:`CHECKED_JAXLIB`; XLA aborts the process on a backend option it does not know), only where
``XLA_FLAGS`` sets no backend options of its own, and not at all under ``SWEEPKIT_XLA_OPTIONS=0``.

References:
    XLA's small-while-loop pass: https://github.com/openxla/xla/blob/main/xla/service/cpu/small_while_loop_hoisting_pass.cc
"""

from __future__ import annotations

import os
from importlib import metadata

BACKEND_OPTIONS = ("xla_cpu_small_while_loop_byte_threshold=1000000000", "xla_cpu_disable_loop_unrolling",
                   "xla_cpu_disable_slp_vectorizer")
"""Entries of ``--xla_backend_extra_options``: the loop-compilation threshold (bytes), two LLVM passes off."""
ENGINE_COMPILE_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}
"""Compile options of the serving engine on the CPU: no YNNPACK fusion types."""
CHECKED_JAXLIB = ((0, 8), (0, 12))
"""jaxlib releases [from, to) whose XLA knows :data:`BACKEND_OPTIONS`."""


def with_options(xla_flags: str) -> str:
    """``xla_flags`` with :data:`BACKEND_OPTIONS` added, unless it sets backend options of its own.

    Example:
        >>> with_options("--xla_force_host_platform_device_count=2").split()[1].split("=")[0]
        '--xla_backend_extra_options'
        >>> with_options("--xla_backend_extra_options=x=1")
        '--xla_backend_extra_options=x=1'
    """
    if "xla_backend_extra_options" in xla_flags:
        return xla_flags
    return " ".join(xla_flags.split() + ["--xla_backend_extra_options=" + ",".join(BACKEND_OPTIONS)])


def checked_jaxlib(version: str) -> bool:
    """Whether ``version`` (jaxlib's) is one of :data:`CHECKED_JAXLIB`.

    Example:
        >>> checked_jaxlib("0.10.2"), checked_jaxlib("0.4.36"), checked_jaxlib("0.12.0rc1")
        (True, False, False)
    """
    parts = tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in version.split(".")[:2])
    return CHECKED_JAXLIB[0] <= parts < CHECKED_JAXLIB[1]


def apply(environ=os.environ) -> bool:
    """Add :data:`BACKEND_OPTIONS` to ``environ["XLA_FLAGS"]`` where they apply; True if it did."""
    if environ.get("SWEEPKIT_XLA_OPTIONS", "1") == "0":
        return False
    try:
        if not checked_jaxlib(metadata.version("jaxlib")):
            return False
    except metadata.PackageNotFoundError:
        return False
    flags = environ.get("XLA_FLAGS", "")
    environ["XLA_FLAGS"] = with_options(flags)
    return environ["XLA_FLAGS"] != flags


def engine_compile_options(platform: str) -> dict | None:
    """Compile options of the serving engine on ``platform`` (a JAX device's ``platform``)."""
    if platform != "cpu" or os.environ.get("SWEEPKIT_XLA_OPTIONS", "1") == "0":
        return None
    return dict(ENGINE_COMPILE_OPTIONS)
