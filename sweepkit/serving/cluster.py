"""The serving cluster as data: model, GPUs, instances, tensor parallelism, scheduler limits, devices.

``data/cluster.toml`` is the seed's cluster (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim): Llama-3-70B on 8 GPUs as 2 colocated
instances of TP4, prefill-priority batching, whole-sequence KV reservation, batch cap 256, prefill token budget
8,192, 0.5 ms step overhead, BF16; devices H100, H200, B200 at their catalogue prices.

An instance may run ``pp`` pipeline stages (each holding 1 / pp of the layers; a lever's ``pp`` overrides it).
A mixture-of-experts cluster may give each instance expert-parallel (``ep``) and attention data-parallel
(``dp``) ranks, ``nodes`` (the scale-up domains the GPUs span: gpus / nodes GPUs each, at most the device's
domain), ``scale_out`` (the network between them) and ``expert_imbalance`` (:mod:`sweepkit.costmodel.layout`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sweepkit.catalogue import get_device, get_format, get_model
from sweepkit.catalogue.efficiency import Profile
from sweepkit.costmodel.layout import INTERCONNECTS, check_layout, per_gpu_weight_bytes, scale_up_domain
from sweepkit.errors import InputError
from sweepkit.serving._toml import check_keys, number, read_toml, string

MAX_BATCH_CAP = 4096
"""Most running requests per instance a cluster file may set (``batch_cap``)."""
_FIELDS = {"description", "source", "model", "gpus", "instances", "tp", "batch_cap", "prefill_token_budget",
           "step_overhead_s", "weight_format", "kv_format", "compute_format", "devices", "ep", "dp", "nodes",
           "scale_out", "expert_imbalance", "redundant_experts", "pp"}


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A colocated serving cluster: ``instances`` copies of the model, each on ``tp`` x ``dp`` x ``pp`` GPUs.

    Attributes:
      model: catalogue target model.  gpus: total GPUs (= instances x tp x dp x pp).
      pp: pipeline stages per instance (the default of a lever's ``pp``).
      ep, dp: expert-parallel and attention data-parallel ranks per instance (1: tensor parallelism only).
      nodes: scale-up domains the GPUs span (0: as many as the device's domain size needs).
      scale_out: the network between domains ("" : the device's).  expert_imbalance: max / mean expert load
        over EP ranks (None: :data:`sweepkit.costmodel.layout.IMBALANCE`).  redundant_experts: EPLB expert
        replicas beyond the routed experts (ep then need only divide the slots).
      batch_cap: running requests per instance.  prefill_token_budget: prompt tokens per prefill step (a longer
      prompt runs alone).  step_overhead_s: fixed time of every target pass.
      weight_format, kv_format, compute_format: catalogue formats.  devices: catalogue device names.
      profile: the measured efficiency profile pricing target passes (None: the reference constants;
        :mod:`sweepkit.serving.profile`; set by a grid's ``profile``, not a ``[cluster]`` key).
    """

    description: str
    source: str
    model: str
    gpus: int
    instances: int
    tp: int
    batch_cap: int
    prefill_token_budget: int
    step_overhead_s: float
    weight_format: str
    kv_format: str
    compute_format: str
    devices: tuple[str, ...]
    ep: int = 1
    dp: int = 1
    nodes: int = 0
    scale_out: str = ""
    expert_imbalance: float | None = None
    redundant_experts: int = 0
    pp: int = 1
    profile: Profile | None = dataclasses.field(default=None, hash=False)

    @property
    def gpus_per_node(self) -> int | None:
        """GPUs per scale-up domain where ``nodes`` is given (None: the device's domain)."""
        return self.gpus // self.nodes if self.nodes else None


def parse_cluster(raw: dict, where: str) -> Cluster:
    """Validate one ``[cluster]`` table."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: missing [cluster] table")
    check_keys(raw, _FIELDS, {"model", "instances", "tp", "devices"}, where)
    model = string(raw, "model", where)
    try:
        get_model(model)
        for key in ("weight_format", "kv_format", "compute_format"):
            get_format(raw.get(key, "bf16"), key)
        devices = raw["devices"]
        if isinstance(devices, str):
            devices = [devices]
        if not isinstance(devices, list) or not devices:
            raise InputError(f"devices = {devices!r} is not allowed; expected a list of catalogue devices")
        for d in devices:
            get_device(d, "devices")
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    instances = number(raw, "instances", where, lo=1, hi=1024, integer=True)
    tp = number(raw, "tp", where, lo=1, hi=64, integer=True)
    ep = number(raw, "ep", where, lo=1, hi=65536, integer=True, default=1)
    dp = number(raw, "dp", where, lo=1, hi=65536, integer=True, default=1)
    pp = number(raw, "pp", where, lo=1, hi=64, integer=True, default=1)
    gpus = number(raw, "gpus", where, lo=1, hi=65536, integer=True, default=instances * tp * dp * pp)
    if gpus != instances * tp * dp * pp:
        raise InputError(f"{where}: gpus = {gpus} is not allowed; expected instances x tp x dp x pp = "
                         f"{instances * tp * dp * pp}")
    nodes = number(raw, "nodes", where, lo=1, hi=65536, integer=True, default=0) if "nodes" in raw else 0
    scale_out = raw.get("scale_out", "")
    if scale_out and scale_out not in INTERCONNECTS:
        raise InputError(f"{where}: scale_out = {scale_out!r} is not allowed; expected one of "
                         f"{', '.join(INTERCONNECTS)}")
    imbalance = number(raw, "expert_imbalance", where, lo=1.0, hi=16.0) if "expert_imbalance" in raw else None
    redundant = number(raw, "redundant_experts", where, lo=0, hi=65536, integer=True, default=0)
    _check_nodes(gpus, nodes, devices, where)
    for name in devices:
        check_layout(get_model(model), get_device(name), tp, dp, ep, where, gpus // nodes if nodes else None,
                     redundant)
    _check_fit(raw, model, tp, devices, where, dp, redundant, pp)
    return Cluster(
        description=str(raw.get("description", "")), source=str(raw.get("source", "")), model=model,
        gpus=gpus, instances=instances, tp=tp,
        batch_cap=number(raw, "batch_cap", where, lo=1, hi=MAX_BATCH_CAP, integer=True, default=256),
        prefill_token_budget=number(raw, "prefill_token_budget", where, lo=1, hi=1 << 20, integer=True,
                                    default=8192),
        step_overhead_s=number(raw, "step_overhead_s", where, lo=0, hi=1.0, default=0.0005),
        weight_format=raw.get("weight_format", "bf16"), kv_format=raw.get("kv_format", "bf16"),
        compute_format=raw.get("compute_format", "bf16"), devices=tuple(devices), ep=ep, dp=dp, nodes=nodes,
        scale_out=scale_out, expert_imbalance=imbalance, redundant_experts=redundant, pp=pp)


def _check_nodes(gpus: int, nodes: int, devices: list[str], where: str) -> None:
    """``nodes`` must split the GPUs evenly, at most a scale-up domain of every device per node."""
    if not nodes:
        return
    if gpus % nodes:
        raise InputError(f"{where}: nodes = {nodes} is not allowed; expected a divisor of gpus = {gpus}")
    for name in devices:
        domain = scale_up_domain(get_device(name, "devices"))
        if gpus // nodes > domain:
            raise InputError(f"{where}: nodes = {nodes} is not allowed; {gpus // nodes} GPUs per node exceed "
                             f"{name}'s scale-up domain of {domain}: expected nodes >= {-(-gpus // domain)}")


def _check_fit(raw: dict, model: str, tp: int, devices: list[str], where: str, dp: int = 1,
               redundant_experts: int = 0, pp: int = 1) -> None:
    """TP must divide the model's heads, and each GPU's share of the weights (1 / pp of the layers) must fit in
    every device's HBM."""
    target = get_model(model)
    if target.n_heads % tp:
        divisors = [d for d in range(1, target.n_heads + 1) if target.n_heads % d == 0 and d <= 64]
        raise InputError(f"{where}: tp = {tp} is not allowed; expected a divisor of {model}'s {target.n_heads} "
                         f"attention heads ({', '.join(map(str, divisors))})")
    fmt = raw.get("weight_format", "bf16")
    per_gpu_bytes = per_gpu_weight_bytes(target, tp, dp, pp, get_format(fmt, "weight_format").bytes_per_value,
                                         redundant_experts)
    from sweepkit.costmodel.memory import MEM_UTIL

    for name in devices:
        usable_bytes = get_device(name, "devices").hbm_capacity_bytes * MEM_UTIL
        if per_gpu_bytes >= usable_bytes:
            raise InputError(f"{where}: tp = {tp} is not allowed; {model}'s {fmt} weights take "
                             f"{per_gpu_bytes / 1e9:,.1f} GB per GPU, {name} may use {usable_bytes / 1e9:,.0f} GB "
                             f"({MEM_UTIL:.0%} of its HBM): expected a larger tp or pp or a smaller weight_format")


def load_cluster(path: str | Path | None = None) -> Cluster:
    """The cluster of a TOML file's ``[cluster]`` table (default: the packaged seed cluster)."""
    raw, where = read_toml(path, "cluster.toml")
    return parse_cluster(raw.get("cluster"), f"{where} [cluster]")


def make_cluster(where: str = "cluster", **fields) -> Cluster:
    """A cluster from keyword fields (the ``[cluster]`` table's), checked like a file's.

    Example:
      >>> c = make_cluster(model="llama-3.1-8b", instances=1, tp=1, devices=["H100"], batch_cap=64)
      >>> (c.gpus, c.batch_cap, c.prefill_token_budget)
      (1, 64, 8192)
    """
    return parse_cluster(dict(fields), where)
