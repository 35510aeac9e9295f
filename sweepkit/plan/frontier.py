"""The plan's answer: Pareto frontier of the simulated configurations, what each lever contributes, and
each configuration as a ``sweepkit simulate`` lever table.

A simulated configuration is on the frontier when no other is at least as good in every objective and
better in one: higher objective (tokens per GPU or per dollar), lower TTFT p99, lower TPOT p99 (all at
capacity). A lever's contribution to a configuration is the ratio of the configuration's screen bound to
the bound of the same configuration with that one axis at its baseline value (:data:`BASELINE`): > 1 where
the lever helps (analytic, from the screen, not simulated; left out where that variant is outside the space
or infeasible).
"""

from __future__ import annotations

import numpy as np

from sweepkit.plan.space import LEVER_AXES, lever_fields

BASELINE = {"batching": "prefill-priority", "token_budget": 8192, "batch_cap": 256, "kv": "reserved",
            "weight_format": "bf16", "kv_format": "bf16", "spec": "none"}
"""The serving cluster's defaults (sweepkit/serving/data/cluster.toml): what a lever is measured against."""
SETTINGS = ("device", "gpus", "mode", "instances", "tp", "pp", "dp", "ep", "prefill_instances", "prefill_tp",
            *LEVER_AXES)
METRICS = ("output_tok_s_per_gpu", "goodput_req_s_per_gpu", "ttft_p99_s", "tpot_p99_s", "usd_per_mtok",
           "energy_per_token_j", "attainment")


def pareto(objective: np.ndarray, ttft_s: np.ndarray, tpot_s: np.ndarray) -> np.ndarray:
    """[N] bool: on the frontier of (max objective, min TTFT, min TPOT); points with objective <= 0 never are.

    Example:
      >>> pareto(np.array([3.0, 2.0, 1.0]), np.array([1.0, 0.5, 2.0]), np.array([1.0, 1.0, 1.0])).tolist()
      [True, True, False]
    """
    obj, a, b = (np.asarray(x, np.float64) for x in (objective, ttft_s, tpot_s))
    ok = (obj > 0) & np.isfinite(a) & np.isfinite(b)
    geq = (obj[None, :] >= obj[:, None]) & (a[None, :] <= a[:, None]) & (b[None, :] <= b[:, None])
    gt = (obj[None, :] > obj[:, None]) | (a[None, :] < a[:, None]) | (b[None, :] < b[:, None])
    dominated = (geq & gt & ok[None, :]).any(axis=1)
    return ok & ~dominated


def contributions(table: dict, bound_obj: np.ndarray, row: int) -> dict[str, float]:
    """Per lever axis where ``row`` differs from :data:`BASELINE`: its bound over the bound with that axis at
    the baseline value (axes whose baseline variant is outside the space or infeasible are left out)."""
    lookup = _index(table)
    mine = tuple(table[c][row] for c in SETTINGS)
    out = {}
    for axis, base in BASELINE.items():
        if table[axis][row] == base:
            continue
        other = lookup.get(tuple(base if c == axis else v for c, v in zip(SETTINGS, mine)))
        val = bound_obj[other] if other is not None else 0.0
        if val > 0:
            out[axis] = round(float(bound_obj[row] / val), 4)
    return out


_CACHE: dict = {}


def _index(table: dict) -> dict:
    key = id(table["tp"])
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = {tuple(table[c][i] for c in SETTINGS): i for i in range(len(table["tp"]))}
    return _CACHE[key]


def lever_toml(table: dict, row: int, name: str) -> str:
    """The configuration as a ``[levers.<name>]`` table for a ``sweepkit simulate`` levers file (with its
    device as ``devices``; the batch cap is the cluster's ``batch_cap``, given as a comment).

    Example:
      >>> t = dict(device=np.array(["H100"]), gpus=np.array([1]), mode=np.array(["colocated"]), instances=np.array([1]),
      ...          tp=np.array([1]), pp=np.array([1]), dp=np.array([1]), ep=np.array([1]), prefill_instances=np.array([0]), prefill_tp=np.array([1]),
      ...          batching=np.array(["chunked"]), token_budget=np.array([2048]), batch_cap=np.array([128]),
      ...          kv=np.array(["paged"]), weight_format=np.array(["bf16"]), kv_format=np.array(["fp8"]),
      ...          spec=np.array(["none"]))
      >>> print(lever_toml(t, 0, "best").splitlines()[0])
      [levers.best]
    """
    row_d = {k: v[row] for k, v in table.items()}
    lines = [f"[levers.{name}]", f"# cluster: batch_cap = {int(row_d['batch_cap'])}", f'devices = ["{row_d["device"]}"]']
    for k, v in lever_fields(row_d).items():
        lines.append(f"{k} = {_toml(v)}")
    return "\n".join(lines)


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return f'"{v}"'


def rows(table: dict, bound: dict, bound_obj: np.ndarray, simulated: list, workload: str) -> list[dict]:
    """One dict per simulated configuration: workload, settings, screen bound, simulated metrics, frontier
    flag, lever contributions and the lever TOML; frontier first, then by objective."""
    if not simulated:
        return []
    obj = np.array([s.objective for s in simulated])
    def met(k):
        return np.array([float(s.metrics.get(k, np.nan)) for s in simulated])
    front = pareto(obj, met("ttft_p99_s"), met("tpot_p99_s"))
    out = []
    for s, on in zip(simulated, front):
        i = s.row
        settings = {k: (v.item() if hasattr(v, "item") else v) for k, v in ((c, table[c][i]) for c in SETTINGS)}
        out.append(dict(workload=workload, row=int(i), frontier=bool(on), objective=s.objective,
                        bound=s.bound, capacity_per_s=s.capacity_per_s, **settings,
                        **{k: float(s.metrics.get(k, np.nan)) for k in METRICS},
                        ttft_lb_s=float(bound["ttft_lb_s"][i]), tpot_lb_s=float(bound["tpot_lb_s"][i]),
                        contributions=contributions(table, bound_obj, i),
                        lever_toml=lever_toml(table, i, f"plan-{workload}-{i}")))
    out.sort(key=lambda r: (not r["frontier"], -r["objective"]))
    return out
