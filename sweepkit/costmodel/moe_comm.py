"""Communication of a mixture-of-experts layout: the all-to-alls of expert parallelism, the gathered MoE
tensor-parallel layer and two-batch overlap (the layouts: :mod:`sweepkit.costmodel.layout`).

Communication per pipeline slot: n_ar L - L_moe a all-reduces over tp of (T / dp) D x 2 bytes (n_ar = 2 on a
MoE model), and with a = [dp > 1] two all-to-alls (dispatch, combine) per MoE layer. A GPU sends t = T / n tokens, each to the c
distinct remote ranks its k experts live on, c_ep = ep (1 - (1 - 1/ep)^k) (ep - 1) / ep (uniform routing);
the busiest rank moves I times the mean. Of its peers, (g - 1)/(ep - 1) share its scale-up domain of
g = min(ep, domain) GPUs and (ep - g)/(ep - 1) sit across the scale-out network; both fabrics move at once:

    bytes = t c_ep D b_a2a I,   t_a2a = max(bytes s_in / link, bytes s_out / scale_out) + lat_link + [ep > g] lat_out
                                        + t_call

with b_a2a = 1 (FP8) for dispatch where the matmuls run in FP8 or FP4 and b_a2a = 2 (BF16) for combine, as DeepEP
does; 0 at ep = 1. t_call is a fixed time per call beyond the hops' latencies (:data:`DISPATCH_LATENCY_S`,
:data:`COMBINE_LATENCY_S`: 41 and 66 us): with it the formula reproduces DeepEP's published low-latency kernel
times (128 tokens per GPU, hidden 7,168, top-8, EP8 to EP256 on H800 with 400 Gb/s InfiniBand) within 7 % for
dispatch and 9 % for combine (within 3 % and 6 % from EP16 up); bytes and hops alone fall 35-65 us short of
every entry. Those fixed microseconds are the send and receive kernels, which occupy the GPU's SMs (the bytes in
flight do not).

DEP by all-gather and reduce-scatter (``exchange`` = 1, TensorRT-LLM's attention-DP MoE without an all-to-all
backend): every GPU receives every rank's quantized tokens and returns partial sums for all of them, two ring
passes of n - 1 steps over the mean rank's t tokens, no fixed call time (:func:`ep_gather`).

Gathered MoE tensor parallelism (dp > 1, ep = 1): before each MoE layer the n GPUs all-gather every rank's
t = T / n tokens (SGLang ``dp_gather``: an all-gather of the padded buffer in a decode step, an all-reduce of
the zero-filled one, two ring passes, when the batch holds prompt tokens), after it they all-reduce the
experts' partial sums over all T tokens and each rank keeps its own (``tensor_model_parallel_all_reduce``
then ``dp_scatter``); no all-to-all and no expert imbalance. As ring collectives of one rank's chunk
t D x 2 bytes:

    t_gather = (1 + [prompt tokens] + 2) ((n - 1) t D 2 / bw + (n - 1) lat)

with bw, lat the scale-up link's (the scale-out network's where n spans domains). SGLang since PR #22642
(April 2026) fuses the all-reduce and scatter into one reduce-scatter (one ring pass for 2) where ep = dp;
the releases the measured rows ran (v0.5.3-v0.5.6) all-reduce.

Two-batch overlap (TBO, ``overlap`` = 1): a pass runs as two micro-batches of T / 2 tokens and each one's
dispatch and combine overlap the other's computation. With C the compute of both halves (each re-reads the
weights it streams) and A their all-to-alls over L_a2a MoE layers, the pass takes

    t_moe+compute = max(C + B, A) + min(C + B, A) / (2 L_a2a)          (one half-layer to fill the pipeline)

against C + A without it (:func:`overlapped`). B is the part of A that occupies the SMs: the fixed t_call of
every dispatch and combine (LMSYS: decode communication kernels "either fully utilize SMs (during
send/receive) or none (during inflight waiting)"; DeepEP's unit test puts a dispatch's SM time at 0.06 ms, the
fitted 41 us), so it adds to the compute instead of hiding behind it. TBO helps where A is comparable to C and
costs where the re-read weights and B dominate: LMSYS measured +25.5 % decode throughput at 256 tokens per
GPU, -27 % at 32 and +35 % at 128 with simulated MTP (EP72 on H100, lmsys.org/blog/2025-05-05-large-scale-ep,
"two-batch overlap" ablation).

References:
  github.com/deepseek-ai/DeepEP (FP8 dispatch, BF16 combine, low-latency kernel times); DeepSeek-AI,
  "DeepSeek-V3 Technical Report", arXiv:2412.19437, sec. 3.4; LMSYS, "Deploying DeepSeek with PD
  Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs", lmsys.org/blog/2025-05-05-large-scale-ep
  (DeepEP, two-batch overlap).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays
from sweepkit.costmodel.layout import Layout, effective_imbalance
from sweepkit.costmodel.passes import ACTIVATION_BYTES

DISPATCH_LATENCY_S = 41e-6
"""Fixed seconds of one MoE dispatch beyond its bytes and hop latencies: the mean residual of DeepEP's
low-latency dispatch times (EP16-EP256: 118, 155, 173, 192, 194 us) over the bytes and hops of
:func:`all_to_all_s` (74-155 us with a 5 us NVLink and a 10 us InfiniBand hop);
github.com/deepseek-ai/DeepEP README, "Low-latency kernels with pure RDMA" (H800, CX7 400 Gb/s, 128 tokens,
hidden 7,168, top-8, FP8 dispatch). LMSYS measures a dispatch's SM-occupying time at 0.06 ms (lmsys.org/blog/
2025-05-05-large-scale-ep, "Detail Breakdown")."""
COMBINE_LATENCY_S = 66e-6
"""Fixed seconds of one MoE combine beyond its bytes and hop latencies: the same fit on DeepEP's low-latency
combine times (EP16-EP256: 195, 273, 314, 369, 360 us, BF16) over 133-296 us of bytes and hops."""
GATHER_COMBINE_PASSES = 2.0
"""Ring passes of one rank's chunk in the combine after a gathered tensor-parallel MoE layer: an all-reduce
(2), as SGLang v0.5.x runs it (``tensor_model_parallel_all_reduce`` then ``dp_scatter``)."""


def remote_copies(ep: jax.Array, k: jax.Array) -> jax.Array:
    """c_ep = ep (1 - (1 - 1/ep)^k) (ep - 1) / ep: distinct remote ranks a token's k experts land on (uniform
    routing; one copy per destination rank); 0 at ep = 1, below min(k, ep - 1).

    Example:
      ep 8, k 8: 8 (1 - (7/8)^8) x 7/8 = 4.595.
    """
    safe = jnp.maximum(ep, 1.0)
    return safe * (1.0 - jnp.power(1.0 - 1.0 / safe, k)) * (safe - 1.0) / safe


def all_to_all_bytes(lay: Layout, tokens_per_gpu: jax.Array, d_model: jax.Array, k: jax.Array,
                     bytes_per_value: jax.Array) -> jax.Array:
    """Bytes the busiest GPU sends in one all-to-all: t c_ep D b_a2a I (0 at ep = 1)."""
    return tokens_per_gpu * remote_copies(lay.ep, k) * d_model * bytes_per_value * effective_imbalance(lay)


def all_to_all_s(lay: Layout, dev: DeviceArrays, bytes_: jax.Array, call_s: jax.Array) -> jax.Array:
    """Seconds of one all-to-all moving ``bytes_`` per GPU: the scale-up share at link bandwidth and the
    scale-out share at the network's, at once, plus a latency per hop and ``call_s``, the call's fixed time
    (module doc); 0 at ep = 1.

    Example:
      DeepEP's EP64 dispatch of 128 tokens (c_ep 7.45, 6.84 MB, 56 / 63 of it over 50 GB/s InfiniBand):
      121.6 + 5 + 10 + 41 = 177.6 us against 173 us published (tests/costmodel/test_a2a_latency.py).
    """
    ep = lay.ep
    g = jnp.minimum(ep, lay.domain_gpus)
    peers = jnp.maximum(ep - 1.0, 1.0)
    inside, across = (g - 1.0) / peers, (ep - g) / peers
    t = jnp.maximum(bytes_ * inside / dev.link_bytes_per_s, bytes_ * across / lay.scale_out_bytes_per_s)
    lat = dev.link_latency_s + jnp.where(ep > g, lay.scale_out_latency_s, 0.0)
    return jnp.where(ep > 1.0, t + lat + call_s, 0.0)


def a2a_busy_s(lay: Layout) -> jax.Array:
    """B per MoE layer: seconds of its dispatch and combine that occupy the SMs (their fixed call times,
    :data:`DISPATCH_LATENCY_S` + :data:`COMBINE_LATENCY_S`), where dp > 1 and ep > 1 exchange by all-to-alls;
    else 0 (a gathered exchange has no fixed call time, :func:`ep_gather`)."""
    return jnp.where((lay.dp > 1.0) & (lay.ep > 1.0) & (lay.exchange == 0.0), DISPATCH_LATENCY_S + COMBINE_LATENCY_S,
                     0.0)


def _ring_link(lay: Layout, dev: DeviceArrays, n: jax.Array):
    """(bytes/s, latency s) of one step of a ring over n GPUs: the scale-up link's, or where the ring spans
    scale-up domains the slower of it and the scale-out network's, with both latencies."""
    across = n > lay.domain_gpus
    bw = jnp.where(across, jnp.minimum(dev.link_bytes_per_s, lay.scale_out_bytes_per_s), dev.link_bytes_per_s)
    return bw, dev.link_latency_s + jnp.where(across, lay.scale_out_latency_s, 0.0)


def moe_gather(lay: Layout, dev: DeviceArrays, tokens_per_gpu: jax.Array, d_model: jax.Array,
               extend: jax.Array = 0.0):
    """(seconds, bytes each GPU sends) of one gathered tensor-parallel MoE layer's all-gather and combine over
    its n = ep x moe_tp GPUs (module doc): passes = 1 + ``extend`` + :data:`GATHER_COMBINE_PASSES` ring
    passes of one rank's chunk t D x 2 bytes, each of n - 1 steps.

    Args:
      lay: the layout.  dev: the device.  tokens_per_gpu: t = T / n.  d_model: D.
      extend: 1 where the pass holds prompt tokens (the gather is then an all-reduce), else 0.

    Example:
      8 x H200 (NVLink 450 GB/s, 5 us a step), 256 decode rows per GPU of DeepSeek-V3 (D 7,168): chunk 3.67 MB,
      3 x 7 x 3.67 MB = 77.1 MB per GPU: 171.3 us at 450 GB/s + 21 steps x 5 us = 276.3 us per MoE layer
      (tests/costmodel/test_moe_gather.py).
    """
    n = lay.ep * lay.moe_tp
    bw, lat = _ring_link(lay, dev, n)
    passes = 1.0 + extend + GATHER_COMBINE_PASSES
    steps = jnp.maximum(n - 1.0, 0.0)
    bytes_ = passes * steps * tokens_per_gpu * d_model * ACTIVATION_BYTES
    return bytes_ / bw + passes * steps * lat, bytes_


def ep_gather(lay: Layout, dev: DeviceArrays, tokens_per_gpu: jax.Array, d_model: jax.Array):
    """(seconds, bytes each GPU sends) of one expert-parallel MoE layer exchanged by an all-gather of every
    rank's quantized tokens and a reduce-scatter of the experts' partial sums (``lay.exchange`` = 1; module
    doc): two ring passes over the n = ep GPUs, the gather at ``dispatch_bytes`` a value, the reduce-scatter
    at ``combine_bytes``, each of n - 1 steps of one rank's chunk t D b.

        t = (n - 1) t D (b_d + b_c) / link + 2 (n - 1) lat      (the busiest expert rank's load is compute's)

    Args:
      lay: the layout (ep, dispatch_bytes, combine_bytes, the scale-up domain).  dev: the device.
      tokens_per_gpu: t, the mean tokens of one rank (every rank receives all of them).  d_model: D.

    Example:
      DeepSeek-R1 NVFP4 DEP8 on B200 (NVLink 900 GB/s, 5 us a step), 384 decode rows a rank: 7 x 384 x 7,168 x
      (0.5625 + 2) B = 49.4 MB per GPU: 54.9 us + 14 x 5 us = 124.9 us per MoE layer
      (tests/costmodel/test_ep_gather.py).
    """
    n = lay.ep
    bw, lat = _ring_link(lay, dev, n)
    steps = jnp.maximum(n - 1.0, 0.0)
    bytes_ = steps * tokens_per_gpu * d_model * (lay.dispatch_bytes + lay.combine_bytes)
    return bytes_ / bw + 2.0 * steps * lat, bytes_


def moe_all_to_all(lay: Layout, dev: DeviceArrays, net: ModelArrays, tokens_per_gpu: jax.Array,
                   extend: jax.Array = 0.0, mean_tokens_per_gpu: jax.Array | None = None):
    """(seconds, bytes sent by all GPUs per GPU) of one MoE layer's communication where dp > 1: its dispatch
    and combine all-to-alls (ep = n), its all-gather and reduce-scatter (ep = n, ``lay.exchange`` = 1:
    :func:`ep_gather` over ``mean_tokens_per_gpu``, default ``tokens_per_gpu``), or its all-gather and combine
    (:func:`moe_gather`, ep = 1; ``extend`` 1 where the pass holds prompt tokens)."""
    k, d = net.experts_per_token, net.d_model
    mean = tokens_per_gpu if mean_tokens_per_gpu is None else mean_tokens_per_gpu
    b_in = all_to_all_bytes(lay, tokens_per_gpu, d, k, lay.dispatch_bytes)
    b_out = all_to_all_bytes(lay, tokens_per_gpu, d, k, lay.combine_bytes)
    on = jnp.where(lay.dp > 1.0, 1.0, 0.0)
    t = all_to_all_s(lay, dev, b_in, DISPATCH_LATENCY_S) + all_to_all_s(lay, dev, b_out, COMBINE_LATENCY_S)
    e_t, e_b = ep_gather(lay, dev, mean, d)
    ex = lay.exchange > 0.0
    t, b = jnp.where(ex, e_t, t), jnp.where(ex, e_b, b_in + b_out)
    g_t, g_b = moe_gather(lay, dev, tokens_per_gpu, d, extend)
    gathered = lay.moe_tp > 1.0
    return on * jnp.where(gathered, g_t, t), on * jnp.where(gathered, g_b, b)


def overlap_microbatches(lay: Layout | None, mb, tokens: jax.Array):
    """Micro-batches of a pass: ``mb``, or at least 2 (no more than the tokens) under two-batch overlap."""
    if lay is None:
        return mb
    return jnp.where(lay.overlap > 0.0, jnp.maximum(mb, jnp.minimum(2.0, jnp.maximum(1.0, tokens))), mb)


def overlapped(compute_s: jax.Array, a2a_s: jax.Array, a2a_layers: jax.Array, overlap: jax.Array,
               busy_s: jax.Array = 0.0) -> jax.Array:
    """Seconds of a pass's compute and all-to-alls: C + A, or with two-batch overlap
    max(C + B, A) + min(C + B, A) / (2 L_a2a), B = ``busy_s`` the SM-occupying part of A (module doc).

    Example:
      C = 40 ms, A = 30 ms over 58 MoE layers: 70 ms without, 40 + 30 / 116 = 40.26 ms with it (B = 0);
      with B = 2 x 58 x 107 us = 12.4 ms: 52.4 + 30 / 116 = 52.67 ms.
    """
    busy = compute_s + busy_s
    tbo = jnp.maximum(busy, a2a_s) + jnp.minimum(busy, a2a_s) / (2.0 * jnp.maximum(a2a_layers, 1.0))
    return jnp.where(overlap > 0.0, tbo, compute_s + a2a_s)

