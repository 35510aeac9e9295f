"""The configuration space of a plan, as data: axes of values and the layouts a GPU budget allows.

A configuration is one value per axis. Layout axes (``tp``, ``pp``, ``dp``, ``ep``, ``mode``, ``prefill_tp``)
expand into every layout that uses exactly the budget's GPUs: colocated ``instances x tp x dp x pp = gpus``,
disaggregated ``prefill_instances x prefill_tp + instances x tp x dp = gpus`` (every P:D split). Expert
parallelism (``ep``) and attention data parallelism (``dp``) apply to a mixture-of-experts model's
(decode) instances, in the two forms :func:`sweepkit.costmodel.layout.check_layout` accepts: dp = 1 with ep
dividing tp (experts inside the TP group), or dp > 1 with ep = tp x dp (DEP: all-to-all dispatch); a dense
model has dp = ep = 1, and a prefill pool runs tensor parallelism alone. The other axes multiply:

    configurations = sum over devices and layouts of  prod_{axis} |values(axis)|

less the combinations the serving engine cannot model (:func:`sweepkit.serving.levers.check_lever`'s rules:
prefix caching needs paged KV; speculation, disaggregation with pp > 1; a compute format the device lacks;
and :func:`~sweepkit.costmodel.layout.check_layout`'s: tensor parallelism within the device's scale-up
domain, ep dividing the routed experts).

A new axis is a new entry of :data:`AXES` and a column of the table; the screen reads columns by name.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from sweepkit.catalogue import get_device, get_format, get_model
from sweepkit.costmodel.layout import check_layout
from sweepkit.errors import InputError

AXES: dict[str, tuple] = {
    "tp": (1, 2, 4, 8, 16),
    "pp": (1, 2),
    "dp": (1, 2, 4, 8, 16, 32, 64),
    "ep": (1, 2, 4, 8, 16, 32, 64),
    "mode": ("colocated", "disagg"),
    "prefill_tp": (1, 2, 4, 8),
    "batching": ("prefill-priority", "decode-priority", "chunked"),
    "token_budget": (2048, 8192),
    "batch_cap": (64, 128, 256, 512),
    "kv": ("reserved", "paged", "paged+prefix"),
    "weight_format": ("bf16", "fp8"),
    "kv_format": ("bf16", "fp8"),
    "spec": ("none", "mtp:1", "mtp:2", "mtp:3", "mtp:4"),
}
"""Default values of every axis; ``spec`` is draft:gamma (``none`` without speculation); ``dp`` and ``ep``
take values other than 1 for mixture-of-experts models only."""
LAYOUT_AXES = ("tp", "pp", "dp", "ep", "mode", "prefill_tp")
LAYOUT_FIELDS = ("mode", "instances", "tp", "pp", "dp", "ep", "prefill_instances", "prefill_tp")
"""The columns a layout adds to the table."""
LEVER_AXES = ("batching", "token_budget", "batch_cap", "kv", "weight_format", "kv_format", "spec")
MAX_TABLE_ROWS = 50_000_000
"""Largest space enumerated (the table's columns stay under a few GB)."""


@dataclasses.dataclass(frozen=True)
class Space:
    """What a plan searches: model, devices, GPU budget and the values of every axis.

    Attributes:
      model: catalogue model (or HF config path).  devices: catalogue devices.  gpus: GPUs per deployment.
      axes: axis name -> tuple of values (:data:`AXES` by default; a fixed choice is a one-value tuple).
    """

    model: str
    devices: tuple[str, ...]
    gpus: int
    axes: tuple[tuple[str, tuple], ...]

    def values(self, axis: str) -> tuple:
        return dict(self.axes)[axis]


def make_space(model: str, devices, gpus: int, fixed: dict | None = None) -> Space:
    """A :class:`Space` with :data:`AXES`, each ``fixed`` axis narrowed to its given value(s).

    Raises:
      InputError: an unknown axis, or a value outside the axis's choices (one line).
    """
    get_model(model)
    for d in devices:
        get_device(d, "device")
    axes = dict(AXES)
    for k, v in (fixed or {}).items():
        if k not in axes:
            raise InputError(f"--fix {k}: unknown axis; expected one of {', '.join(axes)}")
        vals = v if isinstance(v, (list, tuple)) else (v,)
        cast = type(AXES[k][0])
        try:
            vals = tuple(cast(x) for x in vals)
        except ValueError:
            raise InputError(f"--fix {k}={v!r} is not allowed; expected values like {AXES[k][0]!r}") from None
        if k in ("weight_format", "kv_format"):
            for x in vals:
                get_format(x, k)
        elif k == "spec":
            for x in vals:
                if x != "none" and (":" not in x or not x.split(":")[1].isdigit()):
                    raise InputError(f"--fix spec={x!r} is not allowed; expected none or DRAFT:GAMMA (mtp:3)")
        elif cast is str and any(x not in AXES[k] for x in vals):
            raise InputError(f"--fix {k}={v!r} is not allowed; expected one of {', '.join(AXES[k])}")
        if k in ("dp", "ep") and 1 not in vals and not get_model(model).is_moe:
            raise InputError(f"--fix {k}={v!r} is not allowed; {model} is dense (no routed experts): expected 1")
        axes[k] = vals
    return Space(model, tuple(devices), int(gpus), tuple(axes.items()))


def layouts(space: Space) -> list[dict]:
    """Every layout of ``space.gpus`` GPUs: colocated (instances x tp x dp x pp) and disaggregated P:D splits.

    Example:
      >>> s = make_space("llama-3.1-8b", ["H100"], 2, {"tp": (1, 2), "pp": (1,), "prefill_tp": (1,)})
      >>> [(l["mode"], l["instances"], l["tp"], l["prefill_instances"]) for l in layouts(s)]
      [('colocated', 2, 1, 0), ('colocated', 1, 2, 0), ('disagg', 1, 1, 1)]
      >>> s = make_space("deepseek-v3", ["H200"], 16, {"tp": (1,), "pp": (1,), "mode": ("colocated",)})
      >>> [(l["instances"], l["dp"], l["ep"]) for l in layouts(s)]
      [(16, 1, 1), (8, 2, 2), (4, 4, 4), (2, 8, 8), (1, 16, 16)]
    """
    model = get_model(space.model)
    heads = model.n_heads
    tps = [t for t in space.values("tp") if heads % t == 0]
    n, out = space.gpus, []
    if "colocated" in space.values("mode"):
        for tp, pp in itertools.product(tps, space.values("pp")):
            for dp, ep in _expert_layouts(model, tp, space):
                if n % (tp * dp * pp) == 0:
                    out.append(dict(mode="colocated", instances=n // (tp * dp * pp), tp=tp, pp=pp, dp=dp, ep=ep,
                                    prefill_instances=0, prefill_tp=tp))
    if "disagg" in space.values("mode"):
        for tp, ptp in itertools.product(tps, [t for t in space.values("prefill_tp") if heads % t == 0]):
            for dp, ep in _expert_layouts(model, tp, space):
                for p in range(1, n // ptp + 1):
                    rest = n - p * ptp
                    if rest > 0 and rest % (tp * dp) == 0:
                        out.append(dict(mode="disagg", instances=rest // (tp * dp), tp=tp, pp=1, dp=dp, ep=ep,
                                        prefill_instances=p, prefill_tp=ptp))
    return out


def _expert_layouts(model, tp: int, space: Space) -> list[tuple[int, int]]:
    """(dp, ep) pairs of the space for an instance of tp GPUs per stage: (1, 1) for a dense model; for a
    mixture-of-experts model, dp > 1 with ep = tp x dp, and at dp = 1 the smallest of the space's ep values
    that divides tp (1 unless fixed otherwise: experts spread inside the TP group add only their imbalance,
    at the same memory per GPU, so the cost model never prefers them); ep divides the routed experts."""
    eps = [ep for ep in space.values("ep") if not model.is_moe or model.n_experts % ep == 0]
    if not model.is_moe:
        return [(1, 1)] if 1 in space.values("dp") and 1 in eps else []
    out = [(dp, tp * dp) for dp in space.values("dp") if dp > 1 and tp * dp in eps]
    inside = [ep for ep in eps if tp % ep == 0]
    return ([(1, min(inside))] if 1 in space.values("dp") and inside else []) + out


def layout_allowed(model: str, device: str, lay: dict) -> bool:
    """Whether the serving engine accepts the layout on ``device`` (:func:`sweepkit.costmodel.layout.check_layout`
    on the (decode) instances and the prefill pool: tensor parallelism within the scale-up domain, the EP / DP
    rules)."""
    m, d = get_model(model), get_device(device)
    try:
        check_layout(m, d, lay["tp"], lay["dp"], lay["ep"], "plan")
        if lay["prefill_instances"]:
            check_layout(m, d, lay["prefill_tp"], 1, 1, "plan")
    except InputError:
        return False
    return True


def _allowed(dev: str, lay: dict, lv: dict) -> bool:
    """The serving engine's modelling limits (:func:`sweepkit.serving.levers.check_lever`)."""
    if lv["spec"] != "none" and lay["pp"] > 1:
        return False
    # a weight format runs as its own compute format (W8A8) only where the device has those units
    return lv["weight_format"] == "bf16" or lv["weight_format"] in get_device(dev).compute_speedup


def enumerate_space(space: Space) -> dict[str, np.ndarray]:
    """The space as a table: one row per configuration, one column per axis plus the layout's fields.

    Returns:
      dict column -> [N] array (strings as object arrays); columns ``device``, ``gpus``, the layout's
      (:data:`LAYOUT_FIELDS`) and every :data:`LEVER_AXES`.
    """
    lays = layouts(space)
    per_dev = {d: [lay for lay in lays if layout_allowed(space.model, d, lay)] for d in space.devices}
    levers = [dict(zip(LEVER_AXES, combo)) for combo in itertools.product(*(space.values(a) for a in LEVER_AXES))]
    n = sum(len(v) for v in per_dev.values()) * len(levers)
    if n > MAX_TABLE_ROWS:
        raise InputError(f"the space has {n:,} configurations; at most {MAX_TABLE_ROWS:,} (fix some axes)")
    rows = [(d, lay, lv) for d in space.devices for lay in per_dev[d] for lv in levers if _allowed(d, lay, lv)]
    cols = {"device": np.array([r[0] for r in rows], dtype=object),
            "gpus": np.full(len(rows), space.gpus, np.int64)}
    for k in LAYOUT_FIELDS:
        cols[k] = np.array([r[1][k] for r in rows], dtype=object if k == "mode" else np.int64)
    for k in LEVER_AXES:
        cols[k] = np.array([r[2][k] for r in rows], dtype=object if isinstance(AXES[k][0], str) else np.int64)
    return cols


def lever_fields(row: dict) -> dict:
    """A configuration's lever fields (:mod:`sweepkit.serving.levers`, the keys of a ``[levers.<name>]``
    table), for the serving engine and for ``sweepkit simulate``.

    Example:
      >>> f = lever_fields(dict(mode="colocated", instances=2, tp=4, pp=1, prefill_instances=0, prefill_tp=4,
      ...     batching="chunked", token_budget=2048, batch_cap=256, kv="paged+prefix", weight_format="fp8",
      ...     kv_format="fp8", spec="mtp:3"))
      >>> (f["kv"], f["prefix_caching"], f["draft"], f["gamma"], f["compute_format"])
      ('paged', True, 'mtp', 3, 'fp8')
    """
    out = dict(instances=int(row["instances"]), tp=int(row["tp"]), pp=int(row["pp"]), mode=str(row["mode"]),
               batching=str(row["batching"]), token_budget=int(row["token_budget"]),
               kv="paged" if str(row["kv"]).startswith("paged") else "reserved",
               prefix_caching=row["kv"] == "paged+prefix", weight_format=str(row["weight_format"]),
               kv_format=str(row["kv_format"]),
               compute_format=str(row["weight_format"]))
    for k in ("dp", "ep"):
        if int(row.get(k, 1)) != 1:
            out[k] = int(row[k])
    if row["mode"] == "disagg":
        out.update(prefill_instances=int(row["prefill_instances"]), prefill_tp=int(row["prefill_tp"]))
    if row["spec"] != "none":
        draft, gamma = str(row["spec"]).split(":")
        out.update(draft=draft, gamma=int(gamma), alpha="workload")
    return out


def concat(tables: list[dict]) -> dict[str, np.ndarray]:
    """Tables of several spaces (one per device and GPU budget) as one."""
    tables = [t for t in tables if len(t["tp"])]
    if not tables:
        return {}
    return {k: np.concatenate([t[k] for t in tables]) for k in tables[0]}
