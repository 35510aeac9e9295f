"""A serving grid (TOML) -> capacity searches and reference-load runs -> pyarrow tables ``serving`` and ``capacity``.

Grid file (grids/serving-seed.toml)::

    name = "serving-seed"
    description = "..."
    [serving]
    workloads = ["chat", ...]          # names in workloads_file (default: the packaged five)
    levers = ["baseline", "mtp", ...]  # names in levers_file; `baseline` is the reference lever
    devices = ["H100", "H200", "B200"] # default: the cluster's
    reference_device = "H100"          # reference load = 0.5 x this device's baseline capacity
    rates_per_call = 5                 # candidate loads per configuration per search round
    reference_loads = {chat = 1.9375}  # optional: pin a workload's reference load (default 0.5 x capacity)
    workloads_file / levers_file / cluster_file = "path.toml"   # optional, relative to the grid file

Per workload: every (device, lever) configuration's capacity is searched together
(:mod:`sweepkit.serving.capacity`); the reference load is half the reference device's baseline capacity and
every configuration is then simulated at it (same offered load everywhere). Offline workloads run once, every
request at t = 0; their capacity metrics and latencies come from that saturated run.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa

from sweepkit.catalogue import get_device
from sweepkit.errors import InputError
from sweepkit.serving._toml import check_keys, number, read_toml, string
from sweepkit.serving.capacity import search
from sweepkit.serving.cluster import Cluster, load_cluster
from sweepkit.serving.engine import OFFLINE_RATE, Config, run_configs
from sweepkit.serving.levers import Lever, load_levers
from sweepkit.serving.metrics import lane_metrics
from sweepkit.serving.workloads import Workload, load_workloads

METRIC_COLUMNS = [
    "attainment", "requests", "window_requests", "completed", "goodput_req_s", "goodput_req_s_per_gpu",
    "output_tok_s", "output_tok_s_per_gpu", "usd_per_mtok", "energy_j", "energy_per_token_j", "horizon_s",
    "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "itl_p50_s",
    "itl_p90_s", "itl_p99_s", "decode_steps", "prefill_steps", "mean_decode_batch", "tokens_per_pass",
    "kv_peak_tokens", "busy_fraction", "stopped_early",
]


@dataclasses.dataclass(frozen=True)
class ServingGrid:
    """A parsed serving grid."""

    name: str
    description: str
    path: str
    text: str
    sha256: str
    workloads: tuple[Workload, ...]
    levers: tuple[Lever, ...]
    devices: tuple[str, ...]
    cluster: Cluster
    reference_device: str
    baseline: str
    rates_per_call: int
    reference_loads: dict = dataclasses.field(default_factory=dict)

    @property
    def n_points(self) -> int:
        return len(self.workloads) * len(self.levers) * len(self.devices)


def _names(raw: dict, key: str, known: dict | list, where: str, default=None) -> list[str]:
    value = raw.get(key, default)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: {key} = {value!r} is not allowed; expected a non-empty list of names")
    for v in value:
        if v not in known:
            raise InputError(f"{where}: {key} = {v!r} is not allowed; expected one of {', '.join(known)}")
    return value


def load_serving_grid(path: str | Path) -> ServingGrid:
    """Parse and validate a serving grid; bad input raises a one-line :class:`InputError`."""
    raw, where = read_toml(path, "")
    text = Path(path).read_text(encoding="utf-8")
    check_keys(raw, {"name", "description", "serving"}, {"serving"}, where)
    sv = raw["serving"]
    if not isinstance(sv, dict):
        raise InputError(f"{where}: [serving] must be a table")
    w_where = f"{where} [serving]"
    check_keys(sv, {"workloads", "levers", "devices", "reference_device", "baseline", "rates_per_call",
                    "workloads_file", "levers_file", "cluster_file", "reference_loads"}, {"workloads", "levers"},
               w_where)
    base = Path(path).parent

    def rel(key):
        return None if key not in sv else base / string(sv, key, w_where)

    wls = load_workloads(rel("workloads_file"))
    lvs = load_levers(rel("levers_file"))
    cluster = load_cluster(rel("cluster_file"))
    workloads = _names(sv, "workloads", wls, w_where)
    levers = _names(sv, "levers", lvs, w_where)
    baseline = sv.get("baseline", "baseline")
    if baseline not in levers:
        raise InputError(f"{w_where}: baseline = {baseline!r} is not allowed; expected one of the grid's levers "
                         f"({', '.join(levers)})")
    if lvs[baseline].speculative:
        raise InputError(f"{w_where}: baseline = {baseline!r} is not allowed; expected a lever without a draft")
    devices = _names(sv, "devices", list(cluster.devices) + [d for d in ("H100", "H200", "B200", "A100")],
                     w_where, default=list(cluster.devices))
    for d in devices:
        get_device(d, "devices")
    ref = sv.get("reference_device", devices[0])
    if ref not in devices:
        raise InputError(f"{w_where}: reference_device = {ref!r} is not allowed; expected one of {', '.join(devices)}")
    refs = sv.get("reference_loads", {})
    if not isinstance(refs, dict):
        raise InputError(f"{w_where}: reference_loads must be a table of workload = load per second")
    for k in refs:
        if k not in workloads:
            raise InputError(f"{w_where}: reference_loads.{k} is not allowed; expected one of {', '.join(workloads)}")
        number(refs, k, f"{w_where} reference_loads", lo=0, lo_open=True)
    return ServingGrid(
        name=str(raw.get("name", Path(path).stem)), description=str(raw.get("description", "")), path=str(path),
        text=text, sha256=hashlib.sha256(text.encode()).hexdigest(),
        workloads=tuple(wls[w] for w in workloads), levers=tuple(lvs[l] for l in levers), devices=tuple(devices),
        cluster=cluster, reference_device=ref, baseline=baseline,
        rates_per_call=number(sv, "rates_per_call", w_where, lo=2, hi=256, integer=True, default=5),
        reference_loads={k: float(v) for k, v in refs.items()})


def _row(grid: ServingGrid, w: Workload, cfg: Config, load: float, purpose: str, m: dict) -> dict:
    row = dict(device=cfg.device, lever=cfg.lever.name, workload=w.name, draft=cfg.lever.draft,
               gamma=cfg.lever.gamma, alpha=cfg.lever.alpha, load_per_s=float(load), load_unit=w.load_unit,
               purpose=purpose)
    row.update({("slo_attainment" if k == "attainment" else k):
                (bool(m[k]) if k == "stopped_early" else
                 int(m[k]) if k in ("requests", "window_requests", "completed") else float(m[k]))
                for k in METRIC_COLUMNS})
    return row


def run_workload(grid: ServingGrid, w: Workload, progress=None):
    """Serving rows and capacity rows of one workload (lists of dicts)."""
    cl = grid.cluster
    configs = [Config(d, l) for d in grid.devices for l in grid.levers]
    prices = [get_device(c.device).price_usd_per_gpu_hour for c in configs]
    idle = [get_device(c.device).idle_w for c in configs]
    serving, capacity = [], []
    if w.offline:
        st, lay = run_configs(w, cl, configs, np.full((len(configs), 1), OFFLINE_RATE), early_stop=False)
        for c, cfg in enumerate(configs):
            m = lane_metrics(st, lay, c, 0, w, cl.gpus, cl.tp, idle[c], prices[c])
            serving.append(_row(grid, w, cfg, OFFLINE_RATE, "saturated", m))
            capacity.append(_capacity_row(w, cfg, float("nan"), OFFLINE_RATE, m, m, saturated=True))
        if progress:
            progress(len(configs))
        return serving, capacity
    # one search per device: a device's configurations share a compiled shape whose session count follows
    # that device's capacities (a fast device's high loads would otherwise inflate every lane)
    caps, best, rows = [None] * len(configs), [None] * len(configs), []
    for dev in grid.devices:
        idx = [i for i, c in enumerate(configs) if c.device == dev]
        c_, b_, r_ = search(w, cl, [configs[i] for i in idx], [prices[i] for i in idx], [idle[i] for i in idx],
                            rates_per_call=grid.rates_per_call, progress=progress)
        for k, i in enumerate(idx):
            caps[i], best[i] = c_[k], b_[k]
        rows += [(idx[c], load, purpose, m) for c, load, purpose, m in r_]
    ref_c = next(i for i, c in enumerate(configs) if c.device == grid.reference_device
                 and c.lever.name == grid.baseline)
    ref_load = grid.reference_loads.get(w.name, 0.5 * caps[ref_c])
    st, lay = run_configs(w, cl, configs, np.full((len(configs), 1), ref_load), early_stop=False)
    if progress:
        progress(len(configs))
    for c, load, purpose, m in rows:
        serving.append(_row(grid, w, configs[c], load, purpose, m))
    for c, cfg in enumerate(configs):
        m_ref = lane_metrics(st, lay, c, 0, w, cl.gpus, cl.tp, idle[c], prices[c])
        serving.append(_row(grid, w, cfg, ref_load, "reference", m_ref))
        capacity.append(_capacity_row(w, cfg, caps[c], ref_load, best[c], m_ref, saturated=False))
    return serving, capacity


def _capacity_row(w: Workload, cfg: Config, cap: float, ref_load: float, at_cap: dict | None, at_ref: dict,
                  saturated: bool) -> dict:
    nan = float("nan")
    at_cap = at_cap or {}
    get = lambda k: float(at_cap.get(k, nan))  # noqa: E731
    return dict(
        device=cfg.device, lever=cfg.lever.name, workload=w.name, draft=cfg.lever.draft, gamma=cfg.lever.gamma,
        alpha=cfg.lever.alpha, saturated=saturated, load_unit=w.load_unit, capacity_per_s=cap,
        reference_load_per_s=ref_load, goodput_req_s=get("goodput_req_s"),
        goodput_per_gpu_per_s=get("goodput_req_s_per_gpu"), tokens_per_gpu_per_s=get("output_tok_s_per_gpu"),
        cost_per_mtok_usd=get("usd_per_mtok"), energy_per_token_j=get("energy_per_token_j"),
        attainment_at_capacity=get("attainment"), tokens_per_pass=get("tokens_per_pass"),
        **{f"{k}_at_ref": float(at_ref[k]) for k in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s",
                                                      "tpot_p90_s", "tpot_p99_s", "itl_p50_s", "itl_p90_s",
                                                      "itl_p99_s", "attainment")},
    )


def run_grid(grid: ServingGrid, progress=None) -> dict[str, pa.Table]:
    """Run every workload of the grid; returns pyarrow tables ``serving`` and ``capacity``."""
    serving, capacity = [], []
    for w in grid.workloads:
        s, c = run_workload(grid, w, progress)
        serving += s
        capacity += c
    return {"serving": pa.Table.from_pylist(serving), "capacity": pa.Table.from_pylist(capacity)}
