"""Seconds of one tensor-parallel all-reduce: a ring, or the custom kernels of a fully connected mesh.

Every path that prices a tensor-parallel all-reduce (the roofline's :mod:`sweepkit.costmodel.steps`, the
measured profile's :mod:`sweepkit.costmodel.efficiency`, the plan screen) calls :func:`allreduce_s`. For a
message of S bytes over r devices of link bandwidth B (one direction, all of a GPU's scale-up links together),
link latency lat and link efficiency c_x:

    ring (link_topology "ring", the default)   t = 2 (r - 1) / r S / (B c_x) + 2 (r - 1) lat

the ring all-reduce of a collective library: a reduce-scatter and an all-gather of r - 1 neighbour steps each.

On a fully connected mesh (link_topology "full-mesh": AMD Instinct OAM platforms, where each of the G_up
GPUs has its own Infinity Fabric link to every other, each B / (G_up - 1) one way) the serving frameworks
reduce small messages with their own kernels, which read every peer's buffer directly over those links at
once (vLLM ``csrc/custom_all_reduce.cuh``: "Full NVLink or xGMI connection between GPUs"; the ROCm build
since ROCm/vllm PR #27, May 2024, upstream vLLM PR #14125, March 2025):

    one-shot (r = 2, or S < S_1(r))      t = lat + S (G_up - 1) / (B c_x)
    two-shot (S_1(r) <= S < S_max)       t = 2 lat + 2 S (G_up - 1) / (r B c_x)
    S >= S_max, r odd, r > 8 or r > G_up the ring above over the links the group owns, B (r' - 1) / (G_up - 1)
                                         with r' = min(r, G_up) (vLLM falls back to RCCL / NCCL)

S_1 = 512 KiB for r <= 4 and 256 KiB for r <= 8 (``cross_device_reduce_1stage`` below it,
``cross_device_reduce_2stage`` above); S_max = 8 MiB (``CustomAllreduce(max_size=8192 * 1024)`` in
vllm/distributed/device_communicators/custom_all_reduce.py). One-shot: every rank reads the whole message
from each of its r - 1 peers, each over its own link (one link latency, S at B / (G_up - 1)). Two-shot: a
reduce-scatter then an all-gather, each rank reading S / r from every peer per stage (two link latencies;
at r = G_up its bandwidth term equals the ring's). Measured: vLLM's TP8 custom all-reduce on MI355X takes
6.3 us for 24 KB and 10.0 us for 192 KB (vllm-project/vllm PR #39080), against 5.3 and 7.5 us by this formula
(lat 5 us, B 537.6 GB/s) and 70 and 72 us as a ring. Every term is 0 at r = 1.

The library's ring inside a mesh has only the links among the group's own GPUs: r' - 1 of each GPU's G_up - 1,
so a 2-GPU group reduces over its one direct link. With that share each kernel switch costs time rather than
saving it (one-shot to ring at r = 2 adds a latency; two-shot to ring adds 2 (r - 2) latencies), so the time
never falls as the message grows.

References:
  vLLM, csrc/custom_all_reduce.cuh and vllm/distributed/device_communicators/custom_all_reduce.py
    (github.com/vllm-project/vllm; github.com/ROCm/vllm);
  vllm-project/vllm PR #39080 (TP8 all-reduce microseconds by message size on MI355X, peak (N - 1) x 76.8 GB/s);
  AMD Instinct MI300X platform: 8 OAM GPUs fully connected by 7 Infinity Fabric links each
    (amd.com/en/products/accelerators/instinct/mi300/platform.html).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays

ONE_SHOT_MAX_BYTES_R4 = 512.0 * 1024.0
"""S_1 at r <= 4: messages below it take the one-shot kernel (vLLM ``custom_all_reduce.cuh``)."""
ONE_SHOT_MAX_BYTES_R8 = 256.0 * 1024.0
"""S_1 at 4 < r <= 8."""
CUSTOM_MAX_BYTES = 8.0 * 1024.0 * 1024.0
"""S_max: vLLM's custom all-reduce takes messages below 8 MiB; larger ones go to the collective library."""
MAX_WORLD = 8.0
"""The custom kernels serve 2, 4, 6 or 8 GPUs (``CustomAllreduce._SUPPORTED_WORLD_SIZES``), all in one domain."""


def ring_allreduce_s(size_bytes: jax.Array, ring: jax.Array, dev: DeviceArrays,
                     link_eff: jax.Array = 1.0) -> jax.Array:
    """t = 2 (r - 1) / r S / (B c_x) + 2 (r - 1) lat (seconds; 0 at r = 1).

    Example:
      S = 16 KiB, r = 8, B = 448 GB/s, lat = 5 us: 0.064 + 70 = 70.06 us.
    """
    r = jnp.maximum(ring, 1.0)
    return 2.0 * (r - 1.0) / r * size_bytes / (dev.link_bytes_per_s * link_eff) + 2.0 * (r - 1.0) * dev.link_latency_s


def mesh_allreduce_s(size_bytes: jax.Array, ring: jax.Array, dev: DeviceArrays,
                     link_eff: jax.Array = 1.0) -> jax.Array:
    """The fully connected mesh's custom all-reduce (module docstring; seconds, 0 at r = 1).

    Example:
      MI300X (B 448 GB/s, G_up 8, lat 5 us), r = 8: S = 16 KiB one-shot, 5 + 16,384 x 7 / 448e9 s = 5.256 us;
      S = 1 MiB two-shot, 10 + 2 x 1,048,576 x 7 / (8 x 448e9) s = 14.096 us; S = 16 MiB: the ring's.
      r = 2, S = 16 MiB: a ring over the one link, 16,777,216 / 64e9 s + 10 us = 272.1 us.
    """
    r = jnp.maximum(ring, 1.0)
    peer_bw = dev.link_bytes_per_s * link_eff / jnp.maximum(dev.scaleup_domain_gpus - 1.0, 1.0)
    lat = dev.link_latency_s
    one_max = jnp.where(r <= 4.0, ONE_SHOT_MAX_BYTES_R4, ONE_SHOT_MAX_BYTES_R8)
    one_shot = (r <= 2.0) | (size_bytes < one_max)
    custom = jnp.where(one_shot, lat + size_bytes / peer_bw, 2.0 * lat + 2.0 * size_bytes / (r * peer_bw))
    # the custom kernels serve 2, 4, 6 or 8 GPUs of one domain (_SUPPORTED_WORLD_SIZES); others use the library
    served = (size_bytes < CUSTOM_MAX_BYTES) & (r <= jnp.minimum(MAX_WORLD, dev.scaleup_domain_gpus)) & (r % 2.0 == 0.0)
    # the library's ring inside the mesh owns r' - 1 of each GPU's G_up - 1 links (the floor only keeps a
    # one-GPU domain's division finite)
    share = (jnp.minimum(r, dev.scaleup_domain_gpus) - 1.0) / jnp.maximum(dev.scaleup_domain_gpus - 1.0, 1.0)
    library = ring_allreduce_s(size_bytes, r, dev, link_eff * jnp.maximum(share, 1.0 / 64.0))
    t = jnp.where(served, custom, library)
    return jnp.where(r > 1.0, t, 0.0)


def allreduce_s(size_bytes: jax.Array, ring: jax.Array, dev: DeviceArrays, link_eff: jax.Array = 1.0) -> jax.Array:
    """Seconds of one all-reduce of ``size_bytes`` over ``ring`` devices: the mesh's kernels where the
    device's ``full_mesh`` is 1, else the ring (module docstring).

    Args:
      size_bytes: S, the message each device contributes (bytes).  ring: r, devices taking part.
      dev: the device (link_bytes_per_s, link_latency_s, scaleup_domain_gpus, full_mesh).
      link_eff: c_x, the fraction of link bandwidth reached (the measured profile's; 1 for the roofline).

    Returns:
      seconds (0 at r = 1).

    Example:
      Llama-3.1-70B at batch 1 on 8 MI300X: S = 8,192 x 2 B; 5.256 us a mesh all-reduce, 70.06 us a ring.
    """
    return jnp.where(dev.full_mesh > 0.0, mesh_allreduce_s(size_bytes, ring, dev, link_eff),
                     ring_allreduce_s(size_bytes, ring, dev, link_eff))


def tp_allreduces(model: ModelArrays, a2a_layers: jax.Array = 0.0) -> jax.Array:
    """The tensor-parallel all-reduces of one pass over all layers: n_ar L - L_a2a.

    n_ar is the model's all-reduces per layer (2; 1 where attention and MLP share one, Falcon's parallel block:
    ``ModelArrays.allreduces_per_layer``); a layer whose MoE exchange is an all-to-all (L_a2a of them, under an
    expert-parallel layout with attention DP) gives up one. Every pricing path counts them through this.

    Example:
      Falcon-180B (80 layers, parallel attention): 80; Llama-3.1-70B: 160; DeepSeek-V3 (61 layers) with its 58 MoE
      layers on all-to-alls: 64 (tests/costmodel/test_shared_allreduce.py).
    """
    return model.allreduces_per_layer * model.n_layers - a2a_layers
