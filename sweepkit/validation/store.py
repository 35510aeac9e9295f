"""Validation runs into the warehouse: the ``validation`` table (contract in sweepkit/store/schema.sql).

A run holds one row per measured point: the measurement, the cost model's value in the file's unit, the
error and whether the point is modelled. It commits atomically like every run (``Warehouse.write_run``).
"""

from __future__ import annotations

import hashlib
import json
import math

import pyarrow as pa

from sweepkit.catalogue.efficiency import Profile
from sweepkit.validation.levers import annotate_pairs
from sweepkit.validation.measurements import LATENCIES, PER_PASS, UNITS, Measurement
from sweepkit.validation.points import status
from sweepkit.validation.profiles import REFERENCE, row_profile, steady_row
from sweepkit.validation.serving_points import MODELLED, engine_profile
from sweepkit.validation.steady_rows import node_test
from sweepkit.validation.summary import model_class

SCHEMA = pa.schema([
    ("source", pa.string()), ("url", pa.string()), ("framework", pa.string()), ("device", pa.string()),
    ("model", pa.string()), ("tp", pa.int32()), ("gpus", pa.int32()), ("weight_format", pa.string()),
    ("kv_format", pa.string()), ("compute_format", pa.string()), ("batch", pa.int64()),
    ("context_tokens", pa.int64()), ("input_tokens", pa.int64()), ("output_tokens", pa.int64()),
    ("concurrency", pa.int64()), ("draft", pa.string()), ("gamma", pa.int32()), ("metric", pa.string()),
    ("unit", pa.string()), ("split", pa.string()), ("file_row", pa.int32()), ("setup", pa.string()),
    ("measured", pa.float64()), ("modelled", pa.float64()), ("error_pct", pa.float64()),
    ("status", pa.string()), ("measurements_file", pa.string()), ("measurements_sha256", pa.string()),
    ("devices_file", pa.string()), ("pp", pa.int32()), ("ep", pa.int32()), ("dp", pa.int32()),
    ("request_rate", pa.float64()), ("percentile", pa.string()), ("scenario", pa.string()), ("lever", pa.string()),
    ("pair_id", pa.string()), ("model_as_written", pa.string()), ("device_as_written", pa.string()),
    ("file", pa.string()), ("model_class", pa.string()), ("priced_by", pa.string()),
    ("lever_family", pa.string()), ("pair_status", pa.string()),
])
"""Columns of ``validation`` as written (the view adds ``run_id``)."""


def priced_by(m: Measurement, profile: Profile | str | None = None) -> str:
    """How ``m`` is priced: 'cost model' (a per-pass row), 'steady state: NAME' (:func:`sweepkit.validation.profiles.priced_by_profile`),
    'serving engine: NAME' (NAME the profile timing its passes, or 'reference'), '' when not modelled."""
    if status(m) != MODELLED:
        return ""
    if m.metric in PER_PASS:
        return "cost model"
    chosen = row_profile(m, profile)
    if chosen is not None and steady_row(m):
        return f"steady state: {chosen.name}"
    engine = engine_profile(m, profile)
    return f"serving engine: {REFERENCE if engine is None else engine.name}"


def in_unit(m: Measurement, value_si: float | None) -> float | None:
    """A base-SI value in ``m``'s unit (tok/s/gpu divides by the GPUs)."""
    if value_si is None:
        return None
    factor = UNITS[m.metric][m.unit]
    return value_si / (m.gpus if factor is None else factor)


NO_VALUE = "not modelled: the simulated run completed no request"
NOT_SIMULATED = "not simulated (--no-serving)"
NODE_TEST_NO_PROFILE = ("not modelled: a decode-only or prefill-only row is priced by the steady state under an "
                          "efficiency profile only")


def rows(points: list[Measurement], modelled_si: list[float | None], file: str, sha256: str,
         devices_file: str = "", serving: bool = True, profile=None) -> list[dict]:
    """One dict per point in :data:`SCHEMA`'s columns (error_pct = 100 (modelled / measured - 1)); a modelled
    point without a value gets the status NO_VALUE (NOT_SIMULATED when ``serving`` is False). ``priced_by``
    says how it was priced under ``profile`` (as given to ``evaluate_points``), and a lever pair's ``:with``
    row carries its ``lever_family`` and ``pair_status`` (:mod:`sweepkit.validation.levers`)."""
    out = []
    for m, v in zip(points, modelled_si):
        st = status(m)
        if st == "modelled" and v is None:
            st = NODE_TEST_NO_PROFILE if node_test(m) else NO_VALUE if serving else NOT_SIMULATED
        err = None if v is None else 100.0 * (v / m.value_si - 1.0)
        out.append(dict(
            source=m.source, url=m.url, framework=m.framework, device=m.device, model=m.model, tp=m.tp,
            gpus=m.gpus, weight_format=m.weight_format, kv_format=m.kv_format, compute_format=m.compute_format,
            batch=m.batch, context_tokens=m.context_tokens, input_tokens=m.input_tokens,
            output_tokens=m.output_tokens, concurrency=m.concurrency, draft=m.draft, gamma=m.gamma,
            metric=m.metric, unit=m.unit, split=m.split, file_row=m.row, setup=m.setup, measured=m.value,
            modelled=in_unit(m, v), error_pct=err, status=st, measurements_file=file,
            measurements_sha256=sha256, devices_file=devices_file, pp=m.pp, ep=m.ep, dp=m.dp,
            request_rate=m.request_rate, percentile=m.percentile if m.metric in LATENCIES else None,
            scenario=m.scenario, lever=m.lever, pair_id=m.pair_id, model_as_written=m.model_as_written,
            device_as_written=m.device_as_written, file=m.file, model_class=model_class(m.model),
            priced_by=priced_by(m, profile) if v is not None else ""))
    annotate_pairs(points, out)
    return out


def median_abs_error(table: list[dict]) -> dict[str, tuple[float | None, int, int]]:
    """Per source: (median |error_pct| over modelled points or None, points modelled, points not modelled)."""
    out: dict[str, tuple[float | None, int, int]] = {}
    for src in dict.fromkeys(r["source"] for r in table):
        errs = sorted(abs(r["error_pct"]) for r in table if r["source"] == src and r["error_pct"] is not None)
        n = sum(1 for r in table if r["source"] == src)
        mid = len(errs) // 2
        med = None if not errs else (errs[mid] if len(errs) % 2 else 0.5 * (errs[mid - 1] + errs[mid]))
        out[src] = (med, len(errs), n - len(errs))
    return out


def run_toml(file: str, sha256: str, devices_file: str) -> str:
    """The run's inputs as TOML text (stored as the run's grid text; its SHA-256 is the grid hash)."""
    return ("# sweepkit validation run\nname = \"validation\"\n\n[validation]\n"
            f"measurements_file = {json.dumps(file)}\nmeasurements_sha256 = {json.dumps(sha256)}\n"
            f"devices_file = {json.dumps(devices_file)}\n")


def write_validation(warehouse, table: list[dict], file: str, sha256: str, devices_file: str = "") -> str:
    """Commit ``table`` (from :func:`rows`) as one ``validation`` run; returns its run id."""
    clean = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
             for r in table]
    batch = pa.RecordBatch.from_pylist(clean, schema=SCHEMA)
    text = run_toml(file, sha256, devices_file)
    return warehouse.write_run(kind="validation", grid_name="validation", grid_toml=text,
                               grid_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                               tables={"validation": iter([batch])})
