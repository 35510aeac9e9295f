"""The prefix cache's eviction and running totals, against plain-numpy references and passes over every segment.

Eviction is least-recently-used over unpinned segments (SGLang's RadixAttention evicts LRU leaves, arXiv:2312.07104,
sec. 3): the segments evicted are exactly the unpinned cached ones whose last use is at or before the oldest last
use that covers the shortfall, never a pinned one, and all of them when they cannot cover it. The cache's cached
and pinned units are running totals (moved by ``prefix.insert_nodes`` and ``prefix.pin_range``); mid-run and
after evictions they equal sums over every segment.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config
from sweepkit.serving.lanes import lane_inputs
from sweepkit.serving.levers import Lever
from sweepkit.serving.engine.prefix import _evict, node_units
from sweepkit.serving.programs import _run
from sweepkit.serving.workloads import load_workloads


def _lru_reference(c_in, refs, last, units, shortfall):
    """Evicted flags by the definition: unpinned cached segments, oldest last use first (equal last uses
    together), until their units cover the shortfall."""
    free = c_in & (refs <= 0)
    gone = np.zeros_like(c_in)
    got = 0.0
    for stamp in np.unique(last[free]):
        if got >= shortfall:
            break
        now = free & (last == stamp)
        gone |= now
        got += units[now].sum()
    return gone


def _cache_totals(c_in, c_refs, units):
    """(cached units, pinned cached units) of an instance by a pass over every segment."""
    return jnp.sum(jnp.where(c_in, units, 0.0)), jnp.sum(jnp.where(c_in & (c_refs > 0), units, 0.0))


_evict_jit = jax.jit(_evict)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2 ** 31 - 1), st.floats(0.5, 400.0), st.integers(2, 12))
def test_eviction_is_lru_over_unpinned_segments_and_never_takes_a_pinned_one(m, seed, shortfall, stamps):
    rng = np.random.default_rng(seed)
    c_in = rng.random(m) < 0.7
    refs = np.where(rng.random(m) < 0.3, rng.integers(1, 3, m), 0).astype(np.float64)
    last = rng.integers(0, stamps, m).astype(np.float64) * 0.25      # repeated stamps: chains used together
    units = rng.integers(1, 40, m).astype(np.float64)
    # padded to 40 segments (one program for every example) that are not cached, unpinned, last used before
    # any other and hold many units: none is ever evicted or counted
    pad = lambda x, fill: jnp.asarray(np.concatenate([x, np.full(40 - m, fill, x.dtype)]))  # noqa: E731
    with jax.enable_x64(True):
        kept, freed = _evict_jit(pad(c_in, False), pad(refs, 0.0), pad(last, -1.0), pad(units, 1000.0),
                                 jnp.asarray(shortfall))
        kept, freed = np.asarray(kept), float(freed)
    assert not kept[m:].any()
    kept = kept[:m]
    gone = c_in & ~kept
    np.testing.assert_array_equal(gone, _lru_reference(c_in, refs, last, units, shortfall))
    assert not np.any(gone & (refs > 0)) and np.array_equal(kept | gone, c_in)
    assert freed == units[gone].sum()
    free_units = units[c_in & (refs <= 0)].sum()
    assert freed >= min(shortfall, free_units)                  # covered, or everything evictable taken


@pytest.mark.parametrize("instances, pools", [(1, False), (2, True)])
def test_running_totals_equal_a_pass_over_every_segment_mid_run(instances, pools):
    """Multi-turn chat on a small KV at a load it cannot serve, early-stopped with rows still holding pins:
    the cache has evicted, admitted hits, inserted and released, and its totals equal the segment sums,
    instance by instance. With the pools' phases in the program a boundary updates every instance's arrays
    in place from its own offset (``loop._CACHE``): a segment written at another instance's would
    break its totals."""
    cl = dataclasses.replace(load_cluster(), model="llama-3-8b", gpus=instances, instances=instances, tp=1,
                             batch_cap=64, devices=("A100-40GB",))
    w = dataclasses.replace(load_workloads()["chat"], min_sessions=200, prompt_mean_tokens=2048,
                            output_mean_tokens=256, ttft_slo_s=0.5)
    lever = Lever("prefix", kv="paged", prefix_caching=True)
    with jax.enable_x64(True):
        pol, req, loads, shape = lane_inputs(w, cl, Config("A100-40GB", lever), [40.0], early_stop=True)
        st_end = _run(pol, req, loads[0], shape=shape._replace(pools=pools))
        units = node_units(req, shape, pol.block_tokens)
        cached, pinned = jax.vmap(_cache_totals, in_axes=(0, 0, None))(st_end.c_in, st_end.c_refs, units)
        st_end, cached, pinned, kv_units = jax.tree_util.tree_map(np.asarray, (st_end, cached, pinned, pol.kv_units))
    assert st_end.stopped                                         # ended mid-run
    np.testing.assert_array_equal(st_end.c_units, cached)
    np.testing.assert_array_equal(st_end.c_pinned, pinned)
    assert pinned.sum() > 0 and cached.sum() > pinned.sum() and np.all(cached <= kv_units)
    assert np.all(cached > 0)                                     # every instance caches
