"""A plan's frontier on the what-if page: the files ``sweepkit serve`` reads and one page address per point.

The what-if page (``sweepkit serve``) compares a preset lever of its levers file with another on its cluster.
:func:`serve_files` writes both files for a plan: ``cluster.toml``, a colocated cluster of the plan's model on
its GPUs (the layout and formats of the best simulated colocated configuration, its batch cap, the
frontier's devices), and ``levers.toml``, ``baseline`` (the cluster itself) and every frontier configuration
as the preset ``plan-<workload>-<row>`` (:func:`sweepkit.plan.frontier.lever_toml`; under a price budget,
the points on the cluster's GPU count). Each point's address
selects its workload, device and preset:

    /what-if?workload=<workload>&device=<device>&lever=plan-<workload>-<row>

A preset whose batch cap differs from the cluster's runs at the cluster's on the page (the cap is a cluster
field; the lever table names its own in a comment).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from sweepkit.errors import InputError
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.levers import load_levers


def whatif_path(row: dict) -> str:
    """The what-if page's address (path and query) of one plan row.

    Example:
      >>> whatif_path(dict(workload="chat", device="H200", row=12))
      '/what-if?workload=chat&device=H200&lever=plan-chat-12'
    """
    return "/what-if?" + urlencode(dict(workload=row["workload"], device=row["device"],
                                        lever=f"plan-{row['workload']}-{int(row['row'])}"))


def _base(rows: list[dict]) -> dict:
    """The simulated row the cluster takes its layout from: the best colocated one without pipeline stages,
    else the best row (its decode pool's tp and dp over all the GPUs)."""
    simulated = [r for r in rows if r["capacity_per_s"] == r["capacity_per_s"]]
    plain = [r for r in simulated if r["mode"] == "colocated" and r["pp"] == 1]
    return max(plain or simulated, key=lambda r: r["objective"])


def cluster_toml(model: str, rows: list[dict]) -> str:
    """The ``[cluster]`` table of :func:`serve_files`."""
    b = _base(rows)
    gpus, per = int(b["gpus"]), int(b["tp"]) * int(b.get("dp", 1))
    if gpus % per:
        raise InputError(f"plan: no colocated cluster of {gpus} GPUs in instances of tp {b['tp']} x dp "
                         f"{b.get('dp', 1)} for the what-if page; simulate a colocated configuration")
    devices = sorted({str(r["device"]) for r in rows if r["frontier"] and int(r["gpus"]) == gpus}
                     | {str(b["device"])})
    return "\n".join([
        "[cluster]",
        f'description = "{model} on {gpus} GPUs: the plan\'s best colocated layout"',
        'source = "sweepkit plan"',
        f'model = "{model}"', f"gpus = {gpus}", f"instances = {gpus // per}", f"tp = {int(b['tp'])}",
        f"dp = {int(b.get('dp', 1))}", f"ep = {int(b.get('ep', 1))}", f"batch_cap = {int(b['batch_cap'])}",
        "prefill_token_budget = 8192", "step_overhead_s = 0.0005",
        f'weight_format = "{b["weight_format"]}"', f'kv_format = "{b["kv_format"]}"',
        f'compute_format = "{b["weight_format"]}"',
        "devices = [" + ", ".join(f'"{d}"' for d in devices) + "]", ""])


def serve_files(plan, folder: str | Path) -> dict[str, str]:
    """Write ``cluster.toml`` and ``levers.toml`` for ``sweepkit serve`` into ``folder`` (module docstring),
    read both back as the server will, and return {preset name: what-if address} of the frontier.

    Raises:
      InputError: nothing simulated, or no colocated cluster for the plan's GPUs.
    """
    rows = [r for w in plan.workloads.values() for r in w["rows"] if r["capacity_per_s"] == r["capacity_per_s"]]
    if not any(r["frontier"] for r in rows):
        raise InputError("plan: no simulated frontier configuration to link to the what-if page")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cluster, levers = folder / "cluster.toml", folder / "levers.toml"
    cluster.write_text(cluster_toml(plan.model, rows), encoding="utf-8")
    gpus = int(_base(rows)["gpus"])
    front = [r for r in rows if r["frontier"] and int(r["gpus"]) == gpus]     # the cluster's GPU count
    levers.write_text("\n\n".join(['[levers.baseline]\ndescription = "the cluster as it is"',
                                   *(r["lever_toml"] for r in front)]) + "\n", encoding="utf-8")
    load_cluster(cluster)
    names = set(load_levers(levers))
    out = {f"plan-{r['workload']}-{int(r['row'])}": whatif_path(r) for r in front}
    missing = sorted(set(out) - names)
    if missing:
        raise InputError(f"{levers}: presets {', '.join(missing)} did not read back")
    return out
