"""One call for a whole plan: the space of every device under the budget, the screen per workload, the
search, the frontier; and the one-line answers when nothing can be planned.

Budgets: ``gpus`` GPUs per deployment, or, with ``usd_per_hour``, as many of each device as that price
buys (at most ``gpus`` where both are given). Nothing to plan is an answer, not an error: a budget that
buys no GPU, a model whose weights fit no layout, SLOs that no configuration's lower bounds meet; each
comes back as ``verdict`` with the closest configuration.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from sweepkit.catalogue import get_device, get_format, get_model
from sweepkit.costmodel.memory import MEM_UTIL
from sweepkit.errors import InputError
from sweepkit.plan.build import run_screen
from sweepkit.plan.frontier import rows as frontier_rows
from sweepkit.plan.search import Simulated, objective_of, order, run_search
from sweepkit.plan.space import concat, enumerate_space, make_space
from sweepkit.serving.workloads import Workload

SCREEN_ROWS = 10
"""Configurations shown when nothing is simulated (``max_simulated`` = 0): the best bounds."""


@dataclasses.dataclass
class Plan:
    """A plan's outcome: per workload the screened, feasible and simulated counts, rows (frontier first) and
    how its search ended; ``verdict`` is the one-line answer when nothing could be planned."""

    model: str
    objective: str
    screened: int = 0
    workloads: dict = dataclasses.field(default_factory=dict)
    verdict: str = ""
    screen_s: float = 0.0


def budgets(devices, gpus: int | None, usd_per_hour: float | None) -> dict[str, int]:
    """GPUs per device under the budget(s); 0 where the budget buys none."""
    if gpus is None and usd_per_hour is None:
        raise InputError("plan: give a GPU budget (--gpus N) or a price budget (--usd-per-hour X)")
    if gpus is not None and gpus < 1:
        raise InputError(f"--gpus {gpus} is not allowed; expected an integer >= 1")
    if usd_per_hour is not None and not usd_per_hour > 0:
        raise InputError(f"--usd-per-hour {usd_per_hour} is not allowed; expected a number > 0")
    out = {}
    for d in devices:
        n = gpus if gpus is not None else 1 << 20
        if usd_per_hour is not None:
            n = min(n, math.floor(usd_per_hour / get_device(d, "device").price_usd_per_gpu_hour + 1e-9))
        out[d] = min(n, 1024)
    return out


def plan(model: str, workloads: list[Workload], devices, gpus: int | None = None, usd_per_hour: float | None = None,
         fixed: dict | None = None, ttft_slo_s: float | None = None, tpot_slo_s: float | None = None,
         objective: str = "tokens_per_gpu", max_simulated: int = 16, time_budget_s: float = 240.0,
         stop: str = "calibrated", per_round: int = 4, progress=None) -> Plan:
    """Screen the space for every workload, simulate the survivors best first, return the frontier.

    Args:
      model: catalogue model.  workloads: serving workloads.  devices: catalogue devices.
      gpus, usd_per_hour: the budget (:func:`budgets`).  fixed: axis -> value(s) (:func:`make_space`).
      ttft_slo_s, tpot_slo_s: SLOs instead of each workload's (inf: none).
      objective, stop, max_simulated, time_budget_s, per_round: the search's (:mod:`sweepkit.plan.search`),
        the limits per workload.

    Returns:
      :class:`Plan`.
    """
    import time

    get_model(model)
    per_dev = budgets(devices, gpus, usd_per_hour)
    out = Plan(model, objective)
    usable = {d: n for d, n in per_dev.items() if n >= 1}
    if not usable:
        cheapest = min(devices, key=lambda d: get_device(d).price_usd_per_gpu_hour)
        out.verdict = (f"no plan: ${usd_per_hour:g}/h buys no GPU; the cheapest, {cheapest}, costs "
                       f"${get_device(cheapest).price_usd_per_gpu_hour:g} per GPU-hour")
        return out
    table = concat([enumerate_space(make_space(model, [d], n, fixed)) for d, n in usable.items()])
    if not table:
        out.verdict = f"no plan: no layout of {model} uses exactly the budget's GPUs ({usable}) with these choices"
        return out
    out.screened = len(table["tp"])
    t0 = time.perf_counter()
    screens = {w.name: run_screen(table, model, w, ttft_slo_s, tpot_slo_s) for w in workloads}
    out.screen_s = time.perf_counter() - t0
    price = np.array([get_device(d).price_usd_per_gpu_hour for d in table["device"]])
    for w in workloads:
        b = screens[w.name]
        if not b["fits"].any():
            out.verdict = _no_fit(model, table, usable)
            return out
        if not b["feasible"].any():
            out.verdict = _no_slo(w, table, b, ttft_slo_s, tpot_slo_s)
            return out
    for w in workloads:
        b = screens[w.name]
        res = run_search(table, b, model, w, objective, per_round, max_simulated, time_budget_s, stop, progress)
        obj = objective_of(b["tok_s_per_gpu"], price, objective)
        shown = res.simulated or [Simulated(int(i), math.nan, {}, float(obj[i]), math.nan)
                                  for i in order(b, obj)[:SCREEN_ROWS]]       # the screen alone: its best bounds
        out.workloads[w.name] = dict(feasible=int(b["feasible"].sum()), simulated=len(res.simulated),
                                     stopped=res.stopped, search_s=res.seconds,
                                     rows=frontier_rows(table, b, obj, shown, w.name))
        if res.simulated and not any(r["objective"] > 0 for r in out.workloads[w.name]["rows"]):
            out.verdict = (f"no plan for {w.name}: none of the {len(res.simulated)} simulated configurations "
                           f"meets its SLOs at any load (closest bound: row {res.simulated[0].row})"
                           if res.simulated else f"no plan for {w.name}")
    return out


def _no_fit(model: str, table: dict, usable: dict) -> str:
    """A model that fits nowhere: its weights against the roomiest layout's memory."""
    m = get_model(model)
    smallest = min(get_format(f).bytes_per_value for f in set(table["weight_format"]))
    best = max(usable, key=lambda d: get_device(d).hbm_capacity_bytes * usable[d])
    room = get_device(best).hbm_capacity_bytes * MEM_UTIL * usable[best]
    return (f"no plan: {model} does not fit: its weights take {m.resident_weight_bytes(smallest) / 1e9:,.0f} GB at "
            f"{smallest:g} byte(s) per value; the roomiest deployment, {usable[best]} x {best}, may use "
            f"{room / 1e9:,.0f} GB (with room for one request's KV): more GPUs or a smaller weight format")


def _no_slo(w: Workload, table: dict, b: dict, ttft_slo_s, tpot_slo_s) -> str:
    """SLOs no configuration's lower bounds meet: the configuration closest to meeting both."""
    ttft = w.ttft_slo_s if ttft_slo_s is None else ttft_slo_s
    tpot = w.tpot_slo_s if tpot_slo_s is None else tpot_slo_s
    miss = np.maximum(b["ttft_lb_s"] / ttft, b["tpot_lb_s"] / tpot)
    miss = np.where(b["fits"], miss, np.inf)
    i = int(np.argmin(miss))
    desc = ", ".join(f"{k}={table[k][i]}" for k in ("device", "mode", "instances", "tp", "pp", "dp", "ep",
                                                    "weight_format", "kv_format", "spec"))
    return (f"no plan for {w.name}: no configuration meets TTFT <= {ttft:g} s and TPOT <= {tpot * 1e3:g} ms; "
            f"the closest ({desc}) needs at least TTFT {b['ttft_lb_s'][i]:.3g} s and TPOT "
            f"{b['tpot_lb_s'][i] * 1e3:.3g} ms")
