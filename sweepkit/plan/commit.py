"""A plan into the warehouse: one ``plan`` run whose ``plan`` table holds every simulated configuration
(the ``contract_plan`` columns of sweepkit/store/schema.sql), read through the ``v_plan`` feed view and
``queries/plan_frontier.sql``."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa

from sweepkit.store import Warehouse

COLUMNS = {
    "model": pa.string(), "workload": pa.string(), "objective_name": pa.string(), "frontier": pa.bool_(),
    "device": pa.string(), "gpus": pa.int32(), "mode": pa.string(), "instances": pa.int32(), "tp": pa.int32(),
    "pp": pa.int32(), "prefill_instances": pa.int32(), "prefill_tp": pa.int32(), "batching": pa.string(),
    "token_budget": pa.int32(), "batch_cap": pa.int32(), "kv": pa.string(), "weight_format": pa.string(),
    "kv_format": pa.string(), "spec": pa.string(), "objective": pa.float64(), "bound": pa.float64(),
    "capacity_per_s": pa.float64(), "tokens_per_gpu_per_s": pa.float64(), "goodput_per_gpu_per_s": pa.float64(),
    "ttft_p99_s": pa.float64(), "tpot_p99_s": pa.float64(), "cost_per_mtok_usd": pa.float64(),
    "energy_per_token_j": pa.float64(), "ttft_lb_s": pa.float64(), "tpot_lb_s": pa.float64(),
    "contributions": pa.string(), "lever_toml": pa.string(), "dp": pa.int32(), "ep": pa.int32(),
}
RENAME = {"output_tok_s_per_gpu": "tokens_per_gpu_per_s", "goodput_req_s_per_gpu": "goodput_per_gpu_per_s",
          "usd_per_mtok": "cost_per_mtok_usd"}


def plan_table(plan) -> pa.Table:
    """The simulated rows of a :class:`~sweepkit.plan.api.Plan` as the ``plan`` table (columns of
    :data:`COLUMNS`); the screen-only rows of a plan that simulated nothing are left out."""
    rows = []
    for w in plan.workloads.values():
        for r in w["rows"]:
            if r["capacity_per_s"] != r["capacity_per_s"]:       # NaN: a screen-only row
                continue
            row = {RENAME.get(k, k): v for k, v in r.items()}
            row.update(model=plan.model, objective_name=plan.objective,
                       contributions=json.dumps(r["contributions"], sort_keys=True))
            rows.append({k: row.get(k) for k in COLUMNS})
    return pa.Table.from_pylist(rows, schema=pa.schema(COLUMNS))


def commit_plan(wh: Warehouse, plan, request_toml: str, on_wait=None) -> str | None:
    """Commit the plan's simulated rows as a run of kind ``plan`` (its request as the run's grid text);
    None when nothing was simulated.

    Args:
      wh: the warehouse.  plan: the plan.  request_toml: the inputs that made it, as TOML text.
    """
    table = plan_table(plan)
    if table.num_rows == 0:
        return None
    sha = hashlib.sha256(request_toml.encode()).hexdigest()
    return wh.write_run(kind="plan", grid_name=f"plan {plan.model}", grid_toml=request_toml, grid_sha256=sha,
                        tables={"plan": iter(table.to_batches())}, on_wait=on_wait)
