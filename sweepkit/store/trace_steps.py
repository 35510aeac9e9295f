"""Mechanism traces into the warehouse: the ``trace_steps`` table (contract in sweepkit/store/schema.sql).

A trace run holds both modes of one :class:`~sweepkit.trace.scheduler.Scenario` (``plain``, then
``speculative``); ``queries/trace_summary.sql`` turns it into tokens per pass and TTFT/TPOT p99.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pyarrow as pa

from sweepkit.trace.scheduler import Scenario, run_mode

SCHEMA = pa.schema([
    ("mode", pa.string()), ("device", pa.string()), ("model", pa.string()), ("draft", pa.string()),
    ("gamma", pa.int32()), ("alpha", pa.float64()), ("seed", pa.int64()),
    ("pass_index", pa.int32()), ("pass_kind", pa.string()), ("request", pa.int32()),
    ("prompt_tokens", pa.int32()), ("output_tokens", pa.int32()), ("arrival_s", pa.float64()),
    ("batch", pa.int32()), ("context_tokens", pa.int64()), ("drafted_tokens", pa.int32()),
    ("accepted_tokens", pa.int32()), ("rejected_tokens", pa.int32()), ("emitted_tokens", pa.int32()),
    ("target_token", pa.string()), ("tokens_done", pa.int32()), ("start_s", pa.float64()),
    ("verify_start_s", pa.float64()), ("end_s", pa.float64()), ("bound", pa.string()),
    ("pass_energy_j", pa.float64()),
])
"""Columns of ``trace_steps`` as written (the view adds ``run_id``)."""


def scenario_toml(sc: Scenario) -> str:
    """The scenario as TOML text (stored as the run's grid text; its SHA-256 is the grid hash)."""
    lines = ["# sweepkit trace scenario", 'name = "trace"', "", "[scenario]"]
    for key, value in dataclasses.asdict(sc).items():
        if value is None:
            continue
        if isinstance(value, tuple):
            value = list(value)
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def trace_batch(sc: Scenario, speculative: bool) -> pa.RecordBatch:
    """One mode of the scenario as a record batch in :data:`SCHEMA`'s column order."""
    cols = run_mode(sc, speculative)
    n = len(cols["request"])
    const = {"mode": "speculative" if speculative else "plain", "device": sc.device, "model": sc.model,
             "draft": sc.draft if speculative else "none", "gamma": sc.gamma if speculative else 0,
             "alpha": sc.alpha, "seed": sc.seed}
    arrays = []
    for field in SCHEMA:
        values = np.full(n, const[field.name], dtype=object) if field.name in const else cols[field.name]
        arrays.append(pa.array(list(values) if values.dtype == object else values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def write_trace(warehouse, sc: Scenario) -> str:
    """Run both modes and commit them as one ``trace`` run; returns its run id."""
    sc = sc.checked()
    text = scenario_toml(sc)
    batches = (trace_batch(sc, spec) for spec in (False, True))
    return warehouse.write_run(kind="trace", grid_name="trace", grid_toml=text,
                               grid_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                               tables={"trace_steps": batches})
