"""Parallel layouts of a mixture-of-experts replica: expert parallelism (EP) and attention data parallelism (DP).

A pipeline stage of a replica holds n = tp x dp GPUs. Attention runs as dp data-parallel ranks of tp
tensor-parallel GPUs each (every DP rank holds its own requests and their KV; the non-expert weights are
replicated per DP rank); the routed experts are split over ep ranks (moe_tp = n / ep GPUs share each
expert). Three rules cover the layouts serving engines run: dp = 1 with ep dividing tp (experts spread
inside the tensor-parallel group, the all-reduce combines them), dp > 1 with ep = n ("DEP": tokens
are dispatched to their experts and combined back by all-to-alls) and dp > 1 with ep = 1 (moe_tp = n: the
experts run tensor-parallel over all n GPUs on every rank's tokens, gathered before the MoE layer and
reduced back after it; SGLang's ``--enable-dp-attention`` without an all-to-all backend, "DP for attention,
TP for FFN"). Identity layout: dp = ep = 1.

A pass of T tokens (F FLOPs, weight bytes W, other bytes O as :mod:`sweepkit.costmodel.passes` counts them)
is priced as a roofline over the n GPUs of the slowest GPU's work times n, with imbalance
I = max / mean expert load over the EP ranks (1 where ep = 1) and r_kv copies of each token's KV across
attention-TP (MLA: r_kv = tp, one latent head; GQA: r_kv = max(1, tp / H_kv)):

    F_n = F + 2 k P_e T (I - 1) + F_I (r_kv - 1)
    W_n = W + (dp - 1) P_rep w + P_e w (min(S, I E_read(T)) - E_read(T)) + P_I w dp (r_kv - 1)
    P_rep = P_mm - k P_e
    O_n = O + KV_read (r_kv - 1)

(KV_read: :func:`~sweepkit.costmodel.passes.kv_bytes_read`, K kv without DSA; F_I and P_I: a DSA model's
lightning-indexer FLOPs and weights, which every attention-TP GPU of every DP rank runs and holds whole
(r_kv = tp for MLA, the attention of every DSA model); 0 otherwise.)
With the identity layout (dp = ep = I = r_kv = 1) the added terms are exact zeros. The layout's
communication (the all-to-alls of expert parallelism, the gathered MoE tensor-parallel layer, two-batch
overlap) is priced by :mod:`sweepkit.costmodel.moe_comm`.

Redundant experts (EPLB): R extra replicas of the busiest experts give S = E + R expert slots, S / ep per EP
rank, so ep need only divide S (LMSYS's EP72 decode holds 256 + 32 = 288 slots, 4 per GPU). Each replica is
resident (P_e w R more bytes over the replica) and the busiest rank streams at most its S / ep slots:
W_n's cap min(E, .) above becomes min(S, .); the balance it buys is the imbalance I (:data:`IMBALANCE_EPLB`).

References:
  DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, sec. 3.4 (EP32 prefill, EP320 decode,
  DP attention, redundant experts); github.com/deepseek-ai/EPLB; LMSYS, "Deploying DeepSeek with PD
  Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs", lmsys.org/blog/2025-05-05-large-scale-ep
  (DP attention, EPLB).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.catalogue import Device, Model
from sweepkit.costmodel.arrays import DeviceArrays, ModelArrays
from sweepkit.costmodel.memory import MEM_UTIL, kv_bytes_per_token, resident_bytes
from sweepkit.costmodel.kept import kept_bytes_added
from sweepkit.costmodel.passes import (Work, expert_bytes_saved, experts_read, index_flops, kv_bytes_read,
                                       linear_state_traffic)
from sweepkit.errors import InputError

IMBALANCE = 1.3
"""Default max / mean expert load over EP ranks without a load balancer: typical values run from 1.05 (well
balanced) to 1.3 and above (skewed routing) (impala-blog.pages.dev/blog/wide-ep-part-3-balancing-portability);
per-rank imbalance without balancing measured 1.30-4.01 over MoE models of 106B-671B (UltraEP, arXiv 2026,
catalyzex.com/author/Jing%20Mai): the low end of both."""
IMBALANCE_EPLB = 1.05
"""Max / mean expert load with redundant experts placed by EPLB (github.com/deepseek-ai/EPLB): the 'well
balanced' end of the same range; exact per-batch balancers reach 1.01-1.04 (UltraEP)."""
SCALE_UP_DOMAIN = 8
"""GPUs per scale-up (NVLink / xGMI) domain where the catalogue gives none: one HGX / OAM baseboard."""
INTERCONNECTS = {
    "ib-ndr": (50e9, 10e-6),      # ConnectX-7, 400 Gb/s per GPU (InfiniBand NDR)
    "ib-xdr": (100e9, 10e-6),     # ConnectX-8, 800 Gb/s per GPU
    "roce-400": (50e9, 15e-6),    # 400 GbE RoCEv2 per GPU
    "ib-hdr": (25e9, 10e-6),      # ConnectX-6, 200 Gb/s per GPU
}
"""Scale-out network per GPU: (bytes/s one direction, latency s). NVIDIA ConnectX-7/8 and ConnectX-6 product
briefs (line rates); 10 us per message as :data:`sweepkit.serving.config.KV_LINK`."""
DEFAULT_INTERCONNECT = "ib-ndr"
EXCHANGES = ("all-to-all", "gather")
"""How a DEP layout's MoE layer moves tokens to their experts and back: ``all-to-all`` (DeepEP-style dispatch
and combine, SGLang's and vLLM's all-to-all backends, TensorRT-LLM's wide-EP all-to-all) or ``gather``
(TensorRT-LLM's attention-DP MoE without an all-to-all backend: ``allgather`` of the quantized tokens, their
scales and routing before the fused MoE, ``reducescatter`` of its output after it; tensorrt_llm/_torch/modules/
fused_moe/fused_moe_cutlass.py, ``use_dp and parallel_size > 1``), priced by
:func:`sweepkit.costmodel.moe_comm.ep_gather`."""
NVFP4_BYTES = 0.5 + 1.0 / 16.0
"""Bytes per value of an NVFP4 tensor: a 4-bit value plus one FP8 scale per 16 values (NVIDIA Transformer Engine
docs, "NVFP4": 16-element blocks with an E4M3 scale)."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Layout:
    """How one replica's stage spreads attention and experts over its tp x dp GPUs (scalars; see module doc).

    Attributes:
      dp: attention data-parallel ranks.  ep: expert-parallel ranks.  imbalance: I, max / mean expert load.
      moe_layers: L_moe.  kv_replicas: r_kv, copies of a token's KV across attention-TP.
      dispatch_bytes, combine_bytes: bytes per activation value of the two all-to-alls.
      domain_gpus: GPUs of the replica per scale-up domain.  scale_out_bytes_per_s, scale_out_latency_s:
        the network between domains, per GPU.  expert_slots: S = E + R, routed experts plus redundant
        replicas.  overlap: 1 with two-batch overlap, else 0.  moe_tp: GPUs sharing each expert, n / ep
        (n under attention DP with ep = 1: the gathered tensor-parallel MoE layer).  rank_budget: tokens one
        attention-DP rank schedules per step, N_tok / dp (inf: not bounded), the most prompt tokens the busiest
        rank holds (:mod:`sweepkit.costmodel.rank_balance`).  exchange: how a DEP layout (ep = n) moves tokens
        to their experts: 0 dispatch and combine all-to-alls, 1 an all-gather of every rank's quantized tokens
        and a reduce-scatter of the partial sums (:data:`EXCHANGES`).
    """

    dp: jax.Array
    ep: jax.Array
    imbalance: jax.Array
    moe_layers: jax.Array
    kv_replicas: jax.Array
    dispatch_bytes: jax.Array
    combine_bytes: jax.Array
    domain_gpus: jax.Array
    scale_out_bytes_per_s: jax.Array
    scale_out_latency_s: jax.Array
    expert_slots: jax.Array
    overlap: jax.Array
    moe_tp: jax.Array
    rank_budget: jax.Array = float("inf")
    exchange: jax.Array = 0.0


def scale_up_domain(device: Device) -> int:
    """GPUs per scale-up domain of ``device`` (its catalogue field, else :data:`SCALE_UP_DOMAIN`)."""
    return int(getattr(device, "scaleup_domain_gpus", 0) or SCALE_UP_DOMAIN)


def scale_out(device: Device, name: str | None = None) -> tuple[float, float]:
    """(bytes/s, latency s) per GPU of interconnect ``name``, or the device's own, else InfiniBand NDR."""
    if name:
        return INTERCONNECTS[name]
    bw = getattr(device, "scaleout_bytes_per_s", 0.0)
    return (float(bw), INTERCONNECTS[DEFAULT_INTERCONNECT][1]) if bw else INTERCONNECTS[DEFAULT_INTERCONNECT]


def kv_replicas(model: Model, tp: int) -> float:
    """r_kv: MLA caches one latent per token that every attention-TP GPU needs (r_kv = tp); GQA splits its H_kv
    heads over tp and copies them once tp exceeds H_kv (r_kv = max(1, tp / H_kv))."""
    return float(tp) if model.is_mla else max(1.0, tp / model.n_kv_heads)


def make_layout(device: Device, model: Model, tp: int, *, dp: int = 1, ep: int = 1, imbalance: float | None = None,
                compute_format: str = "bf16", gpus_per_node: int | None = None, interconnect: str | None = None,
                redundant_experts: int = 0, two_batch_overlap: bool = False, token_budget: float | None = None,
                exchange: str = "all-to-all", dtype=None) -> Layout:
    """The :class:`Layout` of a replica (host values; :func:`check_layout` validates them first).

    Args:
      device, model: catalogue entries.  tp, dp, ep: degrees.  imbalance: I (default :data:`IMBALANCE`).
      compute_format: FP8 / FP4 matmuls dispatch in FP8.  gpus_per_node: GPUs of the cluster per scale-up
        domain (default the device's domain).  interconnect: a key of :data:`INTERCONNECTS` (default the
        device's scale-out network).  redundant_experts: R, expert replicas beyond the routed experts.
      two_batch_overlap: overlap the all-to-alls of two micro-batches with each other's compute.
      token_budget: N_tok, tokens the replica schedules per step (None: not bounded); each DP rank N_tok / dp.
      exchange: a DEP layout's MoE exchange, one of :data:`EXCHANGES`; ``gather`` moves FP4 tokens at
        :data:`NVFP4_BYTES` a value (quantized before the all-gather), FP8 at 1 B.

    Example:
      >>> from sweepkit.catalogue import get_device, get_model
      >>> lay = make_layout(get_device("H200"), get_model("deepseek-v3"), 1, dp=8, ep=8)
      >>> float(lay.kv_replicas), float(lay.domain_gpus)
      (1.0, 8.0)
    """
    domain = min(scale_up_domain(device), gpus_per_node or scale_up_domain(device))
    bw, lat = scale_out(device, interconnect)
    low = compute_format in ("fp8", "fp4", "nvfp4", "mxfp4")
    if exchange not in EXCHANGES:
        raise InputError(f"exchange = {exchange!r} is not allowed; expected one of {', '.join(EXCHANGES)}")
    gather = exchange == "gather"
    dispatch = (NVFP4_BYTES if gather and compute_format in ("fp4", "nvfp4", "mxfp4") else 1.0) if low else 2.0
    f = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    return Layout(dp=f(dp), ep=f(ep), imbalance=f(IMBALANCE if imbalance is None else imbalance),
                  moe_layers=f(model.n_moe_layers if model.is_moe else 0), kv_replicas=f(kv_replicas(model, tp)),
                  dispatch_bytes=f(dispatch), combine_bytes=f(2.0), domain_gpus=f(domain),
                  scale_out_bytes_per_s=f(bw), scale_out_latency_s=f(lat),
                  expert_slots=f(model.n_experts + redundant_experts), overlap=f(1.0 if two_batch_overlap else 0.0),
                  moe_tp=f(tp * dp / max(ep, 1)),
                  rank_budget=f(float("inf") if token_budget is None else token_budget / dp),
                  exchange=f(1.0 if gather else 0.0))


def check_layout(model: Model, device: Device, tp: int, dp: int, ep: int, where: str,
                 gpus_per_node: int | None = None, redundant_experts: int = 0) -> None:
    """Refuse a layout sweepkit cannot price, in one line naming the field, its value and what is allowed."""
    n = tp * dp
    domain = min(scale_up_domain(device), gpus_per_node or scale_up_domain(device))
    slots = model.n_experts + redundant_experts
    why = None
    if redundant_experts < 0:
        why = f"redundant_experts = {redundant_experts} is not allowed; expected a count >= 0"
    elif redundant_experts and (not model.is_moe or ep < 2):
        why = (f"redundant_experts = {redundant_experts} is not allowed with ep = {ep}"
               f"{'' if model.is_moe else f' ({model.name} is dense)'}: expert replicas need expert parallelism "
               f"(ep >= 2 on a mixture-of-experts model); expected 0")
    elif model.is_moe and redundant_experts > model.n_experts:
        why = (f"redundant_experts = {redundant_experts} is not allowed; expected at most {model.name}'s "
               f"{model.n_experts} routed experts (one replica each)")
    elif redundant_experts and slots % ep:
        divisors = [d for d in range(2, 2 * ep) if slots % d == 0 and d <= slots]
        fix = -slots % ep
        why = (f"ep = {ep} is not allowed with {redundant_experts} redundant experts; expected a divisor of the "
               f"{slots} expert slots ({', '.join(map(str, divisors))}), or redundant_experts = "
               f"{redundant_experts + fix} for ep = {ep}")
    elif ep > 1 and not model.is_moe:
        why = f"ep = {ep} is not allowed; {model.name} is dense (no routed experts): expected ep = 1"
    elif dp > 1 and not model.is_moe:
        why = (f"dp = {dp} is not allowed; attention data parallelism needs a mixture-of-experts model "
               f"({model.name} is dense: use instances): expected dp = 1")
    elif model.is_moe and slots % ep:
        divisors = [d for d in range(1, model.n_experts + 1) if model.n_experts % d == 0]
        fix = -slots % ep
        why = (f"ep = {ep} is not allowed; expected a divisor of {model.name}'s {model.n_experts} routed experts "
               f"({', '.join(map(str, divisors))}), or redundant_experts = {fix} (EPLB replicas: "
               f"{slots + fix} slots)")
    elif dp == 1 and tp % ep:
        why = f"ep = {ep} is not allowed with dp = 1; expected a divisor of tp = {tp} (experts inside the TP group)"
    elif dp > 1 and ep not in (1, n):
        why = (f"ep = {ep} is not allowed with dp = {dp}; expected ep = tp x dp = {n} (attention data parallelism "
               f"with the experts over every GPU of the stage) or ep = 1 (the experts tensor-parallel over the "
               f"{n} GPUs on every rank's gathered tokens)")
    elif tp > domain:
        why = (f"tp = {tp} is not allowed on {device.name}; expected at most its scale-up domain of {domain} GPUs "
               f"(tensor parallelism over the scale-out network is not modelled)")
    if why:
        raise InputError(f"{where}: {why}")


def effective_imbalance(lay: Layout) -> jax.Array:
    """I where the experts are spread over ep > 1 ranks, else 1."""
    return jnp.where(lay.ep > 1.0, lay.imbalance, 1.0)


def imbalance_flops(lay: Layout, net: ModelArrays, tokens: jax.Array) -> jax.Array:
    """2 k P_e T (I - 1): the routed-expert FLOPs the busiest EP rank's share adds over an even split, counted
    over the stage's n GPUs (the F_n term of the module docstring; 0 where ep = 1).

    Example:
      DeepSeek-V3 (k = 8, P_e = 58 layers x 44.0 M = 2.55 B) DEP8 at I = 1.3 over 1,000 tokens:
      2 x 8 x 2.55 B x 1,000 x 0.3 = 12.3 TFLOP (tests/costmodel/test_expert_imbalance.py).
    """
    return 2.0 * net.experts_per_token * net.routed_expert_params * tokens * (effective_imbalance(lay) - 1.0)


def layout_work(lay: Layout, net: ModelArrays, work: Work, weight_bytes: jax.Array, kv_bytes: jax.Array):
    """(dF, dW, dO): FLOPs, weight bytes and other bytes the layout adds to a pass of ``work`` (module doc;
    K kv is the KV the pass reads, :func:`sweepkit.costmodel.passes.kv_bytes_read`); all three are exactly 0
    for the identity layout.

    A DSA model's lightning indexer is replicated on every attention-TP rank (vLLM's and SGLang's indexers
    use replicated projections and one key cache per rank), so r_kv copies also run its FLOPs
    (:func:`sweepkit.costmodel.passes.index_flops`), read its weights and read its keys: dF adds
    (r_kv - 1) F_I (per token), dW dp (r_kv - 1) P_I w (per GPU). A hybrid model's Gated DeltaNet state is
    split over the ranks by value heads, so dO copies the full-attention KV alone.

    Example:
      DeepSeek-V3 DEP8 (dp 8, ep 8, I 1): dW = 7 P_rep w (the non-expert weights, once per DP rank).
    """
    imb, tokens = effective_imbalance(lay), work.tokens
    k, p_e = net.experts_per_token, net.routed_expert_params
    e_read = experts_read(tokens, net)
    d_flops = imbalance_flops(lay, net, tokens) + index_flops(work, net) * (lay.kv_replicas - 1.0)
    p_rep = net.matmul_params - k * p_e
    d_weights = ((lay.dp - 1.0) * (p_rep * weight_bytes + kept_bytes_added(net.kept_params, net, weight_bytes))
                 + p_e * weight_bytes * (jnp.minimum(jnp.maximum(lay.expert_slots, net.n_experts), imb * e_read)
                                         - e_read)
                 + lay.dp * (lay.kv_replicas - 1.0) * net.indexer_params * weight_bytes)
    # a hybrid model's linear-attention state is split by value heads over attention-TP, not copied with the KV
    d_other = (kv_bytes_read(work, net, kv_bytes) - linear_state_traffic(work, net)) * (lay.kv_replicas - 1.0)
    return d_flops * net.present, d_weights * net.present, d_other * net.present


def layout_resident_bytes(lay: Layout, target: ModelArrays, draft: ModelArrays, weight_bytes: jax.Array):
    """Weight bytes over the replica: the instance's (:func:`sweepkit.costmodel.memory.resident_bytes`: target
    and draft, routed experts in their own narrower format at min(w, w_e)) plus what the layout adds: the
    non-expert weights again on each further DP rank, the redundant expert slots (in the experts' format), a DSA
    model's indexers once per GPU of attention (dp r_kv). Equal to the instance's on the identity layout.

    Example:
      gpt-oss-120b in bf16 on one GPU: 2.13 B non-expert parameters x 2 B + 128 x 36 x 24.9 M expert
      parameters x 0.53125 B = 65.17 GB (not 233.6 GB, every parameter at 2 B).
    """
    rep = target.resident_params - target.n_experts * target.routed_expert_params
    redundant = jnp.maximum(lay.expert_slots - target.n_experts, 0.0) * target.routed_expert_params
    indexers = lay.dp * (lay.kv_replicas - 1.0) * (target.indexer_params + draft.indexer_params * draft.present)
    return (resident_bytes(target, draft, weight_bytes)
            + ((lay.dp - 1.0) * rep + redundant + indexers) * weight_bytes
            + expert_bytes_saved(redundant, target, weight_bytes)
            + (lay.dp - 1.0) * kept_bytes_added(target.kept_resident_params, target, weight_bytes))


def layout_kv_capacity_tokens(lay: Layout, dev: DeviceArrays, gpus: jax.Array, target: ModelArrays,
                              draft: ModelArrays, weight_bytes: jax.Array, kv_bytes: jax.Array) -> jax.Array:
    """KV token positions the replica's ``gpus`` hold: (HBM x gpus x mem_util - resident) / (r_kv x KV per token).

    Each DP rank holds its own requests' KV, so MLA capacity grows with dp while attention-TP copies it.

    Example:
      DeepSeek-V3 (61 layers x (512 + 64) values per token) in FP8 on 8 x H200 as DEP8 holds r_kv = 1 copy;
      as TP8, r_kv = 8 copies: the same free bytes hold 8 x fewer tokens.
    """
    free = dev.hbm_capacity_bytes * gpus * MEM_UTIL - layout_resident_bytes(lay, target, draft, weight_bytes)
    per_token = kv_bytes_per_token(target, draft, kv_bytes) * lay.kv_replicas
    return jnp.maximum(jnp.floor(free / per_token), 0.0)


def per_gpu_weight_bytes(model: Model, tp: int, dp: int, pp: int, weight_bytes_per_value: float,
                         redundant_experts: int = 0) -> float:
    """Weight bytes on one GPU: the non-expert weights over tp (a DSA model's indexers whole on each GPU), the
    expert slots (E + R) over tp x dp, layers over pp.

    Routed experts are stored at min(w, w_e) where the model keeps them in its ``expert_weight_format``
    (:meth:`sweepkit.catalogue.Model.resident_weight_bytes`)."""
    experts = model.n_experts * model.routed_expert_params
    total = model.resident_weight_bytes(weight_bytes_per_value)
    expert_bytes = total - (model.resident_params - experts) * weight_bytes_per_value
    if model.n_experts:
        total += expert_bytes * redundant_experts / model.n_experts
        expert_bytes *= (model.n_experts + redundant_experts) / model.n_experts
    indexers = model.indexer_layers * model.indexer_params * weight_bytes_per_value * (1.0 - 1.0 / tp)
    return ((total - expert_bytes) / tp + indexers + expert_bytes / (tp * dp)) / pp
