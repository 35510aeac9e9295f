"""The lever fields as one table: each field's TOML key, allowed values, default, and the engine policy it sets.

A lever (:class:`~sweepkit.serving.levers.Lever`) leaves a field out to keep the cluster's value; resolving it
over the cluster (:func:`resolve`) gives every field a value (:class:`Settings`), and the fields with a
``policy`` set that field of the engine's :class:`~sweepkit.serving.engine.Policy` through their ``encode``
(:func:`policy_fields`). The fields without one reach the engine through the replica they price (parallel
layout, formats: :func:`sweepkit.costmodel.steps.instance`) or its KV capacity
(:func:`sweepkit.serving.config.kv_tokens`). docs/serving.md, "Adding a lever field", lists the places a new
field touches.

Example:
  >>> from sweepkit.serving.cluster import load_cluster
  >>> from sweepkit.serving.levers import Lever
  >>> resolve(load_cluster(), Lever("chunked", batching="chunked")).batching
  'chunked'
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax.numpy as jnp

from sweepkit.catalogue import get_format
from sweepkit.costmodel.layout import EXCHANGES, INTERCONNECTS
from sweepkit.errors import InputError
from sweepkit.serving._toml import number, string
from sweepkit.serving.engine import CHUNKED, DECODE_PRIORITY, LEAST_LOADED, LEAST_OUTSTANDING, PREFILL_PRIORITY, SESSION

_INT = (1, 1 << 20)
_CODES = {"prefill-priority": PREFILL_PRIORITY, "decode-priority": DECODE_PRIORITY, "chunked": CHUNKED,
          "least-loaded": LEAST_LOADED, "session": SESSION, "least-outstanding": LEAST_OUTSTANDING}


@dataclasses.dataclass(frozen=True)
class LeverField:
    """One lever field.

    Attributes:
      key: the TOML key, the :class:`~sweepkit.serving.levers.Lever` attribute and the :class:`Settings` one.
      kind: ``choice`` (one of ``choices``), ``int`` or ``float`` (in [lo, hi]), ``bool``, or ``format`` (a
        catalogue number format).
      default: fn(cluster, settings resolved so far) -> the value where the lever leaves the field out.
      choices: the allowed values of a ``choice``.  lo, hi: the bounds of a number.
      disagg_only: with ``mode`` colocated the field takes ``default``'s value whatever the lever says
        (:func:`~sweepkit.serving.levers.check_lever` refuses a lever that sets it).
      policy: the :class:`~sweepkit.serving.engine.Policy` field it sets ("": none directly).
      encode: fn(value, settings) -> that Policy field's array.
    """

    key: str
    kind: str
    default: Callable[[Any, dict], Any]
    choices: tuple[str, ...] = ()
    lo: float = _INT[0]
    hi: float = _INT[1]
    disagg_only: bool = False
    policy: str = ""
    encode: Callable[[Any, Any], Any] | None = None


def _f64(x):
    return jnp.asarray(x, jnp.float64)


def _code(v, s):
    return jnp.asarray(_CODES[v], jnp.int32)


F = LeverField
FIELDS: tuple[LeverField, ...] = (
    # parallel layout (the decode pool's when disaggregated): priced through the replica
    F("instances", "int", lambda c, r: c.instances),
    F("tp", "int", lambda c, r: c.tp),
    F("pp", "int", lambda c, r: c.pp),
    F("microbatches", "int", lambda c, r: r["pp"]),
    F("mode", "choice", lambda c, r: "colocated", choices=("colocated", "disagg")),
    F("dp", "int", lambda c, r: c.dp),
    F("ep", "int", lambda c, r: c.ep),
    F("prefill_dp", "int", lambda c, r: 1),
    F("prefill_ep", "int", lambda c, r: 1),
    F("expert_imbalance", "float", lambda c, r: c.expert_imbalance, lo=1.0, hi=16.0),
    F("redundant_experts", "int", lambda c, r: c.redundant_experts, lo=0, hi=65536),
    F("two_batch_overlap", "bool", lambda c, r: False),
    F("moe_exchange", "choice", lambda c, r: "all-to-all", choices=EXCHANGES),
    F("scale_out", "choice", lambda c, r: c.scale_out or None, choices=tuple(INTERCONNECTS)),
    F("prefill_instances", "int", lambda c, r: 1 if r["mode"] == "disagg" else 0, disagg_only=True),
    F("prefill_tp", "int", lambda c, r: r["tp"]),
    # scheduler: straight into the engine's Policy
    F("handoff", "choice", lambda c, r: "pull" if r["mode"] == "disagg" else "none", choices=("pull", "push"),
      disagg_only=True, policy="pull", encode=lambda v, s: _f64(v == "pull")),
    F("batching", "choice", lambda c, r: "prefill-priority", choices=("prefill-priority", "decode-priority", "chunked"),
      policy="batching", encode=_code),
    F("token_budget", "int", lambda c, r: c.prefill_token_budget, policy="token_budget",
      encode=lambda v, s: _f64(v)),
    F("kv", "choice", lambda c, r: "reserved", choices=("reserved", "paged"), policy="paged",
      encode=lambda v, s: _f64(v == "paged")),
    F("preemption", "choice", lambda c, r: "recompute", choices=("recompute", "swap"), policy="swap",
      encode=lambda v, s: _f64(s.kv == "paged" and v == "swap")),
    F("prefix_caching", "bool", lambda c, r: False, policy="prefix", encode=lambda v, s: _f64(v)),
    F("router", "choice", lambda c, r: "least-loaded", choices=("least-loaded", "session", "least-outstanding"), policy="router",
      encode=_code),
    # number formats: priced through the replica and its KV capacity
    F("weight_format", "format", lambda c, r: c.weight_format),
    F("kv_format", "format", lambda c, r: c.kv_format),
    F("compute_format", "format", lambda c, r: c.compute_format),
)
"""Every lever field resolved over the cluster, in resolution order (a default may read fields above it)."""

_TYPES = {"choice": str, "int": int, "float": float, "bool": bool, "format": str}
Settings = dataclasses.make_dataclass(
    "Settings", [(f.key, _TYPES[f.kind]) for f in FIELDS] + [("total_instances", int)], frozen=True)
Settings.__module__ = __name__
Settings.__doc__ = """A lever resolved over the cluster: every field of :data:`FIELDS` with its value (the
lever's, else the default), and ``total_instances`` (the decode pool's, or colocated, plus the prefill pool's)."""


def _check_choice(f: LeverField, value, where: str) -> None:
    """One-line InputError unless ``value`` is one of choice field ``f``'s values."""
    if value not in f.choices:
        raise InputError(f"{where}: {f.key} = {value!r} is not allowed; expected one of {', '.join(f.choices)}")


def parse_field(f: LeverField, raw: dict, where: str):
    """The lever's value of field ``f`` from a TOML table (None where absent); one-line InputError naming
    ``where``, the key, the value and what is allowed."""
    if f.key not in raw:
        return None
    value = raw[f.key]
    if f.kind == "choice":
        _check_choice(f, value, where)
        return value
    if f.kind == "bool":
        if not isinstance(value, bool):
            raise InputError(f"{where}: {f.key} = {value!r} is not allowed; expected true or false")
        return value
    if f.kind == "format":
        try:
            return get_format(string(raw, f.key, where), f.key).name
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    out = number(raw, f.key, where, lo=f.lo, hi=f.hi, integer=f.kind == "int")
    return int(out) if f.kind == "int" else float(out)


def resolve(cluster, lever) -> Settings:
    """The lever's fields over the cluster's defaults (every scheduler, layout and format setting).

    Args:
      cluster: the :class:`~sweepkit.serving.cluster.Cluster`.  lever: the
        :class:`~sweepkit.serving.levers.Lever` (None fields keep the defaults).

    Returns:
      the :class:`Settings`.
    """
    got: dict[str, Any] = {}
    for f in FIELDS:
        value = getattr(lever, f.key)
        keep = value is None or (f.disagg_only and got["mode"] != "disagg")
        got[f.key] = f.default(cluster, got) if keep else value
        if not keep and f.kind == "choice":        # a Lever built in Python skips parse_field
            _check_choice(f, value, f"lever {lever.name!r}")
    return Settings(**got, total_instances=got["instances"] + got["prefill_instances"])


def policy_fields(settings: Settings) -> dict[str, Any]:
    """The :class:`~sweepkit.serving.engine.Policy` fields the lever fields set directly, by name."""
    return {f.policy: f.encode(getattr(settings, f.key), settings) for f in FIELDS if f.policy}


CHOICES = {f.key: f.choices for f in FIELDS if f.kind == "choice"}
"""The allowed values of every choice field."""
