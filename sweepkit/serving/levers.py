"""Serving levers as data: a lever is a named change from the baseline cluster.

``data/levers.toml`` holds the reference sweep's colocated levers under their usual names. Every field is
optional; an absent field keeps the cluster's value (``cluster.toml``). Fields:

* layout: ``instances``, ``tp``, ``pp``, ``microbatches``, ``ep`` (expert-parallel ranks), ``dp`` (attention
  data-parallel ranks; instances x tp x dp x pp = the cluster's GPUs), ``expert_imbalance`` (max / mean expert
  load over the EP ranks, >= 1), ``scale_out`` (the network between scale-up domains:
  :data:`sweepkit.costmodel.layout.INTERCONNECTS`), ``redundant_experts`` (EPLB replicas: ep need only divide
  the routed + redundant slots), ``two_batch_overlap`` = true | false (all-to-alls overlapped with the other
  micro-batch's compute), ``moe_exchange`` = all-to-all | gather (a DEP layout's MoE exchange: dispatch and
  combine all-to-alls, or TensorRT-LLM's all-gather and reduce-scatter); see :mod:`sweepkit.costmodel.layout`
  for the rules;
* batching: ``batching`` = prefill-priority | decode-priority | chunked, ``token_budget`` (tokens per step);
* KV memory: ``kv`` = reserved | paged, ``preemption`` = recompute | swap, ``prefix_caching`` = true | false;
* formats: ``weight_format``, ``kv_format``, ``compute_format`` (bf16, or the weight format: W8A8, W4A4);
* speculation: ``draft`` (none, mtp or a catalogue model), ``gamma``, ``alpha`` (assumed, not measured);
* routing: ``router`` = least-loaded | session | least-outstanding;
* disaggregation: ``mode`` = colocated | disagg, ``prefill_instances`` and ``prefill_tp`` (the prefill
  pool, with ``prefill_ep`` and ``prefill_dp``; ``instances``, ``tp``, ``ep``, ``dp`` are then the decode
  pool), ``handoff`` = pull | push (pull, the default:
  the decode instance reserves room before the KV transfer starts and the prefill instance holds the KV
  until it lands; push: the transfer starts at once and the KV waits on the decode side for room);
* ``devices``: the devices a grid runs the lever on (e.g. FP4 on B200 only).

The fields resolved over the cluster (every one but the speculative and descriptive ones), their allowed
values, defaults and the engine policy they set are one table: :data:`sweepkit.serving.lever_fields.FIELDS`.

A combination the engine cannot model is refused with one line naming the file, the lever and why
(:func:`check_lever`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sweepkit.catalogue import draft_names, get_device
from sweepkit.errors import InputError
from sweepkit.serving._toml import check_keys, number, read_toml, table
from sweepkit.serving.lever_fields import CHOICES as CHOICES  # the allowed values, by field (sweepkit.serve)
from sweepkit.serving.lever_fields import FIELDS, Settings, parse_field

_FIELDS = {"description", "source", "family", "devices", "draft", "gamma", "alpha", *(f.key for f in FIELDS)}


@dataclasses.dataclass(frozen=True)
class Lever:
    """A named change from the baseline; ``None`` fields keep the cluster's value.

    Attributes:
      name, description, source, family: key, one line, where it comes from, lever family.
      draft, gamma, alpha: speculative decoding (``none`` / 0 / 0.0 without a draft).
      alpha_from_workload: ``alpha = "workload"``: each workload's per-position acceptance model for the
        draft's kind (:func:`sweepkit.acceptance.workload_alphas`) instead of one i.i.d. alpha.
      batching, token_budget, kv, preemption, prefix_caching, router: scheduler levers.
      instances, tp, pp, microbatches: parallel layout (the decode pool's when disaggregated).
      ep, dp: expert-parallel and attention data-parallel ranks (the decode pool's when disaggregated).
      expert_imbalance: max / mean expert load over EP ranks.  scale_out: the network between domains.
      redundant_experts: EPLB expert replicas (slots = routed + redundant; ep need only divide the slots).
      two_batch_overlap: two micro-batches per pass, each one's all-to-alls overlapping the other's compute
        (:func:`sweepkit.costmodel.moe_comm.overlapped`).
      moe_exchange: how a DEP layout moves tokens to their experts, ``all-to-all`` or ``gather``
        (:data:`sweepkit.costmodel.layout.EXCHANGES`).
      mode, prefill_instances, prefill_tp, prefill_ep, prefill_dp: colocated, or a disaggregated prefill pool
        of that many instances.
      handoff: pull or push KV hand-off (disaggregated only).  weight_format, kv_format, compute_format: formats.
      devices: the devices a grid runs the lever on (empty: every device of the grid).
    """

    name: str
    description: str = ""
    source: str = ""
    family: str = ""
    draft: str = "none"
    gamma: int = 0
    alpha: float = 0.0
    alpha_from_workload: bool = False
    batching: str | None = None
    token_budget: int | None = None
    kv: str | None = None
    preemption: str | None = None
    prefix_caching: bool | None = None
    router: str | None = None
    instances: int | None = None
    tp: int | None = None
    pp: int | None = None
    microbatches: int | None = None
    mode: str | None = None
    prefill_instances: int | None = None
    prefill_tp: int | None = None
    handoff: str | None = None
    weight_format: str | None = None
    kv_format: str | None = None
    compute_format: str | None = None
    devices: tuple = ()
    ep: int | None = None
    dp: int | None = None
    prefill_ep: int | None = None
    prefill_dp: int | None = None
    expert_imbalance: float | None = None
    scale_out: str | None = None
    redundant_experts: int | None = None
    two_batch_overlap: bool | None = None
    moe_exchange: str | None = None

    @property
    def speculative(self) -> bool:
        return self.draft != "none"


def _lever(name: str, raw: dict, where: str) -> Lever:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a table of lever fields")
    check_keys(raw, _FIELDS, set(), where)
    draft = raw.get("draft", "none")
    if draft not in draft_names():
        raise InputError(f"{where}: draft = {draft!r} is not allowed; expected one of {', '.join(draft_names())}")
    spec = draft != "none"
    gamma = number(raw, "gamma", where, lo=1 if spec else 0, hi=16 if spec else 0, integer=True,
                   default=None if spec else 0)
    if isinstance(raw.get("alpha"), str) and not (spec and raw["alpha"] == "workload"):
        raise InputError(f"{where}: alpha = {raw['alpha']!r} is not allowed; expected a number in [0, 1] or "
                         f"'workload' (the workload's acceptance model; needs a draft)")
    from_workload = spec and raw.get("alpha") == "workload"
    alpha = 0.0 if from_workload else number(raw, "alpha", where, lo=0.0, hi=1.0, default=None if spec else 0.0)
    devices = raw.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices):
        raise InputError(f"{where}: devices = {devices!r} is not allowed; expected a list of catalogue devices")
    return Lever(name=name, description=str(raw.get("description", name)), source=str(raw.get("source", "")),
                 family=str(raw.get("family", "")), devices=tuple(devices), draft=draft, gamma=int(gamma), alpha=float(alpha),
                 alpha_from_workload=from_workload, **{f.key: parse_field(f, raw, where) for f in FIELDS})


def parse_lever(raw: dict, where: str, name: str = "custom") -> Lever:
    """One lever from a dict of lever fields, validated exactly as a ``[levers.<name>]`` table of the file.

    Args:
      raw: lever fields (the TOML table's keys; see the module docstring).  where: the place named in errors.
      name: the lever's name.

    Returns:
      the :class:`Lever` (combinations the engine cannot model are refused later, by :func:`check_lever`).

    Example:
      >>> parse_lever({"draft": "mtp", "gamma": 3, "alpha": 0.8}, "request").alpha
      0.8
    """
    return _lever(name, raw, where)


def check_lever(lever: Lever, resolved: Settings, device: str, where: str) -> None:
    """Refuse what the engine cannot model, in one line naming the file, the lever and why.

    Args:
      resolved: the lever applied to the cluster (:func:`sweepkit.serving.config.resolve`).
    """
    why = None
    if resolved.prefix_caching and resolved.kv != "paged":
        why = "prefix caching needs kv = 'paged' (cached segments are whole blocks)"
    elif resolved.prefix_caching and resolved.preemption == "swap":
        why = "prefix caching with preemption = 'swap' is not modelled (swapped rows would pin cached segments)"
    elif resolved.pp > 1 and lever.speculative:
        why = "speculative decoding with pipeline parallelism is not modelled"
    elif resolved.mode == "disagg" and resolved.pp > 1:
        why = "disaggregated pools with pipeline parallelism are not modelled"
    elif resolved.mode == "disagg" and resolved.preemption == "swap":
        why = "disaggregated pools with preemption = 'swap' are not modelled"
    elif resolved.mode != "disagg" and (lever.prefill_instances or lever.prefill_tp or lever.handoff
                                           or lever.prefill_ep or lever.prefill_dp):
        why = "prefill_instances, prefill_tp, prefill_ep, prefill_dp and handoff need mode = 'disagg'"
    elif resolved.compute_format not in ("bf16", resolved.weight_format):
        why = (f"compute_format = {resolved.compute_format!r} must be bf16 (weight-only) or the weight format "
               f"{resolved.weight_format!r}")
    elif resolved.compute_format != "bf16" and resolved.compute_format not in get_device(device).compute_speedup:
        why = f"device {device} has no {resolved.compute_format} compute units"
    if why:
        raise InputError(f"{where}: lever {lever.name!r} on {device}: {why}")


def load_levers(path: str | Path | None = None) -> dict[str, Lever]:
    """All levers of a TOML file (default: the packaged ones), validated (one-line InputError)."""
    raw, where = read_toml(path, "levers.toml")
    return {k: _lever(k, v, f"{where} [levers.{k}]") for k, v in table(raw, "levers", where).items()}
