"""Which deployment configurations sweepkit can express: catalogue model, device, layout, memory, a priced pass.

A configuration is a published benchmark's setup without its result: a model (HF id or catalogue name), a
device, G GPUs laid out as trtllm-bench states them (``--tp`` t, ``--pp`` p, ``--ep`` e, attention data
parallelism on or off) and fixed ISL / OSL. With attention DP on, each of the t tensor ranks serves its own
requests (TensorRT-LLM ``enable_attention_dp``; "DEPt" = t ranks, experts over all t), so the replica is

    attention DP on:   tp' = 1, dp = t, ep = e          attention DP off:   tp' = t, dp = 1, ep = e

with p pipeline stages, G / (tp' dp p) replicas (:mod:`sweepkit.validation.row_layout` reads the degrees and
:func:`sweepkit.costmodel.layout.check_layout` applies the rules). A configuration is expressible when, in
order (the first that fails is its reason):

1. the model resolves in the catalogue (an alias or HF id: :mod:`sweepkit.validation.aliases`);
2. the device resolves;
3. the layout is one sweepkit prices (:func:`sweepkit.validation.row_layout.row_layout`);
4. the serving engine accepts the cluster: lever check, layout, the weights fit the replica's memory with room
   for KV (:func:`sweepkit.validation.serving_points.serving_status`), and one attention rank's KV holds a
   whole request, C / dp >= ISL + OSL (:func:`sweepkit.serving.config.kv_tokens`: C the replica's positions);
5. one decode pass of the replica at that layout, 64 rows per attention rank at a context of ISL + OSL / 2,
   has a finite positive time and energy (:func:`sweepkit.costmodel.steps.target_pass_cost` with the
   replica's pipeline stages and :class:`~sweepkit.costmodel.layout.Layout`).

Only expressibility is checked: no measured value is read, kept or compared.

References:
  trtllm-bench throughput, --tp / --pp / --ep and enable_attention_dp (github.com/NVIDIA/TensorRT-LLM,
  docs/source/developer-guide/perf-overview.md, "Reproducing Benchmarked Results").
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math

import jax
import jax.numpy as jnp

from sweepkit.catalogue import get_device, get_model
from sweepkit.costmodel.layout import IMBALANCE, IMBALANCE_EPLB, make_layout
from sweepkit.costmodel.passes import decode_work
from sweepkit.costmodel.steps import instance, target_pass_cost
from sweepkit.errors import InputError, bad_value
from sweepkit.serving.config import check, kv_tokens
from sweepkit.validation.aliases import device_name, model_name
from sweepkit.validation.measurements import Measurement, get_device_known, get_model_known
from sweepkit.validation.cells import cell_int as optional_int
from sweepkit.validation.row_layout import row_layout
from sweepkit.validation.serving_points import MODELLED, point_config, serving_status

COLUMNS = ("release", "model", "device", "gpus", "tp", "pp", "ep", "attention_dp", "weight_format", "kv_format",
           "isl", "osl")
"""Required columns of a configurations file (others, such as ``checkpoint`` and ``label``, are kept as notes)."""
ROWS_PER_RANK = 64
"""Decode rows per attention rank of the priced pass (any positive batch shows the pass can be priced)."""
EXPRESSIBLE = "expressible"
REASONS = ("unknown model", "unknown device", "layout", "serving engine", "KV", "pass not priced")
"""Failure classes, in the order they are checked."""


@dataclasses.dataclass(frozen=True)
class Deployment:
    """One configuration: ``tp``, ``pp``, ``ep`` as trtllm-bench's flags, ``attention_dp`` 1 where on."""

    release: str
    model: str
    device: str
    gpus: int
    tp: int
    pp: int
    ep: int
    attention_dp: int
    weight_format: str
    kv_format: str
    isl: int
    osl: int
    label: str = ""


def _int(raw: dict, key: str, where: str, minimum: int = 1) -> int:
    """A required integer cell (the measurement file's rule, an empty cell refused too)."""
    value = optional_int(raw, key, where, minimum=minimum)
    if value is None:
        raise bad_value(key, "", f"an integer >= {minimum}", where=where)
    return value


def parse_deployments(text: str, name: str) -> list[Deployment]:
    """Configurations from CSV ``text`` (lines starting ``#`` are comments); InputError names file, row, field.

    Example:
      >>> rows = parse_deployments("release,model,device,gpus,tp,pp,ep,attention_dp,weight_format,kv_format,"
      ...                          "isl,osl\\n1,deepseek-v3,H200,8,8,1,8,1,fp8,fp8,1024,1024\\n", "demo.csv")
      >>> rows[0].tp, rows[0].attention_dp
      (8, 1)
    """
    lines = "".join(line for line in io.StringIO(text) if not line.lstrip().startswith("#"))
    reader = csv.DictReader(io.StringIO(lines))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"{name}: missing column(s) {', '.join(missing)}; expected {', '.join(COLUMNS)}")
    out = []
    for i, raw in enumerate(reader, 1):
        where = f"{name} row {i}"
        ints = {k: _int(raw, k, where, 0 if k == "attention_dp" else 1)
                for k in ("gpus", "tp", "pp", "ep", "attention_dp", "isl", "osl")}
        if ints["attention_dp"] > 1:
            raise bad_value("attention_dp", str(ints["attention_dp"]), "0 or 1", where=where)
        out.append(Deployment(release=raw["release"].strip(), model=raw["model"].strip(), device=raw["device"].strip(),
                              weight_format=raw["weight_format"].strip(), kv_format=raw["kv_format"].strip(),
                              label=(raw.get("label") or "").strip(), **ints))
    return out


def as_measurement(d: Deployment, row: int = 1) -> Measurement:
    """The max-throughput row of ``d`` (no value: NaN) as :mod:`sweepkit.validation` reads rows (module doc)."""
    tp, dp = (1, d.tp) if d.attention_dp else (d.tp, 1)
    compute = d.weight_format if d.weight_format in ("fp8", "fp4", "nvfp4") else "bf16"
    return Measurement(source=f"configurations {d.release}", device=device_name(d.device) or d.device,
                       model=model_name(d.model) or d.model, metric="max_output_throughput", value=math.nan,
                       unit="tok/s", value_si=math.nan, row=row, framework="TensorRT-LLM", tp=tp, gpus=d.gpus,
                       weight_format=d.weight_format, kv_format=d.kv_format, compute_format=compute,
                       input_tokens=d.isl, output_tokens=d.osl, request_rate=math.inf, pp=d.pp, ep=d.ep, dp=dp,
                       model_as_written=d.model, device_as_written=d.device)


def decode_pass(m: Measurement) -> tuple[float, float]:
    """(seconds, joules) of one decode pass of ``m``'s replica at its layout (module docstring, step 5)."""
    lay = row_layout(m)
    model, device = get_model(m.model), get_device(m.device)
    rows = float(ROWS_PER_RANK * lay.dp)
    with jax.enable_x64(True):
        layout = make_layout(device, model, lay.tp, dp=lay.dp, ep=lay.ep,
                             imbalance=IMBALANCE_EPLB if lay.redundant_experts else IMBALANCE,
                             compute_format=m.compute_format,
                             gpus_per_node=m.gpus // lay.nodes if lay.nodes else None,
                             redundant_experts=lay.redundant_experts, dtype=jnp.float64)
        inst = instance(device, model, None, lay.tp, m.weight_format, m.kv_format, m.compute_format,
                        dtype=jnp.float64, pp=lay.pp, layout=layout)
        cost = target_pass_cost(inst, decode_work(rows * (m.input_tokens + m.output_tokens / 2.0), rows))
        return float(cost.t_s), float(cost.energy_j)


def why_not(d: Deployment, row: int = 1) -> tuple[str, str]:
    """(class, detail) of the first check ``d`` fails (:data:`REASONS`), or (:data:`EXPRESSIBLE`, '').

    Example:
      >>> d = Deployment("1", "deepseek-ai/DeepSeek-R1-0528", "H200", 8, 8, 1, 8, 1, "fp8", "fp8", 1024, 1024)
      >>> why_not(d)
      ('expressible', '')
    """
    m = as_measurement(d, row)
    if get_model_known(m.model) is None:
        return "unknown model", d.model
    if get_device_known(m.device) is None:
        return "unknown device", d.device
    try:
        row_layout(m)
    except InputError as exc:
        return "layout", str(exc).split(": ", 1)[-1]
    status = serving_status(m)
    if status != MODELLED:
        return "serving engine", status.removeprefix("not modelled: ")
    cluster, cfg = point_config(m)
    res = check(cluster, cfg, m.source)
    per_rank = kv_tokens(cluster, cfg, res) / res.dp
    if per_rank < d.isl + d.osl:
        return "KV", (f"one attention rank holds {per_rank:,.0f} KV tokens, fewer than one request's "
                      f"ISL + OSL = {d.isl + d.osl:,}")
    t_s, energy_j = decode_pass(m)
    if not (math.isfinite(t_s) and t_s > 0 and math.isfinite(energy_j) and energy_j > 0):
        return "pass not priced", f"t = {t_s} s, energy = {energy_j} J"
    return EXPRESSIBLE, ""
