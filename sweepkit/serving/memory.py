"""The process's heap under many threads: fewer malloc arenas, and freed memory handed back to the system.

A sweep runs lanes, program builds and searches on dozens of threads. glibc's malloc gives a thread that
finds the arenas busy an arena of its own (up to 8 per core), each growing in 64 MiB heaps that keep what
their thread freed: a whole sweep's resident memory was mostly such heaps, full of freed lane states and
compile buffers. :func:`limit_arenas` caps the arenas (set before the worker threads start) and
:func:`release` returns the free pages of every arena to the system (``malloc_trim``). Both do nothing where
the C library is not glibc.

References:
  glibc manual, "Memory Allocation Tunables" (``glibc.malloc.arena_max``) and ``malloc_trim(3)``,
  https://www.gnu.org/software/libc/manual/html_node/Memory-Allocation-Tunables.html
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from functools import lru_cache

M_ARENA_MAX = -8
"""``mallopt`` parameter of the most arenas (glibc's malloc.h)."""
ARENAS = 4
"""Arenas a sweep's process keeps (glibc's default: 8 per core); ``MALLOC_ARENA_MAX`` in the environment wins."""
_LOCK = threading.Lock()
_DONE: list = []


@lru_cache(maxsize=1)
def _libc():
    """glibc, or None (another C library, or none found)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap malloc's arenas at ``arenas`` for the rest of the process (once; not over ``MALLOC_ARENA_MAX``).
    Returns whether the cap is set."""
    libc = _libc()
    if libc is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    with _LOCK:
        if not _DONE:
            _DONE.append(bool(libc.mallopt(M_ARENA_MAX, int(arenas))))
        return _DONE[0]


def release() -> bool:
    """Return the free memory of every malloc arena to the system; whether any was returned."""
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
