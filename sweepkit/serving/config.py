"""A (device, lever) configuration of the cluster, resolved into the engine's :class:`Policy` pytree.

The lever's fields over the cluster (:func:`resolve`) set the policy's scheduler fields as the table
:data:`sweepkit.serving.lever_fields.FIELDS` says; :func:`policy` derives the rest (the replica, KV units,
links, acceptance).

KV capacity per instance (units: tokens when reserved, 16-token blocks when paged):

    tokens = floor((HBM x tp x dp x pp x mem_util - resident weights) / (r x (KV_target + KV_draft per token)))

over the instance's tp x dp x pp GPUs (pipeline stages split the layers, so an instance's KV is the same as one
tensor-parallel group of tp x pp GPUs; the embedding and LM head sit on the first and last stages). With
attention data parallelism (dp > 1) the non-expert weights sit once per DP rank; r copies of each token's KV
sit on the attention-TP GPUs (MLA: r = tp; :func:`sweepkit.costmodel.layout.layout_kv_capacity_tokens`). The
paged watermark keeps 1% of the blocks free at admission.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.acceptance import workload_alphas
from sweepkit.catalogue import get_device, get_draft, get_format, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.layout import Layout, check_layout, layout_kv_capacity_tokens, make_layout
from sweepkit.costmodel.memory import kv_bytes_per_token, state_positions
from sweepkit.costmodel.steps import Instance, instance
from sweepkit.errors import InputError
from sweepkit.serving.cluster import Cluster
from sweepkit.serving.engine import COLOCATED, DECODE_POOL, PREFILL_POOL, Policy
from sweepkit.serving.lever_fields import Settings, policy_fields, resolve
from sweepkit.serving.levers import Lever, check_lever
from sweepkit.serving.profile import instance_efficiency

BLOCK_TOKENS = 16
"""Tokens per paged KV block (vLLM's default block size)."""
WATERMARK = 0.01
"""Share of paged blocks kept free at admission (vLLM's watermark)."""
HOST_LINK = dict(bytes_per_s=64e9, block_s=5e-6, j_per_bit=6e-12)
"""Swap link to host memory: PCIe 5.0 x16, 64 GB/s, 5 us per block, 6 pJ/bit."""
KV_LINK = dict(bytes_per_s=50e9, latency_s=10e-6, j_per_bit=15e-12)
"""Prefill -> decode KV link (disaggregated): InfiniBand NDR 400 Gb/s, 10 us + bytes / 50 GB/s, 15 pJ/bit."""
SPEC_SEED = 0
"""Acceptance seed of every speculative lever."""


@dataclasses.dataclass(frozen=True)
class Draw:
    """One draw of a serving grid's uncertainty bands (:mod:`sweepkit.serving.draws`).

    Attributes:
      index: the draw's number, 0..N-1.  alpha_offset: added to every alpha_i, clipped to [0, 1].
      factors: (device field, factor) pairs multiplying the device's values (``pass_overhead_s``: the
        cluster's step overhead).  price_factor: multiplies the device's price (cost only, after the run).
    """

    index: int
    alpha_offset: float = 0.0
    factors: tuple[tuple[str, float], ...] = ()
    price_factor: float = 1.0


@dataclasses.dataclass(frozen=True)
class Config:
    """One (device, lever) point of the cluster; ``draw`` perturbs its inputs (None: the point itself)."""

    device: str
    lever: Lever
    draw: Draw | None = None


def grid_points(grid) -> tuple[list[Config], list[float], list[float]]:
    """A serving grid's (device, lever) configurations (devices outer, levers inner; a lever limited to some
    devices only on those), with each one's price (USD per GPU-hour) and idle power (W per GPU)."""
    configs = [Config(d, lv) for d in grid.devices for lv in grid.levers if not lv.devices or d in lv.devices]
    return (configs, [get_device(c.device).price_usd_per_gpu_hour for c in configs],
            [get_device(c.device).idle_w for c in configs])


def state_tokens(cluster: Cluster, cfg: Config, res: Settings) -> float:
    """KV token positions one request's linear-attention state takes on an instance (target + draft state over
    the KV bytes of a position, times the layout's KV copies: :func:`sweepkit.costmodel.memory.state_positions`);
    0 on a model without Gated DeltaNet layers.

    Example:
      Qwen3.5-35B-A3B, bf16 KV, one GPU: 64,389,120 / 20,480 = 3,144 positions (197 blocks of 16).
    """
    target = get_model(cluster.model)
    if not target.is_hybrid:
        return 0.0
    draft = get_draft(cfg.lever.draft, target)
    with jax.enable_x64(True):
        t, d = model_arrays(target, jnp.float64), model_arrays(draft, jnp.float64)
        kv = get_format(res.kv_format).bytes_per_value
        return float(state_positions(t, d, kv)) / float(pool_layout(cluster, cfg, res).kv_replicas)


def check(cluster: Cluster, cfg: Config, where: str) -> Settings:
    """Resolve and validate a configuration; one-line :class:`InputError` naming ``where`` and the lever."""
    res = resolve(cluster, cfg.lever)
    gpus = (res.instances * res.tp * res.dp * res.pp
            + res.prefill_instances * res.prefill_tp * res.prefill_dp)
    if gpus != cluster.gpus:
        raise InputError(f"{where}: lever {cfg.lever.name!r}: instances x tp x dp x pp (+ prefill_instances x "
                         f"prefill_tp x prefill_dp) = {gpus} GPUs, expected the cluster's {cluster.gpus}")
    check_lever(cfg.lever, res, cfg.device, where)
    at = f"{where}: lever {cfg.lever.name!r} on {cfg.device}"
    model, device = get_model(cluster.model), get_device(cfg.device)
    check_layout(model, device, res.tp, res.dp, res.ep, at, cluster.gpus_per_node, res.redundant_experts)
    if res.moe_exchange == "gather" and not (res.dp > 1 and res.ep > 1):
        raise InputError(f"{at}: moe_exchange = 'gather' is not allowed with dp = {res.dp}, ep = {res.ep}; it "
                         f"prices a DEP layout's MoE exchange: expected dp > 1 and ep = tp x dp, or 'all-to-all'")
    if res.prefill_instances:
        check_layout(model, device, res.prefill_tp, res.prefill_dp, res.prefill_ep, f"{at} (prefill pool)",
                     cluster.gpus_per_node, res.redundant_experts if res.prefill_ep > 1 else 0)
    if kv_tokens(cluster, cfg, res) <= 0 or (res.prefill_instances and kv_tokens(cluster, cfg, res, True) <= 0):
        raise InputError(f"{where}: lever {cfg.lever.name!r} on {cfg.device}: the weights do not fit "
                         f"{res.tp * res.dp * res.pp} GPUs' memory (no room for KV)")
    return res


def kv_tokens(cluster: Cluster, cfg: Config, res: Settings, prefill: bool = False) -> float:
    """KV capacity of one instance (a prefill-pool one where ``prefill``), tokens (target + draft KV per
    token), in float64 whatever the caller's mode. Computed once per process for each device, model, draft,
    node size, resolved lever and formats (every value it reads: validation prices many rows of one setup)."""
    device, target = get_device(cfg.device), get_model(cluster.model)
    key = (repr(device), target, get_draft(cfg.lever.draft, target), cluster.gpus_per_node, res, prefill,
           get_format(res.weight_format).bytes_per_value, get_format(res.kv_format).bytes_per_value)
    def build() -> float:
        with jax.enable_x64(True):
            return _kv_tokens(cluster, cfg, res, prefill)
    return _memo(_KV_TOKENS, key, build)


MEMO_KEPT = 4096
"""Most values :func:`_memo` keeps per store and process (all dropped past it)."""
_KV_TOKENS: dict = {}


def _memo(store: dict, key, build):
    """``store[key]``, built by ``build()`` and kept on a miss; the store is emptied once it holds
    :data:`MEMO_KEPT` values."""
    if (value := store.get(key)) is None:
        value = build()
        if len(store) >= MEMO_KEPT:
            store.clear()
        store[key] = value
    return value


def _kv_tokens(cluster: Cluster, cfg: Config, res: Settings, prefill: bool) -> float:
    dev = device_arrays(get_device(cfg.device), jnp.float64)
    target = get_model(cluster.model)
    draft = get_draft(cfg.lever.draft, target)
    gpus = res.prefill_tp * res.prefill_dp if prefill else res.tp * res.dp * res.pp
    return float(layout_kv_capacity_tokens(pool_layout(cluster, cfg, res, prefill), dev, jnp.float64(gpus),
                                           model_arrays(target, jnp.float64), model_arrays(draft, jnp.float64),
                                           get_format(res.weight_format).bytes_per_value,
                                           get_format(res.kv_format).bytes_per_value))


def pool_layout(cluster: Cluster, cfg: Config, res: Settings, prefill: bool = False) -> Layout:
    """The :class:`~sweepkit.costmodel.layout.Layout` of a decode-pool (or colocated) or prefill-pool replica."""
    pre = "prefill_" if prefill else ""
    ep = getattr(res, f"{pre}ep")
    return make_layout(get_device(cfg.device), get_model(cluster.model), getattr(res, f"{pre}tp"),
                       dp=getattr(res, f"{pre}dp"), ep=ep, imbalance=res.expert_imbalance,
                       compute_format=res.compute_format, gpus_per_node=cluster.gpus_per_node,
                       interconnect=res.scale_out, redundant_experts=res.redundant_experts if ep > 1 else 0,
                       two_batch_overlap=res.two_batch_overlap, token_budget=res.token_budget,
                       exchange=res.moe_exchange, dtype=jnp.float64)


def acceptance(cfg: Config, workload: str | None = None) -> tuple[np.ndarray, str]:
    """The lever's conditional acceptances alpha_1..alpha_gamma and the model's name.

    ``alpha = "workload"`` takes the workload's model for the lever's draft kind
    (:func:`sweepkit.acceptance.workload_alphas`); a number is i.i.d. alpha at every position. A draw of
    the grid's bands adds its offset to every alpha_i, clipped to [0, 1].
    """
    lv = cfg.lever
    if lv.gamma <= 0:
        return np.zeros(0), "none"
    if lv.alpha_from_workload:
        if workload is None:
            raise InputError(f"lever {lv.name!r}: alpha = 'workload' needs a workload")
        alphas, model = workload_alphas(workload, lv.draft, lv.gamma)
        alphas, name = np.asarray(alphas, np.float64), model.name
    else:
        alphas, name = np.full(lv.gamma, float(lv.alpha)), "iid"
    if cfg.draw is not None and cfg.draw.alpha_offset != 0.0:
        alphas = np.clip(alphas + cfg.draw.alpha_offset, 0.0, 1.0)
    return alphas, name


def _replica(cluster: Cluster, cfg: Config, res: Settings, tp: int, pp: int, microbatches: int,
             prefill: bool = False) -> Instance:
    """The :class:`Instance` pytree of one replica of ``tp`` x ``dp`` x ``pp`` GPUs (float64 under x64).

    Built once per process for each device, model, draft, cluster, draw, resolved lever, replica shape and
    float width (every value it reads), so the workloads and program sizes of one configuration share it: its
    leaves are immutable arrays."""
    target = get_model(cluster.model)
    key = (repr(get_device(cfg.device)), target, get_draft(cfg.lever.draft, target), cfg.lever.gamma, cfg.draw,
           cluster, res, tp, pp, microbatches, prefill, jax.dtypes.canonicalize_dtype(jnp.float64))
    return _memo(_REPLICAS, key, lambda: _build_replica(cluster, cfg, res, tp, pp, microbatches, prefill))


_REPLICAS: dict = {}


def _build_replica(cluster: Cluster, cfg: Config, res: Settings, tp: int, pp: int, microbatches: int,
                   prefill: bool) -> Instance:
    target = get_model(cluster.model)
    inst = instance(get_device(cfg.device), target, get_draft(cfg.lever.draft, target), tp, res.weight_format,
                    res.kv_format, res.compute_format, cfg.lever.gamma, jnp.float64, pp=pp,
                    microbatches=microbatches, layout=pool_layout(cluster, cfg, res, prefill))
    f = lambda x: jnp.asarray(x, jnp.float64)  # noqa: E731
    darr = dataclasses.replace(inst.device, pass_overhead_s=f(cluster.step_overhead_s))
    if cfg.draw is not None and cfg.draw.factors:     # an uncertainty band's draw: factors on the device
        darr = dataclasses.replace(darr, **{k: getattr(darr, k) * f(v) for k, v in cfg.draw.factors})
    return dataclasses.replace(inst, device=darr,
                               efficiency=instance_efficiency(cluster.profile, cfg.device, res.compute_format,
                                                              target.attention_weight_format))


def roles(res: Settings, instances_max: int) -> np.ndarray:
    """[I] role of each instance slot: the prefill pool first, then the decode pool (COLOCATED when not
    disaggregated; slots past the configuration's instances never receive a request)."""
    n_pre = res.prefill_instances
    role = np.full(max(instances_max, res.total_instances), COLOCATED, np.int32)
    if res.mode == "disagg":
        role[:n_pre], role[n_pre:] = PREFILL_POOL, DECODE_POOL
    return role


def policy(cluster: Cluster, cfg: Config, res: Settings | None = None, workload: str | None = None,
           gamma_max: int | None = None, instances_max: int | None = None) -> Policy:
    """The :class:`Policy` pytree of one configuration (float64 scalars; acceptance padded to ``gamma_max``,
    roles to ``instances_max``)."""
    res = res or resolve(cluster, cfg.lever)
    alphas, _ = acceptance(cfg, workload)
    survival = np.zeros(max(cfg.lever.gamma if gamma_max is None else gamma_max, 1))
    survival[:alphas.size] = np.cumprod(alphas)
    f = lambda x: jnp.asarray(x, jnp.float64)  # noqa: E731
    inst = _replica(cluster, cfg, res, res.tp, res.pp, res.microbatches)
    paged = res.kv == "paged"
    block = BLOCK_TOKENS if paged else 1
    units = kv_tokens(cluster, cfg, res) // block
    pre_units = kv_tokens(cluster, cfg, res, prefill=True) // block if res.prefill_instances else units
    derived = dict(
        inst=inst, instances=jnp.asarray(res.total_instances, jnp.int32), batch_cap=f(cluster.batch_cap),
        block_tokens=f(block), watermark_units=f(int(WATERMARK * units) if paged else 0), kv_units=f(units),
        kv_token_bytes=kv_bytes_per_token(inst.target, inst.draft, inst.kv_bytes),
        accept_survival=f(survival), spec_seed=jnp.asarray(SPEC_SEED, jnp.uint64),
        host_bytes_per_s=f(HOST_LINK["bytes_per_s"]), host_block_s=f(HOST_LINK["block_s"]),
        host_j_per_bit=f(HOST_LINK["j_per_bit"]),
        role=jnp.asarray(roles(res, instances_max or res.total_instances)),
        prefill_inst=_replica(cluster, cfg, res, res.prefill_tp, 1, 1, True),
        prefill_kv_units=f(pre_units),
        prefill_watermark_units=f(int(WATERMARK * pre_units) if paged else 0),
        link_bytes_per_s=f(KV_LINK["bytes_per_s"]), link_latency_s=f(KV_LINK["latency_s"]),
        link_j_per_bit=f(KV_LINK["j_per_bit"]),
        state_units=f(math.ceil(state_tokens(cluster, cfg, res) / block)))
    return Policy(**{**derived, **policy_fields(res)})
