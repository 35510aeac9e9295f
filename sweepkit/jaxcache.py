"""JAX's persistent compilation cache for the CLI: a grid shape compiles once per machine, not per process.

The cache lives in ``$SWEEPKIT_JAX_CACHE`` (default ``~/.cache/sweepkit/jax``); ``SWEEPKIT_JAX_CACHE=off``
turns it off. Only programs that took at least MIN_COMPILE_S to compile are stored.
"""

from __future__ import annotations

import os
from pathlib import Path

MIN_COMPILE_S = 0.5


def enable_persistent_cache() -> Path | None:
    """Point JAX's compilation cache at the sweepkit cache folder; returns it (None when turned off)."""
    setting = os.environ.get("SWEEPKIT_JAX_CACHE", "")
    if setting.lower() in ("off", "0", "none"):
        return None
    path = Path(setting).expanduser() if setting else Path.home() / ".cache" / "sweepkit" / "jax"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None                      # a read-only home: compile every time, never fail because of it
    import jax

    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_S)
    return path
