"""The JSON API's inputs and answers (docs/serve.md): validation in one line, warehouse reads, options.

Every client value is checked against a closed set (catalogue names, the levers, workloads and devices the
server was started with) or a numeric range; bad input raises :class:`BadRequest` with one line naming the
field, the value and what is allowed (HTTP 400). No SQL text or file path is accepted from a client: the
warehouse is read only through the packaged queries and fixed statements with bound parameters.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

from sweepkit.catalogue import device_names, draft_names, model_names
from sweepkit.errors import InputError
from sweepkit.serving.cluster import Cluster
from sweepkit.serving.levers import CHOICES, Lever, parse_lever
from sweepkit.serving.workloads import Workload

DEFAULT_RATE_PER_S = 1.0
"""Offered load when the warehouse has no reference load for the workload (sessions/s or requests/s)."""
MAX_RATE_PER_S = 1e6
"""Highest offered load accepted, 1/s (the offline "every request at once" rate)."""


class BadRequest(ValueError):
    """A client's bad input: one line, answered with HTTP 400."""


@dataclasses.dataclass
class Context:
    """What the server was started with: workloads, levers, cluster, and the warehouse's sweep (if any)."""

    workloads: dict[str, Workload]
    levers: dict[str, Lever]
    cluster: Cluster
    warehouse: object | None = None
    run_id: str | None = None
    reference: dict = dataclasses.field(default_factory=dict)   # workload -> reference load, 1/s
    sweep_levers: tuple = ()
    sweep_devices: tuple = ()


def _allowed(field: str, value, allowed) -> BadRequest:
    shown = value if isinstance(value, (int, float, str, bool)) or value is None else type(value).__name__
    return BadRequest(f"{field} = {shown!r} is not allowed; expected {allowed}")


def _name(body: dict, field: str, known, default=None) -> str:
    value = body.get(field, default)
    if not isinstance(value, str) or value not in known:
        raise _allowed(field, value, f"one of {', '.join(known)}")
    return value


def _number(body: dict, field: str, lo: float, hi: float, default=None, integer=False) -> float:
    value = body.get(field, default)
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
        and lo <= value <= hi and (not integer or float(value).is_integer())
    if not ok:
        kind = "an integer" if integer else "a number"
        raise _allowed(field, value, f"{kind} in [{lo:g}, {hi:g}]")
    return int(value) if integer else float(value)


def _object(body) -> dict:
    if not isinstance(body, dict):
        raise BadRequest("body is not allowed; expected a JSON object")
    return body


def lever_of(ctx: Context, body: dict, field: str) -> Lever:
    """A lever by name (the levers file's) or an object of lever fields validated as the file is."""
    value = body.get(field, "baseline")
    if isinstance(value, str):
        return ctx.levers[_name({field: value}, field, ctx.levers)]
    if isinstance(value, dict):
        raw = {k: v for k, v in value.items() if k != "name"}
        name = value.get("name", "custom")
        try:
            return parse_lever(raw, field, name=str(name))
        except InputError as exc:
            raise BadRequest(str(exc)) from None
    raise _allowed(field, value, f"a lever name ({', '.join(ctx.levers)}) or an object of lever fields")


def whatif_args(ctx: Context, body) -> dict:
    """``POST /api/whatif``: workload, device, before, after, optional rate (default: the reference load)."""
    body = _object(body)
    _unknown(body, {"workload", "device", "before", "after", "rate", "page"})
    w = ctx.workloads[_name(body, "workload", ctx.workloads)]
    device = _name(body, "device", device_names())
    rate = _number(body, "rate", 1e-4, MAX_RATE_PER_S, default=reference_rate(ctx, w.name))
    return dict(w=w, device=device, before=lever_of(ctx, body, "before"), after=lever_of(ctx, body, "after"),
                rate_per_s=rate)


def capacity_args(ctx: Context, body) -> dict:
    """``POST /api/capacity``: workload, device, lever; the search's first probe (twice the sweep's reference
    load of the workload when the warehouse has one, else 1/s)."""
    body = _object(body)
    _unknown(body, {"workload", "device", "lever", "page"})
    w = ctx.workloads[_name(body, "workload", ctx.workloads)]
    start = 2.0 * ctx.reference[w.name] if w.name in ctx.reference else 1.0   # as `sweepkit simulate` starts
    return dict(w=w, device=_name(body, "device", device_names()), lever=lever_of(ctx, body, "lever"),
                start_per_s=start)


def decode_args(body) -> dict:
    """``POST /api/decode``: device, model, draft, batch, context, gamma, alpha, tp."""
    from sweepkit.serve.decode import GAMMA_MAX

    body = _object(body)
    _unknown(body, {"device", "model", "draft", "batch", "context", "gamma", "alpha", "tp", "page"})
    out = dict(device=_name(body, "device", device_names(), "H100"),
               model=_name(body, "model", model_names(), "llama-3-8b"),
               draft=_name(body, "draft", draft_names(), "mtp"),
               batch=_number(body, "batch", 1, 4096, 1, integer=True),
               context=_number(body, "context", 1, 1 << 20, 512, integer=True),
               gamma=_number(body, "gamma", 0, GAMMA_MAX, 3, integer=True),
               alpha=_number(body, "alpha", 0.0, 1.0, 0.7), tp=_number(body, "tp", 1, 64, 1, integer=True))
    from sweepkit.catalogue import get_model

    heads = get_model(out["model"]).n_heads
    if heads % out["tp"]:
        raise _allowed("tp", out["tp"], f"a divisor of {out['model']}'s {heads} attention heads")
    return out


def _unknown(body: dict, known: set) -> None:
    for k in body:
        if k not in known:
            raise BadRequest(f"field {k!r} is not allowed; expected {', '.join(sorted(known))}")


def reference_rate(ctx: Context, workload: str) -> float:
    """The warehouse's reference load of a workload (the sweep's), else :data:`DEFAULT_RATE_PER_S`."""
    return float(ctx.reference.get(workload, DEFAULT_RATE_PER_S))


def read_sweep(wh) -> dict:
    """The newest committed serving run: id, per-workload reference loads, levers and devices (empty if none),
    read from one snapshot."""
    with wh.pinned():
        return _read_sweep(wh)


def _read_sweep(wh) -> dict:
    runs = wh.query("select run_id from runs where kind = 'serving' and status = 'committed' "
                    "order by ended_at desc limit 1").column(0).to_pylist()
    if not runs:
        return dict(run_id=None, reference={}, sweep_levers=(), sweep_devices=())
    rid = runs[0]
    rows = wh.query("select workload, any_value(load_per_s) as load from serving where run_id = $r and purpose in "
                    "('reference', 'saturated') group by workload", {"r": rid}).to_pylist()
    levers = wh.query("select distinct lever from capacity where run_id = $r order by 1", {"r": rid})
    devices = wh.query("select distinct device from capacity where run_id = $r order by 1", {"r": rid})
    return dict(run_id=rid, reference={r["workload"]: r["load"] for r in rows},
                sweep_levers=tuple(levers.column(0).to_pylist()), sweep_devices=tuple(devices.column(0).to_pylist()))


def recorded(wh, run_id: str, workload: str, device: str, lever: str) -> dict | None:
    """The recorded reference-load (or saturated) row of one configuration, or None."""
    rows = wh.query("select * from serving where run_id = $r and workload = $w and device = $d and lever = $l "
                    "and purpose in ('reference', 'saturated') limit 1",
                    {"r": run_id, "w": workload, "d": device, "l": lever}).to_pylist()
    return rows[0] if rows else None


def matrix_rows(ctx: Context) -> list[dict]:
    """``GET /api/matrix``: the matrix query's rows of the newest serving run, each with its what-if link."""
    from urllib.parse import urlencode

    from sweepkit.store import run_query

    if ctx.warehouse is None or ctx.run_id is None:
        return []
    rows = run_query(ctx.warehouse, "matrix", {"run_id": ctx.run_id}).to_pylist()
    for r in rows:
        r["whatif"] = "/what-if?" + urlencode(dict(workload=r["workload"], device=r["device"], lever=r["lever"]))
        for k, v in r.items():
            if isinstance(v, float) and not math.isfinite(v):
                r[k] = None
    return rows


def options(ctx: Context) -> dict:
    """``GET /api/options``: what the pages offer (workloads with reference loads, devices, levers and each one's
    serving layout in words, choices)."""
    from sweepkit.catalogue import format_names
    from sweepkit.serve.layouts import layout_label

    return dict(
        workloads=[dict(name=w.name, description=w.description, load_unit=w.load_unit, offline=w.offline,
                        reference_rate_per_s=reference_rate(ctx, w.name), recorded=w.name in ctx.reference)
                   for w in ctx.workloads.values()],
        devices=list(ctx.sweep_devices or ctx.cluster.devices), all_devices=list(device_names()),
        levers={k: dataclasses.asdict(v) for k, v in ctx.levers.items()}, sweep_levers=list(ctx.sweep_levers),
        layouts={k: layout_label(v, ctx.cluster) for k, v in ctx.levers.items()},
        choices={k: list(v) for k, v in CHOICES.items()}, formats=list(format_names()),
        drafts=list(draft_names()), models=list(model_names()),
        cluster=dict(model=ctx.cluster.model, gpus=ctx.cluster.gpus, instances=ctx.cluster.instances,
                     tp=ctx.cluster.tp, token_budget=ctx.cluster.prefill_token_budget),
        run_id=ctx.run_id)


def build_context(warehouse=None, workloads_file=None, levers_file=None, cluster_file=None) -> Context:
    """The server's context: packaged (or given) workloads, levers and cluster, and the warehouse's sweep.

    Args:
      warehouse: a :class:`sweepkit.store.Warehouse`, or None (no matrix; default loads).
      workloads_file, levers_file, cluster_file: TOML paths given on the command line (None: packaged).

    Raises:
      InputError: a bad file (one line naming the file and field).
    """
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads

    sweep = read_sweep(warehouse) if warehouse is not None else {}
    return Context(workloads=load_workloads(workloads_file), levers=load_levers(levers_file),
                   cluster=load_cluster(cluster_file), warehouse=warehouse, **sweep)
