"""Measured points as data: the CSV format, the packaged public set, and row checks with one-line errors.

A measurement file is a CSV with a header row. Required columns: ``source``, ``device``, ``model``,
``metric``, ``value``, ``unit``. Optional: ``url``, ``framework``, ``tp`` (default 1), ``gpus`` (default tp),
``weight_format``, ``kv_format``, ``compute_format`` (default bf16; a quantised checkpoint's name, such as
``nvidia/Llama-3.3-70B-Instruct-FP4``, sets the weight format a row leaves blank, the compute format too on a
device that computes in it natively, and an ``-FP8-KV`` one the KV format:
:func:`sweepkit.catalogue.aliases.checkpoint_format`), ``batch``, ``context_tokens``,
``input_tokens``, ``output_tokens``, ``requests`` (requests in the benchmark run), ``concurrency``,
``request_rate`` (requests/s, Poisson arrivals),
``percentile`` (of a latency: mean, 50, 90 or 99, default 50), ``ttft_limit_s`` and ``tpot_limit_s`` (p99 limits
a throughput was measured under), ``draft`` (default none), ``gamma``, ``split`` (``train``, ``test`` or
``check``: an independent check, never fitted, not even with ``--all-rows``; default test), ``notes``, ``pp``,
``ep``, ``dp`` (pipeline, expert and data parallel degrees, default 1; a row stating ``gpus`` and none of
``tp``, ``pp``, ``ep``, ``dp`` runs the smallest power-of-two tp that holds the weights:
:mod:`sweepkit.validation.assumed_tp`), ``scenario``
(the benchmark's load, as the source words it), ``lever`` and ``pair_id`` (a lever ending ``:with`` or
``:without``; rows of one measured pair share a ``pair_id``, several separated by ``;``).
docs/validation.md describes every column.

Models and devices are resolved to catalogue names by sweepkit.validation.aliases (Hugging Face ids, device
marketing names); a row naming a model or device the catalogue lacks is kept and listed as not modelled.

Metrics (value in one of the units listed; stored in base SI units, seconds and tokens/s):

    step_time              one decode step of ``batch`` rows, ``context_tokens`` cached per row   s, ms, us
    decode_tok_s           output tokens/s of a decode step at ``batch`` rows (all rows)         tok/s
    max_output_throughput  output tokens/s with every request queued at once                     tok/s, tok/s/gpu
    output_throughput      output tokens/s under a load scenario                                  tok/s, tok/s/gpu
    total_throughput       input + output tokens/s under a load scenario                          tok/s, tok/s/gpu
    ttft, tpot, itl        latency at ``request_rate`` or ``concurrency``                        s, ms, us
    e2e_latency            request latency (arrival to last token) at that load                   s, ms, us
    speedup                a lever's published speed-up (listed; pairs of rows are what is priced) x

``request_rate`` may be ``inf``: every request arrives at t = 0 (a burst, as ``vllm bench serve`` runs it).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
from importlib import resources
from pathlib import Path

from sweepkit.catalogue import get_draft, get_format, get_model
from sweepkit.catalogue.aliases import checkpoint_format, checkpoint_kv_format
from sweepkit.errors import InputError, bad_value
from sweepkit.validation.aliases import device_name, model_name
from sweepkit.validation.assumed_tp import assumed_tp
from sweepkit.validation.cells import (PERCENTILES, cell_float, cell_int, cell_name, cell_percentile,  # noqa: F401
                                       cell_rate, cell_value, get_device_known, get_model_known, native)

REQUIRED = ("source", "device", "model", "metric", "value", "unit")
OPTIONAL = ("url", "framework", "tp", "gpus", "weight_format", "kv_format", "compute_format", "batch",
            "context_tokens", "input_tokens", "output_tokens", "requests", "concurrency", "request_rate", "percentile",
            "ttft_limit_s", "tpot_limit_s", "draft", "gamma", "split", "notes", "pp", "ep", "dp", "scenario", "lever",
            "pair_id")
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
RATE_UNITS = {"tok/s": 1.0, "tok/s/gpu": None}
UNITS = {"step_time": TIME_UNITS, "decode_tok_s": {"tok/s": 1.0}, "max_output_throughput": RATE_UNITS,
         "output_throughput": RATE_UNITS, "total_throughput": RATE_UNITS, "ttft": TIME_UNITS, "tpot": TIME_UNITS,
         "itl": TIME_UNITS, "e2e_latency": TIME_UNITS, "speedup": {"x": 1.0}}
"""Metric -> unit -> factor to base SI (None: per GPU, multiplied by ``gpus``)."""
PER_PASS = ("step_time", "decode_tok_s")
"""Metrics the cost model evaluates directly (one decode step at the measured batch)."""
SERVING = ("max_output_throughput", "output_throughput", "total_throughput", "ttft", "tpot", "itl", "e2e_latency")
"""Metrics the serving engine evaluates (a simulated run at the measured load)."""
LATENCIES = ("ttft", "tpot", "itl", "e2e_latency")
"""Metrics that are a latency statistic (``percentile``)."""
SPLITS = ("train", "test", "check")
"""``check``: an independent check, reported but never fitted on, whatever the fit's flags."""
PUBLIC = "public.csv"
CORPUS = "measured.csv"
"""The packaged measured corpus (built by benchmarks/data/build_measured.py); loaded with PUBLIC by default."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One measured point (value_si in s or tokens/s; row = 1-based data row of its file)."""

    source: str
    device: str
    model: str
    metric: str
    value: float
    unit: str
    value_si: float
    row: int
    url: str = ""
    framework: str = ""
    tp: int = 1
    gpus: int = 1
    weight_format: str = "bf16"
    kv_format: str = "bf16"
    compute_format: str = "bf16"
    batch: int | None = None
    context_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    requests: int | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    percentile: str = "50"
    ttft_limit_s: float | None = None
    tpot_limit_s: float | None = None
    draft: str = "none"
    gamma: int | None = None
    split: str = "test"
    notes: str = ""
    pp: int = 1
    ep: int = 1
    dp: int = 1
    scenario: str = ""
    lever: str = ""
    pair_id: str = ""
    model_as_written: str = ""
    device_as_written: str = ""
    file: str = ""

    @property
    def unknown(self) -> str:
        """'' when the catalogue knows the model and device, else 'unknown model X' / 'unknown device X'."""
        if get_model_known(self.model) is None:
            return f"unknown model {self.model_as_written or self.model}"
        if get_device_known(self.device) is None:
            return f"unknown device {self.device_as_written or self.device}"
        return ""

    @property
    def pairs(self) -> tuple[str, ...]:
        """The pair ids this row belongs to (a shared baseline names several)."""
        return tuple(p.strip() for p in self.pair_id.split(";") if p.strip())

    @property
    def side(self) -> str:
        """'with', 'without' or '' (the lever's suffix)."""
        tail = self.lever.rsplit(":", 1)[-1].strip() if ":" in self.lever else ""
        return tail if tail in ("with", "without") else ""

    @property
    def setup(self) -> str:
        """A short description: framework, device x tp, model, formats, batch / lengths."""
        parts = [f"{self.framework} " if self.framework else "", f"{self.gpus}x{self.device}",
                 f" tp{self.tp}" if self.tp > 1 else "", f" pp{self.pp}" if self.pp > 1 else "",
                 f" ep{self.ep}" if self.ep > 1 else "", f" dp{self.dp}" if self.dp > 1 else "",
                 f" {self.model} {self.weight_format}"]
        if self.batch is not None:
            parts.append(f" b{self.batch}")
        if self.context_tokens is not None:
            parts.append(f" ctx{self.context_tokens}")
        if self.input_tokens is not None and self.output_tokens is not None:
            parts.append(f" in{self.input_tokens}/out{self.output_tokens}")
        if self.concurrency is not None:
            parts.append(f" conc{self.concurrency}")
        if self.request_rate is not None:
            parts.append(" burst" if self.request_rate == float("inf") else f" {self.request_rate:g}req/s")
        if self.metric in LATENCIES:
            parts.append(" mean" if self.percentile == "mean" else f" p{self.percentile}")
        if self.draft != "none":
            parts.append(f" {self.draft} g{self.gamma}")
        return "".join(parts)


def _row(raw: dict, row: int, where: str) -> Measurement:
    """Check one CSV row (``where`` names the file and row) and build its :class:`Measurement`."""
    metric = raw["metric"].strip()
    if metric not in UNITS:
        raise bad_value("metric", metric, UNITS, where=where)
    unit = raw["unit"].strip()
    if unit not in UNITS[metric]:
        raise bad_value("unit", unit, f"for metric {metric}: one of {', '.join(UNITS[metric])}", where=where)
    model_raw, device_raw = raw["model"].strip(), raw["device"].strip()
    model, device = model_name(model_raw) or model_raw, device_name(device_raw) or device_raw
    named = checkpoint_format(model_raw) or "bf16"      # a quantised checkpoint's name states its format
    given = {k: (raw.get(k) or "").strip() for k in ("weight_format", "kv_format", "compute_format")}
    weight = given["weight_format"] or named
    fmts = {"weight_format": weight, "kv_format": given["kv_format"] or checkpoint_kv_format(model_raw) or "bf16",
            "compute_format": given["compute_format"] or (named if weight == named and native(device, named)
                                                          else "bf16")}
    for key, value in fmts.items():
        cell_name({key: value}, key, where, get_format)
    draft = (raw.get("draft") or "none").strip()
    split = (raw.get("split") or "test").strip()
    if split not in SPLITS:
        raise bad_value("split", split, "train, test or check", where=where)
    tp = cell_int(raw, "tp", where, 1)
    gpus = cell_int(raw, "gpus", where, tp)
    laid = any((raw.get(k) or "").strip() for k in ("tp", "pp", "ep", "dp"))
    if not laid and gpus > 1:            # GPUs without a layout: the smallest TP that holds the weights
        tp = assumed_tp(model, device, fmts["weight_format"], gpus)
    value = cell_value(raw, where)
    factor = UNITS[metric][unit]
    m = Measurement(
        source=raw["source"].strip(), device=device, model=model, metric=metric,
        value=value, unit=unit, value_si=value * (gpus if factor is None else factor), row=row,
        url=(raw.get("url") or "").strip(), framework=(raw.get("framework") or "").strip(), tp=tp, gpus=gpus,
        **fmts, batch=cell_int(raw, "batch", where), context_tokens=cell_int(raw, "context_tokens", where, minimum=0),
        input_tokens=cell_int(raw, "input_tokens", where), output_tokens=cell_int(raw, "output_tokens", where),
        requests=cell_int(raw, "requests", where), concurrency=cell_int(raw, "concurrency", where),
        request_rate=cell_rate(raw, where),
        percentile=cell_percentile(raw, where), ttft_limit_s=cell_float(raw, "ttft_limit_s", where),
        tpot_limit_s=cell_float(raw, "tpot_limit_s", where), draft=draft, gamma=cell_int(raw, "gamma", where, minimum=0),
        split=split, notes=(raw.get("notes") or "").strip(), pp=cell_int(raw, "pp", where, 1), ep=cell_int(raw, "ep", where, 1),
        dp=cell_int(raw, "dp", where, 1), scenario=(raw.get("scenario") or "").strip(),
        lever=(raw.get("lever") or "").strip(), pair_id=(raw.get("pair_id") or "").strip(),
        model_as_written=model_raw, device_as_written=device_raw, file=where.split(" row ")[0])
    if metric in PER_PASS and (m.batch is None or m.context_tokens is None):
        missing = "batch" if m.batch is None else "context_tokens"
        raise bad_value(missing, "", f"an integer (metric {metric} is priced at the measured batch and context)",
                        where=where)
    if draft not in ("none", "mtp") and draft not in _draft_methods() and get_model_known(model) is not None:
        get_draft(draft, get_model(model), field=f"{where}: draft")
    if m.lever and m.pair_id and not m.side:
        raise bad_value("lever", m.lever, "a lever ending ':with' or ':without' (a row with a pair_id is one side "
                        "of a measured pair)", where=where)
    return m


def _draft_methods() -> tuple[str, ...]:
    """Draft methods a file may name without a catalogue model (listed, not priced, by validate)."""
    return ("eagle-1", "eagle-2", "eagle-3", "medusa", "ngram")


def parse_measurements(text: str, name: str) -> list[Measurement]:
    """Parse CSV ``text`` (``name`` for messages): checks columns, then every row; raises InputError."""
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"{name}: missing column {', '.join(missing)}; a measurement file needs the columns "
                         f"{', '.join(REQUIRED)} (optional: {', '.join(OPTIONAL)})")
    unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
    if unknown:
        raise InputError(f"{name}: column {unknown[0]!r} is not allowed; expected one of "
                         f"{', '.join(REQUIRED + OPTIONAL)}")
    reader.fieldnames = header
    out = []
    for i, raw in enumerate(reader, start=1):
        where = f"{name} row {i} (line {reader.line_num})"
        if None in raw:
            raise InputError(f"{where}: more fields than the header's {len(header)} columns")
        empty = [c for c in REQUIRED if not (raw.get(c) or "").strip()]
        if empty:
            raise bad_value(empty[0], "", "a value (required column)", where=where)
        out.append(_row(raw, i, where))
    if not out:
        raise InputError(f"{name}: no measurement rows after the header")
    return out


def public_text(name: str = PUBLIC) -> str:
    """A packaged measurement file (sweepkit/validation/data/: PUBLIC or CORPUS) as text."""
    return resources.files("sweepkit.validation").joinpath("data", name).read_text(encoding="utf-8")


def load_measurements(path: str | Path | None = None) -> tuple[list[Measurement], str, str]:
    """Measurements from ``path`` (None: the packaged sets, PUBLIC then CORPUS).

    Returns:
      (measurements, file name for messages and lineage, hex SHA-256 of the file's bytes; of the packaged
      files' bytes one after the other for None).
    """
    if path is None:
        texts = [(public_text(n), f"sweepkit:{n}") for n in (PUBLIC, CORPUS)]
        points = [m for text, name in texts for m in parse_measurements(text, name)]
        digest = hashlib.sha256("".join(t for t, _ in texts).encode("utf-8")).hexdigest()
        return points, f"sweepkit:{PUBLIC}+{CORPUS}", digest
    try:
        text, name = Path(path).read_text(encoding="utf-8"), str(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such measurement file") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text (CSV) file") from None
    return parse_measurements(text, name), name, hashlib.sha256(text.encode("utf-8")).hexdigest()


def row_ranges(rows: list[int]) -> str:
    """Row numbers as compact ranges.

    >>> row_ranges([1, 2, 3, 7, 9, 10])
    '1-3,7,9-10'
    """
    out, rows = [], sorted(rows)
    i = 0
    while i < len(rows):
        j = i
        while j + 1 < len(rows) and rows[j + 1] == rows[j] + 1:
            j += 1
        out.append(str(rows[i]) if i == j else f"{rows[i]}-{rows[j]}")
        i = j + 1
    return ",".join(out)
