"""XLA:CPU options of the serving engine: its loop compiled into one function, and fewer copies.

The serving engine is one ``while_loop`` whose iteration is several hundred small kernels. XLA:CPU runs
such a loop kernel by kernel (a runtime dispatch each) unless its small-while-loop pass compiles the whole
loop into one function, which it does for loops under a byte threshold (1 kB by default) that hold no
scatter, sort or custom fusion. By default (``SWEEPKIT_XLA_OPTIONS`` unset or ``1``) sweepkit

- raises the threshold, and skips LLVM's loop unroller, which on a function that large costs compile time
  and buys nothing measurable (``XLA_FLAGS``' backend options, read once per process: added when sweepkit
  is imported, before a JAX backend starts; they reach only ``while_loop`` bodies and the unroller, so the
  decode sweep's vectorised programs run as fast as without them);
- compiles the engine without YNNPACK fusions, custom fusions that would block the pass
  (:data:`ENGINE_COMPILE_OPTIONS`, per program);
- writes the engine's indexed updates without scatters or sorts (:mod:`sweepkit.serving.engine.updates`).

A lane then spends less CPU than kernel by kernel, and its programs build in about the same time
(docs/performance.md). ``SWEEPKIT_XLA_OPTIONS=0`` runs the engine kernel by kernel, with
scatters: the same results to rounding (LLVM orders some float sums differently). The backend options are
added only for the jaxlib releases they were checked on (:data:`CHECKED_JAXLIB`; XLA aborts the process on a
backend option it does not know), not where a GPU or TPU backend is installed (:data:`ACCELERATOR_PLUGINS`),
and only where ``XLA_FLAGS`` sets no backend options of its own.

Both ways the engine compiles with copy insertion's region analysis (:data:`DEFAULT_COMPILE_OPTIONS`): XLA
then proves more of the copies it would insert where a ``while_loop`` or ``lax.cond`` passes an array
through unchanged unnecessary, and drops them (a chat MTP or draft program: 208 copies -> 111; every final
state equal leaf for leaf).

References:
    XLA's copy insertion: https://github.com/openxla/xla/blob/main/xla/service/copy_insertion.cc
    XLA's small-while-loop pass: https://github.com/openxla/xla/blob/main/xla/service/cpu/small_while_loop_hoisting_pass.cc
"""

from __future__ import annotations

import functools
import os
from importlib import metadata
from importlib.util import find_spec

BACKEND_OPTIONS = ("xla_cpu_small_while_loop_byte_threshold=1000000000", "xla_cpu_disable_loop_unrolling")
"""Entries of ``--xla_backend_extra_options``: the loop-compilation threshold (bytes), LLVM's loop unroller off
(the SLP vectorizer stays on: without it the decode sweep computes ~10-25% fewer points a second)."""
ENGINE_COMPILE_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}
"""Compile options of the serving engine on the CPU with the loop as one function: no YNNPACK fusion types."""
DEFAULT_COMPILE_OPTIONS = {"xla_cpu_copy_insertion_use_region_analysis": True}
"""Compile options of the serving engine on the CPU (where jaxlib is one of :data:`CHECKED_JAXLIB`: XLA
refuses a compile option it does not know): copy insertion with region analysis."""
CHECKED_JAXLIB = ((0, 8), (0, 12))
"""jaxlib releases [from, to) whose XLA knows :data:`BACKEND_OPTIONS`."""
ACCELERATOR_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin", "jax_rocm7_plugin", "libtpu")
"""Packages of JAX's GPU and TPU backends: where one is installed (and ``JAX_PLATFORMS`` is not ``cpu``) the
CPU-only backend options are left out, so no other compiler is handed options it was not checked with."""


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


SETTINGS = ("", "0", "1")
"""Values ``SWEEPKIT_XLA_OPTIONS`` may take: unset, empty or ``1`` (on), ``0`` (off)."""


def setting_problem(environ=os.environ) -> str | None:
    """One line naming a ``SWEEPKIT_XLA_OPTIONS`` value other than :data:`SETTINGS` (None when it is one).

    Example:
        >>> setting_problem({"SWEEPKIT_XLA_OPTIONS": "yes"})
        "SWEEPKIT_XLA_OPTIONS = 'yes' is not allowed; expected 1 or unset (on), 0 (off)"
        >>> setting_problem({}) is None
        True
    """
    value = environ.get("SWEEPKIT_XLA_OPTIONS", "")
    if value.strip() in SETTINGS:
        return None
    return f"SWEEPKIT_XLA_OPTIONS = {value!r} is not allowed; expected 1 or unset (on), 0 (off)"


def apply(environ=os.environ) -> bool:
    """Add :data:`BACKEND_OPTIONS` to ``environ["XLA_FLAGS"]`` unless ``SWEEPKIT_XLA_OPTIONS=0``, where they
    apply; True if the engine's loop may then compile into one function (:func:`loop_options_on`). Another
    value than :data:`SETTINGS` leaves them off here, and the serving engine refuses to run
    (:func:`setting_problem`: one line; exit status 2 from the CLI)."""
    global _ON
    if environ.get("SWEEPKIT_XLA_OPTIONS", "").strip() not in ("", "1"):
        return False
    if not _jaxlib_checked():
        return False
    if environ.get("JAX_PLATFORMS", "") != "cpu" and any(find_spec(p) for p in ACCELERATOR_PLUGINS):
        return False
    environ["XLA_FLAGS"] = with_options(environ.get("XLA_FLAGS", ""))
    _ON = BACKEND_OPTIONS[0] in environ["XLA_FLAGS"]
    return _ON


_ON = False


def loop_options_on() -> bool:
    """Whether this process runs with :data:`BACKEND_OPTIONS` (set by :func:`apply` at import): the engine then
    writes its updates without scatters or sorts (:mod:`sweepkit.serving.engine.updates`)."""
    return _ON


def engine_compile_options(platform: str) -> dict | None:
    """Compile options of the serving engine on ``platform`` (a JAX device's ``platform``): on the CPU,
    :data:`DEFAULT_COMPILE_OPTIONS` where this jaxlib was checked, and :data:`ENGINE_COMPILE_OPTIONS` too
    where the loop compiles into one function (:func:`loop_options_on`); None elsewhere."""
    if platform != "cpu" or not _jaxlib_checked():
        return None
    return dict(DEFAULT_COMPILE_OPTIONS, **(ENGINE_COMPILE_OPTIONS if _ON else {}))


@functools.lru_cache(maxsize=1)
def _jaxlib_checked() -> bool:
    try:
        return checked_jaxlib(metadata.version("jaxlib"))
    except metadata.PackageNotFoundError:
        return False
