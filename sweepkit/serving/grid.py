"""A serving grid (TOML) -> a validated :class:`ServingGrid` (:func:`load_serving_grid`), run by :mod:`sweepkit.serving.run`.

Grid file (grids/serving-seed.toml)::

    name = "serving-seed"
    description = "..."
    [serving]
    workloads = ["chat", ...]          # names in workloads_file (default: the packaged five)
    levers = ["baseline", "mtp", ...]  # names in levers_file; `baseline` is the reference lever
    devices = ["H100", "H200", "B200"] # default: the cluster's
    reference_device = "H100"          # reference load = 0.5 x this device's baseline capacity
    rates_per_call = 1                 # capacity-search probes per configuration per round
    tolerance = 0.05                   # capacity search: final (hi - lo) / hi
    search = "bracket"                 # or "interpolate", "bisect" (the reference's rule): sweepkit.serving.capacity
    reference_loads = {chat = 1.9375}  # optional: pin a workload's reference load (default 0.5 x capacity)
    workloads_file / levers_file / cluster_file = "path.toml"   # optional, relative to the grid file
    profile = "reference"              # or "seed", "tensorrt-llm", "vllm", "sglang", a profile file (sweepkit.serving.profile)
    horizon = 4.0                      # optional: every workload's arrivals span horizon x its session length
    min_sessions = 200                 # optional: every workload's fewest sessions per run
    [serving.bands]                    # optional: uncertainty draws per point (sweepkit.serving.draws)
    draws = 16
    alpha = { low = -0.05, high = 0.05 }

Bad input raises a one-line :class:`~sweepkit.errors.InputError` naming the file, field, value and what is
allowed: an unknown workload, lever or device, a device outside the grid's cluster and
:data:`EXTRA_SERVING_DEVICES`, a baseline with a draft, a reference device or pinned load outside the grid.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from sweepkit.catalogue import get_device
from sweepkit.catalogue.efficiency import SHIPPED, framework_key
from sweepkit.errors import InputError
from sweepkit.serving._toml import check_keys, number, read_toml, string
from sweepkit.serving.capacity import RULES, TOLERANCE
from sweepkit.serving.cluster import Cluster, load_cluster
from sweepkit.serving.config import Config, check
from sweepkit.serving.draws import parse_serving_bands
from sweepkit.serving.levers import Lever, load_levers
from sweepkit.serving.profile import REFERENCE, profile_names, resolve_profile
from sweepkit.serving.workloads import Workload, load_workloads
from sweepkit.sweep.bands import Bands


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
    tolerance: float
    search: str = "bracket"
    reference_loads: dict = dataclasses.field(default_factory=dict)
    bands: Bands | None = None
    profile: str = "reference"

    @property
    def n_points(self) -> int:
        return len(self.workloads) * sum(1 for d in self.devices for lv in self.levers
                                         if not lv.devices or d in lv.devices)


EXTRA_SERVING_DEVICES = ("H100", "H200", "B200", "A100")
"""Devices any serving grid may name besides its cluster's (the reference simulator's three, and A100)."""


def cluster_where(path: Path | None) -> str:
    """Where a grid's cluster comes from, for messages."""
    return "sweepkit/serving/data/cluster.toml" if path is None else str(path)


def _names(raw: dict, key: str, known: dict | list, where: str, default=None) -> list[str]:
    value = raw.get(key, default)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: {key} = {value!r} is not allowed; expected a non-empty list of names")
    for i, v in enumerate(value):
        if v not in known:
            raise InputError(f"{where}: {key} = {v!r} is not allowed; expected one of {', '.join(known)}")
        if v in value[:i]:
            raise InputError(f"{where}: {key} lists {v!r} twice; expected each name once")
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
    check_keys(sv, {"workloads", "levers", "devices", "reference_device", "baseline", "rates_per_call", "tolerance",
                    "search", "workloads_file", "levers_file", "cluster_file", "reference_loads", "bands",
                    "profile", "horizon", "min_sessions"},
               {"workloads", "levers"}, w_where)
    base = Path(path).parent

    def rel(key):
        if key not in sv:
            return None
        value = string(sv, key, w_where)
        target = base / value
        if target.is_dir():
            raise InputError(f"{w_where}: {key} = {value!r} is a folder ({target}); expected a TOML file, "
                             f"relative to the grid file's folder")
        if not target.exists():
            raise InputError(f"{w_where}: {key} = {value!r}: no such file ({target}); expected a TOML file, "
                             f"relative to the grid file's folder")
        return target

    wls = load_workloads(rel("workloads_file"))
    lvs = load_levers(rel("levers_file"))
    cluster = load_cluster(rel("cluster_file"))
    workloads = _names(sv, "workloads", wls, w_where)
    runs = {k: number(sv, k, w_where, lo=lo, hi=hi, integer=k == "min_sessions")
            for k, lo, hi in (("horizon", 1.0, 64.0), ("min_sessions", 2, 1_000_000)) if k in sv}
    wls = {k: dataclasses.replace(w, **runs) if runs and w.replay is None else w for k, w in wls.items()}
    levers = _names(sv, "levers", lvs, w_where)
    baseline = sv.get("baseline", "baseline")
    if baseline not in levers:
        raise InputError(f"{w_where}: baseline = {baseline!r} is not allowed; expected one of the grid's levers "
                         f"({', '.join(levers)})")
    if lvs[baseline].speculative:
        raise InputError(f"{w_where}: baseline = {baseline!r} is not allowed; expected a lever without a draft")
    lever_where = str(rel("levers_file") or "sweepkit/serving/data/levers.toml")
    servable = list(dict.fromkeys([*cluster.devices, *EXTRA_SERVING_DEVICES]))
    if isinstance(sv.get("devices"), list):
        for d in sv["devices"]:
            if isinstance(d, str) and d not in servable:
                try:
                    get_device(d, "devices")                     # not in the catalogue at all: that error
                except InputError as exc:
                    raise InputError(f"{w_where}: {exc}") from None
                extra = [x for x in EXTRA_SERVING_DEVICES if x not in cluster.devices]
                raise InputError(
                    f"{w_where}: devices = {d!r} is not allowed; expected one of {', '.join(servable)}: a serving "
                    f"grid simulates the devices of its cluster ({cluster_where(rel('cluster_file'))}: "
                    f"{', '.join(cluster.devices)}){' and ' + ', '.join(extra) if extra else ''}; to serve on "
                    f"{d}, give a cluster_file whose devices list it")
    devices = _names(sv, "devices", servable, w_where, default=list(cluster.devices))
    for d in devices:
        get_device(d, "devices")
        for name in levers:
            if not lvs[name].devices or d in lvs[name].devices:
                check(cluster, Config(d, lvs[name]), lever_where)
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
    profile = sv.get("profile", REFERENCE)
    named = not isinstance(profile, str) or profile in profile_names() or framework_key(profile) in SHIPPED
    file = None if named else base / profile        # a profile file, relative to the grid file's folder
    chosen = str(file) if file is not None and file.is_file() else profile
    cluster = dataclasses.replace(cluster, profile=resolve_profile(chosen, w_where)[0])
    return ServingGrid(
        name=str(raw.get("name", Path(path).stem)), description=str(raw.get("description", "")), path=str(path),
        text=text, sha256=hashlib.sha256(text.encode()).hexdigest(),
        workloads=tuple(wls[w] for w in workloads), levers=tuple(lvs[l] for l in levers), devices=tuple(devices),
        cluster=cluster, reference_device=ref, baseline=baseline,
        rates_per_call=number(sv, "rates_per_call", w_where, lo=1, hi=256, integer=True, default=1),
        tolerance=number(sv, "tolerance", w_where, lo=0.001, hi=0.5, default=TOLERANCE), search=_rule(sv, w_where),
        reference_loads={k: float(v) for k, v in refs.items()}, bands=parse_serving_bands(sv.get("bands"), where),
        profile=profile)


DEFAULT_RULE = "bracket"
"""A grid's capacity-search rule unless it names one (:mod:`sweepkit.serving.capacity`)."""


def _rule(sv: dict, where: str) -> str:
    """The grid's capacity-search rule, one of :data:`sweepkit.serving.capacity.RULES`."""
    rule = sv.get("search", DEFAULT_RULE)
    if rule not in RULES:
        raise InputError(f"{where}: search = {rule!r} is not allowed; expected one of {', '.join(RULES)}")
    return rule
