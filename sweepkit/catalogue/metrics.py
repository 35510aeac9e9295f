"""The serving metrics, named once: short name, source column, unit, which direction is better.

The lever matrix (``queries/matrix.sql``), the explorer query, the report's charts and
docs/serving.md all take a metric's name, unit and direction from here; the warehouse's long-format
``capacity_long`` macro is generated from :data:`METRICS` (:func:`values_sql`), so a metric added here
reaches every query without a second list to keep in step.

Capacity metrics are read at each configuration's capacity (the highest load at which 90 % of requests
meet both SLOs); latency metrics at the workload's reference load, the same offered load for every lever.
Goodput follows DistServe (Zhong et al. 2024, arXiv 2401.09670, sec. 2): requests per second per GPU
that meet the SLOs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """One serving metric.

    Attributes:
      name: short name used by queries, charts and ``--param x=...`` (``goodput``).
      column: the ``capacity`` table's column it reads (``goodput_per_gpu_per_s``).
      unit: display unit (``req/s per GPU``).
      higher_is_better: True where a larger value is better (goodput, capacity, tokens).
      at_capacity: True for capacity metrics, False for latencies at the reference load.
      in_matrix: one of the lever matrix's six metrics.
      label: axis and legend label, unit included.
    """

    name: str
    column: str
    unit: str
    higher_is_better: bool
    at_capacity: bool
    in_matrix: bool
    label: str


def _latency(kind: str, q: str, in_matrix: bool) -> Metric:
    return Metric(f"{kind}_{q}", f"{kind}_{q}_s_at_ref", "s", False, False, in_matrix,
                  f"{kind.upper()} {q} at the reference load (s)")


METRICS: tuple[Metric, ...] = (
    Metric("goodput", "goodput_per_gpu_per_s", "req/s per GPU", True, True, True,
           "goodput at capacity (req/s per GPU)"),
    Metric("capacity", "capacity_per_s", "1/s", True, True, False, "capacity (sessions or requests/s)"),
    Metric("tokens_per_gpu", "tokens_per_gpu_per_s", "tok/s per GPU", True, True, False,
           "output tokens at capacity (tok/s per GPU)"),
    Metric("cost_per_mtok", "cost_per_mtok_usd", "USD per M tok", False, True, True,
           "cost at capacity (USD per M output tokens)"),
    Metric("energy_per_token", "energy_per_token_j", "J per token", False, True, True,
           "energy at capacity (J per output token)"),
    *(_latency(kind, q, q == "p99") for kind in ("ttft", "tpot", "itl") for q in ("p50", "p90", "p99")),
)
"""Every serving metric, the lever matrix's six in their display order first among their kind."""

BY_NAME = {m.name: m for m in METRICS}
MATRIX = tuple(m for m in METRICS if m.in_matrix)
"""The lever matrix's metrics, in display order: goodput, cost, energy, TTFT/TPOT/ITL p99."""


def metric(name: str) -> Metric:
    """The metric called ``name``.

    Example:
      >>> m = metric("cost_per_mtok"); (m.column, m.unit, m.higher_is_better)
      ('cost_per_mtok_usd', 'USD per M tok', False)

    Raises:
      KeyError: no such metric (the message lists the known ones).
    """
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"metric = {name!r}; expected one of {', '.join(BY_NAME)}") from None


def values_sql() -> str:
    """The catalogue as a SQL ``values`` list: (metric, unit, column value, higher_is_better, capacity_metric,
    in_matrix, ord), for a ``lateral (values ...)`` over the ``capacity`` table.

    Example:
      >>> values_sql().splitlines()[0]
      "('goodput', 'req/s per GPU', goodput_per_gpu_per_s, true, true, true, 1),"
    """
    def b(x: bool) -> str:
        return "true" if x else "false"

    order = {m.name: i + 1 for i, m in enumerate(MATRIX)}
    rows = [f"('{m.name}', '{m.unit}', {m.column}, {b(m.higher_is_better)}, {b(m.at_capacity)}, "
            f"{b(m.in_matrix)}, {order.get(m.name, len(MATRIX) + i + 1)})" for i, m in enumerate(METRICS)]
    return ",\n".join(rows)


def markdown_table() -> str:
    """The catalogue as the Markdown table docs/serving.md prints (a test keeps the two equal).

    Example:
      >>> markdown_table().splitlines()[2]
      '| `goodput` | `goodput_per_gpu_per_s` | req/s per GPU | higher | at capacity | yes |'
    """
    rows = ["| name | capacity column | unit | better | read | in the matrix |", "|---|---|---|---|---|---|"]
    rows += [f"| `{m.name}` | `{m.column}` | {m.unit} | {'higher' if m.higher_is_better else 'lower'} | "
             f"{'at capacity' if m.at_capacity else 'at the reference load'} | {'yes' if m.in_matrix else 'no'} |"
             for m in METRICS]
    return "\n".join(rows)
