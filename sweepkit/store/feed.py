"""The stable feed: ``v_decode``, ``v_serving``, ``v_capacity``, ``v_matrix``, ``v_validation_pairs``,
``v_plan``, views whose columns are a promise.

Dashboards read these views (or ``sweepkit export``), never the raw tables: a raw table may gain, rename or
retype columns between releases, a ``v_`` view keeps every column below, with its name, type and meaning,
in this order. New columns are only ever appended. docs/dashboards.md documents them (a test keeps the two
in step, and pins names and types).

Each view is created with the warehouse's other views (``sweepkit.store.db.create_views`` calls
:func:`create_feed_views`). Where its source is missing or does not bind (no serving run yet, or a source
table whose columns changed), the view is created EMPTY with the promised columns and types, so a dashboard
query never fails on a missing column: it sees no rows. A source is test-bound on a scratch in-memory
database holding empty copies of the tables, so a failing view never aborts the caller's transaction.

``v_matrix`` is the output of ``queries/matrix.sql`` over the latest serving run, ``v_validation_pairs``
that of ``queries/validation_pairs.sql`` over the latest validation run (their header defaults are
inlined as literals, since a view takes no parameters).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import duckdb

from sweepkit.store.sqltext import macros_sql, sql_str


@dataclass(frozen=True)
class Column:
    """A promised column: name, DuckDB type, the SQL expression over the source, meaning (unit first)."""

    name: str
    type: str
    expr: str
    doc: str


def _c(name: str, type_: str, doc: str, expr: str | None = None) -> Column:
    return Column(name, type_, expr or name, doc)


FEED: dict[str, tuple[str, list[Column]]] = {
    "v_decode": ("decode d join runs r using (run_id)", [
        _c("run_id", "VARCHAR", "run id (runs.run_id)", "d.run_id"),
        _c("grid_name", "VARCHAR", "the grid's name field", "r.grid_name"),
        _c("run_ended_at", "TIMESTAMP WITH TIME ZONE", "when the run committed (UTC)", "r.ended_at"),
        _c("device", "VARCHAR", "accelerator, catalogue name"),
        _c("model", "VARCHAR", "target model, catalogue name"),
        _c("draft", "VARCHAR", "none, mtp or a draft model"),
        _c("tp", "INTEGER", "tensor-parallel degree"),
        _c("weight_format", "VARCHAR", "weight storage format"),
        _c("kv_format", "VARCHAR", "KV-cache storage format"),
        _c("compute_format", "VARCHAR", "compute format"),
        _c("batch", "BIGINT", "rows decoded together"),
        _c("context", "BIGINT", "tokens cached per row"),
        _c("gamma", "INTEGER", "drafted tokens per verify pass"),
        _c("alpha", "DOUBLE", "acceptance per drafted token (assumed)"),
        _c("tokens_per_pass", "DOUBLE", "expected tokens per verify pass (1 without a draft)"),
        _c("s_per_token_plain", "DOUBLE", "s per output token, plain decoding"),
        _c("s_per_token_spec", "DOUBLE", "s per output token, speculative decoding"),
        _c("speedup", "DOUBLE", "x, s_per_token_plain / s_per_token_spec (below 1 speculation loses)"),
        _c("plain_bound", "VARCHAR", "memory | compute | power: what limits the plain pass"),
        _c("verify_bound", "VARCHAR", "memory | compute | power: what limits the verify pass"),
        _c("energy_per_token_plain_j", "DOUBLE", "J per output token, plain"),
        _c("energy_per_token_spec_j", "DOUBLE", "J per output token, speculative"),
        _c("kv_capacity_tokens", "DOUBLE", "tokens of KV the instance holds"),
        _c("fits_in_memory", "BOOLEAN", "the point's weights and KV fit in HBM"),
    ]),
    "v_serving": ("serving", [
        _c("run_id", "VARCHAR", "run id (runs.run_id)"),
        _c("device", "VARCHAR", "accelerator, catalogue name"),
        _c("lever", "VARCHAR", "lever name (baseline = none applied)"),
        _c("workload", "VARCHAR", "workload name"),
        _c("load_per_s", "DOUBLE", "1/s, offered load (sessions or requests per second)"),
        _c("requests", "BIGINT", "requests measured"),
        _c("slo_attainment", "DOUBLE", "share of measured requests meeting both SLOs, 0..1"),
        _c("ttft_p50_s", "DOUBLE", "s, median time to first token"),
        _c("ttft_p99_s", "DOUBLE", "s, 99th percentile time to first token"),
        _c("tpot_p50_s", "DOUBLE", "s, median time per output token"),
        _c("tpot_p99_s", "DOUBLE", "s, 99th percentile time per output token"),
        _c("itl_p50_s", "DOUBLE", "s, median inter-token latency"),
        _c("itl_p99_s", "DOUBLE", "s, 99th percentile inter-token latency"),
        _c("energy_per_token_j", "DOUBLE", "J per output token, idle power included"),
    ]),
    "v_capacity": ("capacity", [
        _c("run_id", "VARCHAR", "run id (runs.run_id)"),
        _c("device", "VARCHAR", "accelerator, catalogue name"),
        _c("lever", "VARCHAR", "lever name"),
        _c("workload", "VARCHAR", "workload name"),
        _c("capacity_per_s", "DOUBLE", "1/s, highest load meeting the SLO target (90% of requests)"),
        _c("goodput_per_gpu_per_s", "DOUBLE", "1/s per GPU: arrival rate of the measured window at capacity (>= 90% of requests meet both SLOs) / GPUs"),
        _c("tokens_per_gpu_per_s", "DOUBLE", "output tokens/s per GPU at capacity"),
        _c("cost_per_mtok_usd", "DOUBLE", "USD per million output tokens at capacity (illustrative prices)"),
        _c("energy_per_token_j", "DOUBLE", "J per output token at capacity"),
    ]),
    "v_matrix": ("({matrix})", [
        _c("device", "VARCHAR", "accelerator, catalogue name"),
        _c("lever", "VARCHAR", "lever name"),
        _c("workload", "VARCHAR", "workload name"),
        _c("metric", "VARCHAR", "goodput | cost_per_mtok | energy_per_token | ttft_p99 | tpot_p99 | itl_p99"),
        _c("baseline_value", "DOUBLE", "the baseline's value (metric's unit)"),
        _c("lever_value", "DOUBLE", "the lever's value (metric's unit)"),
        _c("change_pct", "DOUBLE", "%, (lever - baseline) / baseline x 100"),
        _c("verdict", "VARCHAR", "better | worse | same (within +-2%)"),
        _c("caveats", "VARCHAR", "caveat marks, e.g. E (baseline at a cliff), $ (illustrative price), α (assumed)"),
        _c("draws", "BIGINT", "draws of the run's [serving.bands] compared (null without bands)"),
        _c("share_better", "DOUBLE",
           "share of draws in which the lever is better than the baseline, 0..1 (null without bands)"),
        _c("share_worse", "DOUBLE", "share of draws in which the lever is worse, 0..1 (null without bands)"),
        _c("share_same", "DOUBLE", "share of draws within +-2%, 0..1 (null without bands)"),
        _c("change_p10", "DOUBLE",
           "%, 10th percentile of the draws' change from the baseline (null without bands)"),
        _c("change_p50", "DOUBLE", "%, median of the draws' change from the baseline (null without bands)"),
        _c("change_p90", "DOUBLE",
           "%, 90th percentile of the draws' change from the baseline (null without bands)"),
        _c("verdict_text", "VARCHAR",
           "the verdict with the share of draws agreeing, e.g. better (94%); the verdict alone without bands"),
    ]),
    "v_validation_pairs": ("({validation_pairs})", [
        _c("pair_id", "VARCHAR", "measured pair id (the measurement file's pair_id)"),
        _c("lever", "VARCHAR", "the lever, without its :with / :without suffix"),
        _c("lever_family", "VARCHAR",
           "what the pair changes: framework, layout, kv format, weight format, scheduler, async scheduling, "
           "speculative, prefix caching (joined by +)"),
        _c("pair_status", "VARCHAR", "expressed, or not expressed: which part the model cannot price and why"),
        _c("source", "VARCHAR", "where the measurement was published"),
        _c("metric", "VARCHAR", "measured metric (docs/validation.md)"),
        _c("statistic", "VARCHAR", "mean | 50 | 90 | 99 (null for throughputs)"),
        _c("unit", "VARCHAR", "unit of the four values"),
        _c("measured_without", "DOUBLE", "measured value without the lever (unit)"),
        _c("measured_with", "DOUBLE", "measured value with the lever (unit)"),
        _c("modelled_without", "DOUBLE", "modelled value without the lever (unit; null when not modelled)"),
        _c("modelled_with", "DOUBLE", "modelled value with the lever (unit; null when not modelled)"),
        _c("measured_change_pct", "DOUBLE", "%, 100 x (measured_with / measured_without - 1)"),
        _c("predicted_change_pct", "DOUBLE",
           "%, 100 x (modelled_with / modelled_without - 1); null when the pair is not expressed"),
        _c("size_error_pct", "DOUBLE",
           "percentage points, predicted_change_pct - measured_change_pct; null when not expressed"),
        _c("sign_agrees", "BOOLEAN",
           "whether measured and predicted changes share a sign (null: not expressed or its change within +-5%)"),
    ]),
    "v_plan": ("plan", [
        _c("run_id", "VARCHAR", "run id (runs.run_id, kind plan)"),
        _c("model", "VARCHAR", "served model, catalogue name"),
        _c("workload", "VARCHAR", "workload name"),
        _c("frontier", "BOOLEAN", "on the Pareto frontier of (objective, TTFT p99, TPOT p99) of the run's simulated configurations"),
        _c("device", "VARCHAR", "accelerator, catalogue name"),
        _c("gpus", "INTEGER", "GPUs of the deployment"),
        _c("mode", "VARCHAR", "colocated | disagg"),
        _c("instances", "INTEGER", "instances (the decode pool when disaggregated)"),
        _c("tp", "INTEGER", "tensor-parallel degree of an instance"),
        _c("pp", "INTEGER", "pipeline-parallel degree of an instance"),
        _c("prefill_instances", "INTEGER", "prefill-pool instances (0 colocated)"),
        _c("prefill_tp", "INTEGER", "tensor-parallel degree of a prefill-pool instance"),
        _c("batching", "VARCHAR", "prefill-priority | decode-priority | chunked"),
        _c("token_budget", "INTEGER", "tokens, prompt tokens per step"),
        _c("batch_cap", "INTEGER", "rows, running requests per instance"),
        _c("kv", "VARCHAR", "reserved | paged | paged+prefix"),
        _c("weight_format", "VARCHAR", "weight (and compute) format"),
        _c("kv_format", "VARCHAR", "KV-cache format"),
        _c("spec", "VARCHAR", "none | DRAFT:GAMMA"),
        _c("tokens_per_gpu_per_s", "DOUBLE", "output tokens/s per GPU at capacity"),
        _c("ttft_p99_s", "DOUBLE", "s, 99th percentile time to first token at capacity"),
        _c("tpot_p99_s", "DOUBLE", "s, 99th percentile time per output token at capacity"),
        _c("cost_per_mtok_usd", "DOUBLE", "USD per million output tokens at capacity (illustrative prices)"),
        _c("energy_per_token_j", "DOUBLE", "J per output token at capacity"),
        _c("bound", "DOUBLE", "the screen's upper bound of the plan's objective"),
        _c("contributions", "VARCHAR", "JSON: lever axis -> bound ratio against that axis at the baseline value"),
        _c("lever_toml", "VARCHAR", "the configuration as a [levers.<name>] table for sweepkit simulate"),
        _c("dp", "INTEGER", "attention data-parallel ranks of an instance (1: tensor parallelism alone)"),
        _c("ep", "INTEGER", "expert-parallel ranks of an instance (1: none; tp x dp where dp > 1)"),
    ]),
}
"""View name -> (source FROM clause, promised columns)."""

_PARAM = re.compile(r"\$(\w+)\b")


def matrix_source(name: str = "matrix") -> str | None:
    """``queries/<name>.sql`` with its header defaults inlined as SQL literals; None without the file."""
    from sweepkit.errors import InputError
    from sweepkit.store.queries import load_query

    try:
        q = load_query(name)
    except InputError:
        return None
    values = q.bind()

    def literal(m: re.Match) -> str:
        if m.group(1) not in values:
            return m.group(0)
        v = values[m.group(1)]
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        return sql_str(str(v))

    body = "\n".join(line for line in q.sql.splitlines() if not line.strip().startswith("--"))
    return _PARAM.sub(literal, body).strip().rstrip(";")


def view_body(name: str, source: str | None) -> str:
    """``select <promised columns> from <source>``; with ``source=None`` the empty typed shell."""
    _, cols = FEED[name]
    if source is None:
        return "select " + ", ".join(f"null::{c.type} as {c.name}" for c in cols) + " where false"
    return "select " + ", ".join(f"({c.expr})::{c.type} as {c.name}" for c in cols) + f" from {source}"


def _binds(con: duckdb.DuckDBPyConnection, body: str) -> bool:
    """Whether ``body`` binds against empty copies of ``con``'s tables and views (no error raised in con)."""
    rows = con.execute(
        "select database_name, table_name, column_name, data_type from duckdb_columns() "
        "where schema_name = 'main' and table_name not like 'v\\_%' escape '\\' "
        "order by database_name = 'temp' desc, table_name, column_index").fetchall()
    tables: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    for db, table, column, type_ in rows:        # a temp view shadows the persistent one of the same name
        if owner.setdefault(table, db) == db:
            tables.setdefault(table, []).append(f'"{column}" {type_}')
    scratch = duckdb.connect()
    try:
        for table, cols in tables.items():
            scratch.execute(f'create table "{table}" ({", ".join(cols)})')
        scratch.execute(macros_sql())
        scratch.execute(f"describe {body}")
        return True
    except duckdb.Error:
        return False
    finally:
        scratch.close()


def feed_digest(schema: str) -> str:
    """sha256 of every feed view's candidate definition and column docs, and of the schema they bind to."""
    h = hashlib.sha256(schema.encode())
    for name, (source, cols) in FEED.items():
        for query in ("matrix", "validation_pairs"):
            if "{" + query + "}" in source:
                source = source.replace("{" + query + "}", matrix_source(query) or "<none>")
        h.update(repr((name, source, [(c.name, c.type, c.doc, c.expr) for c in cols])).encode())
    return h.hexdigest()


def create_feed_views(con: duckdb.DuckDBPyConnection, *, temp: bool) -> list[str]:
    """(Re)create every feed view on ``con``: over its source where it binds, else empty; returns the names."""
    kind = "temp view" if temp else "view"
    for name, (source, cols) in FEED.items():
        for query in ("matrix", "validation_pairs"):
            if "{" + query + "}" in source:
                m = matrix_source(query)
                source = None if m is None else source.replace("{" + query + "}", m)
        body = view_body(name, source) if source is not None else None
        if body is None or not _binds(con, body):
            body = view_body(name, None)
        con.execute(f"create or replace {kind} {name} as {body}")
        if not temp:
            for c in cols:
                con.execute(f"comment on column {name}.{c.name} is {sql_str(c.doc)}")
    return list(FEED)
