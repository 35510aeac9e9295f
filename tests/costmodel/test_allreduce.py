"""The all-reduce of a ring and of a fully connected mesh (sweepkit/costmodel/allreduce.py) against closed forms,
vLLM's kernel choice by message size and world size, and published MI355X all-reduce times."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device
from sweepkit.catalogue.devices import load_devices, load_devices_file
from sweepkit.costmodel.allreduce import allreduce_s, mesh_allreduce_s, ring_allreduce_s
from sweepkit.costmodel.arrays import device_arrays
from sweepkit.errors import InputError

KIB = 1024.0
MI300X = device_arrays(get_device("MI300X"))      # 448 GB/s over 7 links, 5 us, 8 GPUs a domain
LAT, B, PEER = 5e-6, 448e9, 448e9 / 7.0


def us(x) -> float:
    return float(x) * 1e6


def test_the_instinct_parts_are_full_meshes_and_every_other_device_a_ring():
    # AMD Instinct platforms: 8 OAM GPUs, each with a direct Infinity Fabric link to each of the 7 others
    devices = load_devices()
    assert {k for k, d in devices.items() if d.full_mesh == 1.0} == {"MI300X", "MI325X", "MI355X"}
    assert all(d.link_topology == "ring" for k, d in devices.items() if not k.startswith("MI3"))
    assert float(MI300X.full_mesh) == 1.0 and float(device_arrays(get_device("H100")).full_mesh) == 0.0


def test_ring_closed_form_and_unchanged_for_ring_devices():
    h100 = device_arrays(get_device("H100"))
    for size, r in ((16 * KIB, 8.0), (4e6, 4.0), (1e9, 2.0)):
        ring = 2 * (r - 1) / r * size / 450e9 + 2 * (r - 1) * 5e-6
        assert float(ring_allreduce_s(size, r, h100)) == pytest.approx(ring, rel=1e-6)
        assert float(allreduce_s(size, r, h100)) == pytest.approx(ring, rel=1e-6)
    assert us(ring_allreduce_s(16 * KIB, 8.0, MI300X)) == pytest.approx(70.0 + 1.75 * 16384 / B * 1e6)


def test_one_shot_below_256_kib_on_eight_gpus():
    # cross_device_reduce_1stage: one link latency, the message read from each peer over its own link
    assert us(allreduce_s(16 * KIB, 8.0, MI300X)) == pytest.approx(5.0 + 16384 / PEER * 1e6)      # 5.256 us
    assert us(allreduce_s(16 * KIB, 8.0, MI300X)) == pytest.approx(5.256, abs=1e-3)
    just_below = 256 * KIB - 16
    assert us(allreduce_s(just_below, 8.0, MI300X)) == pytest.approx(5.0 + just_below / PEER * 1e6)


def test_two_shot_from_256_kib_matches_the_ring_bandwidth_at_the_whole_domain():
    # cross_device_reduce_2stage: two link latencies, S / r from every peer per stage
    size = 1024 * KIB
    two = 2 * LAT + 2 * size / (8 * PEER)
    assert float(allreduce_s(size, 8.0, MI300X)) == pytest.approx(two, rel=1e-6)              # 14.096 us
    assert us(allreduce_s(size, 8.0, MI300X)) == pytest.approx(14.096, abs=1e-3)
    ring_bw = 2 * 7 / 8 * size / B
    assert two - 2 * LAT == pytest.approx(ring_bw, rel=1e-9)


def test_kernel_choice_by_world_size():
    size = 300 * KIB                  # one-shot at r <= 4 (below 512 KiB), two-shot at r = 8 (256 KiB and up)
    assert float(allreduce_s(size, 4.0, MI300X)) == pytest.approx(LAT + size / PEER, rel=1e-6)
    assert float(allreduce_s(size, 8.0, MI300X)) == pytest.approx(2 * LAT + 2 * size / (8 * PEER), rel=1e-6)
    big = 4e6                         # r = 2 always one-shot, up to 8 MiB
    assert float(allreduce_s(big, 2.0, MI300X)) == pytest.approx(LAT + big / PEER, rel=1e-6)


def test_eight_mib_and_up_fall_back_to_the_ring_and_one_gpu_costs_nothing():
    size = 8 * 1024 * KIB
    assert float(allreduce_s(size, 8.0, MI300X)) == pytest.approx(float(ring_allreduce_s(size, 8.0, MI300X)))
    # a 2-GPU group's ring has its one direct link, 64 GB/s: S / 64e9 + 2 lat (docstring example, 16 MiB)
    assert us(allreduce_s(2 * size, 2.0, MI300X)) == pytest.approx(16777216 / 64e9 * 1e6 + 10.0, rel=1e-6)
    assert float(allreduce_s(size - 16, 8.0, MI300X)) < float(ring_allreduce_s(size - 16, 8.0, MI300X))
    for size in (0.0, 16 * KIB, 1e9):
        assert float(allreduce_s(size, 1.0, MI300X)) == 0.0
        assert float(mesh_allreduce_s(size, 1.0, MI300X)) == 0.0


def test_odd_or_larger_groups_take_the_ring_over_the_links_they_own():
    # CustomAllreduce._SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]; a group beyond the 8-GPU domain spans nodes.
    # A ring of r GPUs inside the mesh has r - 1 of each GPU's 7 links: B (r - 1) / 7
    for r in (3.0, 5.0, 7.0):
        size = 4e6
        closed = 2 * (r - 1) / r * size / (PEER * (r - 1)) + 2 * (r - 1) * LAT
        assert float(allreduce_s(size, r, MI300X)) == pytest.approx(closed, rel=1e-6)
    assert float(allreduce_s(16 * KIB, 16.0, MI300X)) == pytest.approx(float(ring_allreduce_s(16 * KIB, 16.0, MI300X)))
    assert float(allreduce_s(16 * KIB, 6.0, MI300X)) == pytest.approx(LAT + 16 * KIB / PEER, rel=1e-6)


def test_published_mi355x_tp8_times():
    # vllm-project/vllm PR #39080: vLLM's TP8 custom all-reduce on MI355X, bf16 x 3,072 wide:
    # 4 tokens (24,576 B) 6.3 us, 32 tokens (196,608 B) 10.0 us; 537.6 GB/s over 7 links (76.8 GB/s each)
    mi355x = device_arrays(get_device("MI355X"))
    for size, measured_us in ((24576.0, 6.3), (196608.0, 10.0)):
        mesh, ring = us(allreduce_s(size, 8.0, mi355x)), us(ring_allreduce_s(size, 8.0, mi355x))
        assert abs(mesh / measured_us - 1.0) < 0.25 and ring / measured_us > 7.0
    assert us(allreduce_s(24576.0, 8.0, mi355x)) == pytest.approx(5.0 + 24576 * 7 / 537.6e9 * 1e6)


def test_link_efficiency_scales_the_bandwidth_terms_only():
    size = 100 * KIB
    assert float(allreduce_s(size, 8.0, MI300X, 0.5)) == pytest.approx(LAT + 2 * size / PEER, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(size=st.floats(0.0, 64e6), r=st.sampled_from([2.0, 4.0, 6.0, 8.0]))
def test_mesh_is_at_least_one_latency_and_at_most_the_ring_over_the_whole_domain(size, r):
    mesh = float(mesh_allreduce_s(size, r, MI300X))
    assert mesh >= LAT * (1 - 1e-6)
    if r == 8.0:
        assert mesh <= float(ring_allreduce_s(size, r, MI300X)) * (1 + 1e-6)


@settings(max_examples=80, deadline=None)
@given(size=st.floats(1.0, 64e6), grow=st.floats(1.0, 4.0), r=st.sampled_from([2.0, 3.0, 4.0, 6.0, 7.0, 8.0, 16.0]),
       device=st.sampled_from(["MI300X", "MI355X", "H100"]))
def test_time_never_falls_as_the_message_grows(size, grow, r, device):
    # every kernel switch (one-shot -> two-shot -> library ring) costs time, never saves it
    dev = device_arrays(get_device(device))
    assert float(allreduce_s(size * grow, r, dev)) >= float(allreduce_s(size, r, dev)) * (1 - 1e-6)


def test_bad_topology_in_a_devices_file_is_a_one_line_error(tmp_path):
    numeric = ("peak_flops_per_s", "hbm_bytes_per_s", "hbm_capacity_bytes", "tdp_w", "idle_w", "energy_per_flop_j",
               "energy_per_hbm_byte_j", "flops_efficiency", "bandwidth_efficiency", "pass_overhead_s",
               "link_bytes_per_s", "link_latency_s", "link_energy_per_bit_j", "price_usd_per_gpu_hour")
    mi300x = get_device("MI300X")
    lines = ['[devices."X"]', 'description = "x"', 'source = "x"', 'link = "infinity-fabric"',
             'link_topology = "torus"'] + [f"{k} = {getattr(mi300x, k)!r}" for k in numeric]
    path = tmp_path / "d.toml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"d\.toml: \[devices\.X\]: link_topology = 'torus' is not allowed; "
                                         r"expected one of ring, full-mesh"):
        load_devices_file(path)
    path.write_text(path.read_text().replace('"torus"', '"full-mesh"'))
    assert load_devices_file(path)["X"].full_mesh == 1.0
