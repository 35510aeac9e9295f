"""Freed heap memory handed back to the system (glibc's malloc_trim), measured on this process's RSS."""

import sys
from pathlib import Path

import numpy as np
import pytest

from sweepkit.serving.memory import _libc, limit_arenas, release


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux") or _libc() is None, reason="glibc's malloc only")
def test_release_returns_freed_heap_pages():
    """200 MB in 100 kB blocks (below malloc's mmap threshold: on the heap), all freed but the last one,
    which keeps the heap's top in place: the pages stay resident until release() returns them."""
    blocks = [np.ones(100_000 // 8) for _ in range(2_000)]
    keep = np.ones(100_000 // 8)
    del blocks
    before = _rss_bytes()
    assert release()
    assert before - _rss_bytes() > 100e6
    assert keep.sum() == 100_000 // 8


def test_arena_cap_is_set_once():
    first = limit_arenas()
    assert limit_arenas(64) == first
