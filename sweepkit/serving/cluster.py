"""The serving cluster as data: model, GPUs, instances, tensor parallelism, scheduler limits, devices.

``data/cluster.toml`` is the seed's cluster (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim): Llama-3-70B on 8 GPUs as 2 colocated
instances of TP4, prefill-priority batching, whole-sequence KV reservation, batch cap 256, prefill token budget
8,192, 0.5 ms step overhead, BF16; devices H100, H200, B200 at their catalogue prices.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sweepkit.catalogue import get_device, get_format, get_model
from sweepkit.errors import InputError
from sweepkit.serving._toml import check_keys, number, read_toml, string

_FIELDS = {"description", "source", "model", "gpus", "instances", "tp", "batch_cap", "prefill_token_budget",
           "step_overhead_s", "weight_format", "kv_format", "compute_format", "devices"}


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A colocated serving cluster: ``instances`` copies of the model, each on ``tp`` GPUs.

    Attributes:
      model: catalogue target model.  gpus: total GPUs (= instances x tp).
      batch_cap: running requests per instance.  prefill_token_budget: prompt tokens per prefill step (a longer
      prompt runs alone).  step_overhead_s: fixed time of every target pass.
      weight_format, kv_format, compute_format: catalogue formats.  devices: catalogue device names.
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
    gpus = number(raw, "gpus", where, lo=1, hi=65536, integer=True, default=instances * tp)
    if gpus != instances * tp:
        raise InputError(f"{where}: gpus = {gpus} is not allowed; expected instances x tp = {instances * tp}")
    _check_fit(raw, model, tp, devices, where)
    return Cluster(
        description=str(raw.get("description", "")), source=str(raw.get("source", "")), model=model,
        gpus=gpus, instances=instances, tp=tp,
        batch_cap=number(raw, "batch_cap", where, lo=1, hi=4096, integer=True, default=256),
        prefill_token_budget=number(raw, "prefill_token_budget", where, lo=1, hi=1 << 20, integer=True,
                                    default=8192),
        step_overhead_s=number(raw, "step_overhead_s", where, lo=0, hi=1.0, default=0.0005),
        weight_format=raw.get("weight_format", "bf16"), kv_format=raw.get("kv_format", "bf16"),
        compute_format=raw.get("compute_format", "bf16"), devices=tuple(devices))


def _check_fit(raw: dict, model: str, tp: int, devices: list[str], where: str) -> None:
    """TP must divide the model's heads, and each GPU's share of the weights must fit in every device's HBM."""
    target = get_model(model)
    if target.n_heads % tp:
        divisors = [d for d in range(1, target.n_heads + 1) if target.n_heads % d == 0 and d <= 64]
        raise InputError(f"{where}: tp = {tp} is not allowed; expected a divisor of {model}'s {target.n_heads} "
                         f"attention heads ({', '.join(map(str, divisors))})")
    fmt = raw.get("weight_format", "bf16")
    per_gpu_bytes = target.resident_weight_bytes(get_format(fmt, "weight_format").bytes_per_value) / tp
    from sweepkit.costmodel.memory import MEM_UTIL

    for name in devices:
        usable_bytes = get_device(name, "devices").hbm_capacity_bytes * MEM_UTIL
        if per_gpu_bytes >= usable_bytes:
            raise InputError(f"{where}: tp = {tp} is not allowed; {model}'s {fmt} weights take "
                             f"{per_gpu_bytes / 1e9:,.1f} GB per GPU, {name} may use {usable_bytes / 1e9:,.0f} GB "
                             f"({MEM_UTIL:.0%} of its HBM): expected a larger tp or a smaller weight_format")


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
