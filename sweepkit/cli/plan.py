"""``sweepkit plan``: the deployment to run for a model, workloads, SLOs and a GPU or price budget."""

from __future__ import annotations

import json
import sys

import click

from sweepkit.cli.common import (
    emit,
    format_option,
    note,
    open_warehouse,
    warehouse_option,
)
from sweepkit.errors import InputError

COLUMNS = ("workload", "frontier", "objective", "bound", "device", "gpus", "mode", "instances", "tp", "pp", "dp",
           "ep", "prefill_instances", "prefill_tp", "batching", "token_budget", "batch_cap", "kv", "weight_format",
           "kv_format", "spec", "output_tok_s_per_gpu", "ttft_p99_s", "tpot_p99_s", "usd_per_mtok",
           "energy_per_token_j", "capacity_per_s", "contributions")


def _fixed(pairs: tuple[str, ...]) -> dict:
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not value:
            raise InputError(f"--fix {p!r} is not allowed; expected AXIS=VALUE[,VALUE...] (e.g. tp=4,8)")
        out[key.strip()] = tuple(v.strip() for v in value.split(","))
    return out


def _request_toml(**fields) -> str:
    """The plan's inputs as TOML (the run's grid text: what the plan was asked)."""
    lines = ["[plan]"]
    for k, v in fields.items():
        if v is not None:
            lines.append(f"{k} = {json.dumps(v)}")
    return "\n".join(lines) + "\n"


@click.command("plan")
@click.option("--model", required=True, help="Catalogue model (sweepkit models) or a path to an HF config.json.")
@click.option("--workload", "workloads", multiple=True, default=("chat",), show_default=True,
              help="Serving workload (repeatable): chat, coding-agent, offline-batch, long-context-rag, realtime-voice.")
@click.option("--workloads-file", type=click.Path(dir_okay=False), default=None,
              help="A workloads TOML file (default: the packaged workloads).")
@click.option("--device", "devices", multiple=True, default=("H100",), show_default=True,
              help="Catalogue device (repeatable).")
@click.option("--gpus", type=int, default=None, help="GPUs per deployment.")
@click.option("--usd-per-hour", type=float, default=None, help="Price budget: the GPUs it buys of each device.")
@click.option("--ttft", "ttft_slo_s", type=float, default=None, help="TTFT p99 SLO, s (default: the workload's).")
@click.option("--tpot", "tpot_slo_s", type=float, default=None, help="TPOT p99 SLO, s (default: the workload's).")
@click.option("--fix", "fix", multiple=True, help="Fixed choice AXIS=VALUE[,VALUE] (repeatable): tp, pp, dp, ep, mode, "
              "prefill_tp, batching, token_budget, batch_cap, kv, weight_format, kv_format, spec.")
@click.option("--objective", type=click.Choice(["tokens_per_gpu", "tokens_per_usd"]), default="tokens_per_gpu",
              show_default=True, help="What the frontier maximizes.")
@click.option("--max-simulated", type=click.IntRange(0, 10_000), default=8, show_default=True,
              help="Most configurations simulated per workload (0: the screen alone).")
@click.option("--time-budget", "time_budget_s", type=click.FloatRange(0), default=240.0, show_default=True,
              help="Seconds of simulation per workload.")
@click.option("--stop", type=click.Choice(["calibrated", "bound"]), default="calibrated", show_default=True,
              help="Early-stop rule of the search (docs/plan.md).")
@click.option("--levers", "levers_out", type=click.Path(dir_okay=False), default=None,
              help="Write the frontier as a `sweepkit simulate` levers TOML file here.")
@click.option("--serve-dir", "serve_dir", type=click.Path(file_okay=False), default=None,
              help="Write cluster.toml and levers.toml for `sweepkit serve` here and add each frontier point's "
                   "what-if page address (column whatif).")
@click.option("--commit/--no-commit", default=True, show_default=True,
              help="Commit the simulated configurations to the warehouse (a run of kind plan; view v_plan).")
@warehouse_option
@format_option
def plan(model, workloads, workloads_file, devices, gpus, usd_per_hour, ttft_slo_s, tpot_slo_s, fix, objective,
         max_simulated, time_budget_s, stop, levers_out, serve_dir, commit, warehouse, fmt):
    """Search layouts, batching, KV, formats and speculation for the best deployment under SLOs.

    An analytic screen bounds every configuration (memory fit, TTFT and TPOT lower bounds, a capacity upper
    bound); the serving engine's capacity search then simulates the best bounds first until none left can
    beat the best simulated. Prints the simulated configurations, the Pareto frontier first (objective vs
    TTFT/TPOT p99), with $/M tokens, J/token and each lever's analytic contribution. When nothing can be
    planned (a budget that buys no GPU, a model that fits nowhere, SLOs no configuration meets) it prints one
    line saying so and the closest configuration, and exits with status 1.

    \b
    Example: sweepkit plan --model llama-3.2-1b --workload realtime-voice --device H100 --gpus 1 --fix tp=1 --fix kv=paged --fix weight_format=bf16 --fix kv_format=bf16 --fix spec=none --fix batching=chunked --fix batch_cap=64 --fix token_budget=2048 --max-simulated 1
    """
    import pyarrow as pa

    from sweepkit.plan.api import plan as run_plan
    from sweepkit.serving.workloads import get_workload

    ws = [get_workload(w, workloads_file) for w in workloads]
    res = run_plan(model, ws, devices, gpus, usd_per_hour, _fixed(fix), ttft_slo_s, tpot_slo_s, objective,
                   max_simulated, time_budget_s, stop, progress=note)
    if res.verdict:
        click.echo(res.verdict)
        sys.exit(1)
    rows = [r for w in res.workloads.values() for r in w["rows"]]
    for name, w in res.workloads.items():
        note(f"{name}: screened {res.screened:,} configurations in {res.screen_s:.2f} s, {w['feasible']:,} "
             f"feasible, simulated {w['simulated']} in {w['search_s']:.0f} s (stopped: {w['stopped']})")
    columns = COLUMNS
    if serve_dir:
        from sweepkit.plan.links import serve_files

        links = serve_files(res, serve_dir)
        columns = (*COLUMNS, "whatif")
        for r in rows:
            r["whatif"] = links.get(f"plan-{r['workload']}-{r['row']}", "")
        extra = f" --workloads {workloads_file}" if workloads_file else ""
        note(f"what-if page of the frontier: sweepkit serve --cluster {serve_dir}/cluster.toml --levers "
             f"{serve_dir}/levers.toml{extra}, then open the whatif column's address")
    table = pa.Table.from_pylist([{k: (json.dumps(r[k]) if k == "contributions" else r[k]) for k in columns}
                                  for r in rows]) if rows else pa.table({k: [] for k in columns})
    emit(table, fmt, title=f"Plan for {model} ({objective}; frontier first)")
    if commit and any(w["simulated"] for w in res.workloads.values()):
        from sweepkit.plan.commit import commit_plan

        request = _request_toml(model=model, workloads=list(workloads), devices=list(devices), gpus=gpus,
                                usd_per_hour=usd_per_hour, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s,
                                fix=list(fix), objective=objective, max_simulated=max_simulated, stop=stop)
        run_id = commit_plan(open_warehouse(warehouse), res, request, on_wait=note)
        note(f"run {run_id}: the plan's simulated configurations (sweepkit query plan_frontier)")
    if levers_out:
        with open(levers_out, "w", encoding="utf-8") as f:
            f.write("\n\n".join(r["lever_toml"] for r in rows if r["frontier"]) + "\n")
        note(f"wrote the frontier's levers to {levers_out}")
