"""A configuration's replica (:class:`~sweepkit.costmodel.steps.Instance`) is built once per process and
shared by its workloads and program sizes, and equals a fresh build whatever it is keyed on."""

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config, Draw, _build_replica, policy, resolve
from sweepkit.serving.levers import load_levers
from sweepkit.serving.profile import resolve_profile


def _leaves_equal(a, b) -> bool:
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.asarray(x).dtype == np.asarray(y).dtype
                                      and np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb))


def test_workloads_and_program_sizes_share_one_replica_equal_to_a_fresh_build():
    cl, lv = load_cluster(), load_levers()["mtp"]
    cfg = Config("H100", lv)
    with jax.enable_x64(True):
        chat = policy(cl, cfg, None, "chat", 4, 2)
        voice = policy(cl, cfg, None, "realtime-voice", 8, 6)
        res = resolve(cl, lv)
        fresh = _build_replica(cl, cfg, res, res.tp, res.pp, res.microbatches, False)
    assert chat.inst is voice.inst
    assert _leaves_equal(chat.inst, fresh)
    assert chat.inst.device.peak_flops_per_s.dtype == jnp.float64


def test_a_draw_a_device_or_a_float_width_gets_its_own_replica():
    cl, lv = load_cluster(), load_levers()["baseline"]
    plain = Config("H100", lv)
    drawn = Config("H100", lv, Draw(index=1, factors=(("hbm_bytes_per_s", 0.9),)))
    with jax.enable_x64(True):
        p, d, h = (policy(cl, c, None, "chat") for c in (plain, drawn, Config("H200", lv)))
    assert d.inst is not p.inst and h.inst is not p.inst
    assert float(d.inst.device.hbm_bytes_per_s) == float(p.inst.device.hbm_bytes_per_s) * 0.9
    assert float(h.inst.device.hbm_capacity_bytes) > float(p.inst.device.hbm_capacity_bytes)
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # float64 requested without x64: float32, as before
        narrow = policy(cl, plain, None, "chat")
    assert narrow.inst.device.peak_flops_per_s.dtype == jnp.float32
    with jax.enable_x64(True):
        assert policy(cl, plain, None, "chat").inst.device.peak_flops_per_s.dtype == jnp.float64


def test_another_cluster_or_profile_is_another_replica():
    """The cluster's profile is left out of its hash (``Cluster.profile``), not out of its equality: a cluster
    priced by a framework profile gets that profile's efficiencies, not the reference replica's."""
    cl, lv = load_cluster(), load_levers()["baseline"]
    other = dataclasses.replace(cl, step_overhead_s=cl.step_overhead_s * 2.0)
    profiled = dataclasses.replace(cl, profile=resolve_profile("tensorrt-llm")[0])
    with jax.enable_x64(True):
        a, b, c = (policy(x, Config("H100", lv), None, "chat") for x in (cl, other, profiled))
        res = resolve(profiled, lv)
        fresh = _build_replica(profiled, Config("H100", lv), res, res.tp, res.pp, res.microbatches, False)
    assert float(b.inst.device.pass_overhead_s) == 2.0 * float(a.inst.device.pass_overhead_s)
    assert c.inst is not a.inst and _leaves_equal(c.inst, fresh)
    assert a.inst.efficiency is None and c.inst.efficiency is not None     # reference constants / the profile's
