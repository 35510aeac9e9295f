"""``sweepkit report``: one self-contained HTML file (scripts and data inlined) plus a PNG per chart.

Every chart is built from the warehouse by one query in ``queries/`` (``report_*.sql``) and drawn by one
function of :mod:`sweepkit.report.charts` (Altair / Vega-Lite). The HTML inlines the Vega, Vega-Lite and
Vega-Embed scripts (``vl_convert.javascript_bundle``) and every chart's spec with its data, so it opens with
no network; the PNGs are rendered by vl-convert from the same specs. A section whose data is missing (no
serving run, no trace yet) becomes a panel saying which command fills it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import html
import json
import math
import time
from pathlib import Path
from typing import Any, Callable

from sweepkit.errors import InputError
from sweepkit.report import charts, plan_chart

SERVING_HINT = "no serving run yet — run <code>sweepkit simulate grids/serving-seed.toml</code>"


@dataclasses.dataclass(frozen=True)
class Section:
    """One chart of the report: its id, heading, text, query, chart function and the hint when empty."""

    id: str
    heading: str
    text: str
    query: str
    chart: Callable[[list[dict]], Any]
    empty: str


SECTIONS = (
    Section("speedup", "Speed-up against batch",
            "Time per output token, plain over speculative, from the cost model. Low batch is memory-bound and "
            "the extra verify positions cost almost nothing; once the verify pass turns compute-bound the "
            "rejected drafts are wasted work and the speed-up falls below break-even.",
            "report_speedup", charts.speedup_vs_batch,
            "no decode run yet — run <code>sweepkit run grids/seed.toml</code>"),
    Section("regime", "Bound regime map",
            "What limits the verify pass at each batch x context, with the speed-up in each cell.",
            "report_regime", charts.regime_map,
            "no decode run yet — run <code>sweepkit run grids/seed.toml</code>"),
    Section("alpha_gamma", "Speed-up over acceptance and draft length",
            "The verify and draft pass times of the decode run with the most gammas, combined with the closed "
            "form E = (1 - α^(γ+1)) / (1 - α). <code>sweepkit run grids/leviathan.toml</code> adds gammas.",
            "report_alpha_gamma", charts.alpha_gamma_map,
            "no speculative decode run yet — run <code>sweepkit run grids/seed.toml</code>"),
    Section("matrix", "Lever matrix",
            "Each lever's change from the baseline per workload and metric, latest serving run. Caveat marks: "
            "E baseline at a latency cliff, $ illustrative prices, α assumed acceptance. Hover for the numbers.",
            "report_matrix", charts.lever_matrix, SERVING_HINT),
    Section("best", "Best lever per workload",
            "For each workload and device, the lever with the most goodput per GPU at capacity, its gain over the "
            "baseline and its cost per million tokens (queries/best_lever.sql).",
            "best_lever", charts.best_lever, SERVING_HINT),
    Section("explorer", "Explorer",
            "Any two metrics: one point per device x lever x workload (the baseline included).",
            "report_explorer", charts.explorer, SERVING_HINT),
    Section("trace", "The mechanism, pass by pass",
            "The latest <code>sweepkit trace</code>: the same requests plain and speculative; every step's draft "
            "passes, verify pass and the tokens each row kept.",
            "report_trace", charts.trace_timeline,
            "no trace yet — run <code>sweepkit trace</code>"),
    Section("validation", "Cost model against measurement",
            "The newest <code>sweepkit validate</code> run: each modelled point, measured against modelled, on "
            "y = x with a ±25% band, one panel per metric, coloured by device, shaped by weight format. Below: "
            "the error by slice (device x model class x format x framework x metric; bias &gt; 0 means "
            "modelled above measured), the measured lever pairs (measured against predicted change) and the "
            "points furthest from measurement. <code>sweepkit validate --summary markdown</code> prints the "
            "same as text.",
            "report_validation", charts.validation_scatter,
            "no validation run yet — run <code>sweepkit validate</code>"),
    Section("plan", "Deployment plan: the frontier",
            "The latest <code>sweepkit plan</code>: every simulated configuration, its objective at capacity "
            "against TTFT and TPOT p99; filled points are the Pareto frontier. Hover for the settings and the "
            "lever table for <code>sweepkit simulate</code>.",
            "report_plan", plan_chart.plan_frontier,
            "no plan run yet — run <code>sweepkit plan --model llama-3.1-8b --gpus 1</code>"),
)


VALIDATION_TABLES = (("report_validation_slices", "Error by slice"),
                     ("validation_pairs", "Lever pairs: measured against predicted change"),
                     ("report_validation_worst", "Furthest from measurement"))
"""Tables below the validation chart: (query, heading)."""


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def _rows(warehouse, query: str, params: dict | None = None) -> list[dict]:
    from sweepkit.store import run_query

    return [{k: _clean(v) for k, v in r.items()} for r in run_query(warehouse, query, params).to_pylist()]


def _table(rows: list[dict]) -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{html.escape(k)}</th>" for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape('' if v is None else str(v))}</td>" for v in r.values())
                   + "</tr>" for r in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;
max-width:1100px;color:#222;padding:0 16px}h1{margin-bottom:4px}section{margin:28px 0}
.note{color:#666;font-size:14px}.panel{border:1px dashed #aaa;background:#fafafa;padding:18px;color:#555}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 7px;
text-align:right}th{background:#f3f3f3}code{background:#f1f1f1;padding:1px 4px;border-radius:3px}
.chart{overflow-x:auto}.scroll{overflow-x:auto;max-width:100%}"""

EMBED = """
const specs = JSON.parse(document.getElementById('sweepkit-specs').textContent);
const jobs = Object.entries(specs).map(([id, spec]) =>
  vegaEmbed('#' + id, spec, {renderer: 'svg', actions: false}).catch(err => {
    console.error('sweepkit chart ' + id + ' failed: ' + err);
    document.getElementById(id).textContent = 'chart failed: ' + err;
  }));
Promise.all(jobs).then(() => { document.body.dataset.rendered = String(jobs.length); });
"""


def build_report(warehouse, out_dir: str | Path, *, png: bool = True,
                 progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Build ``report.html`` and ``<chart>.png`` files into ``out_dir``.

    Args:
      warehouse: a :class:`sweepkit.store.Warehouse`.
      out_dir: output folder (created).
      png: also render a PNG of each chart (vl-convert).
      progress: called with 1 as each section (query, chart and PNG) is done; len(SECTIONS) in all.

    Returns:
      dict: ``html`` (path), ``pngs`` (paths), ``charts`` (ids drawn), ``empty`` (ids shown as panels),
      ``damaged`` (id -> the one-line reason a section was skipped: a damaged committed file),
      ``seconds`` (build time).
    """
    with warehouse.pinned():      # every section reads one snapshot: the same commits, opened once
        return _build(warehouse, out_dir, png=png, progress=progress)


def _build(warehouse, out_dir: str | Path, *, png: bool, progress: Callable[[int], None] | None) -> dict[str, Any]:
    import vl_convert as vlc

    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    specs: dict[str, dict] = {}
    parts: list[str] = []
    empty: list[str] = []
    pngs: list[str] = []
    damaged: dict[str, str] = {}
    for sec in SECTIONS:
        try:
            rows = _rows(warehouse, sec.query)
        except InputError as exc:            # a damaged committed file: skip this section, say so, go on
            if "is damaged" not in str(exc):
                raise
            rows, damaged[sec.id] = [], str(exc)
        parts.append(f'<section id="section-{sec.id}"><h2>{html.escape(sec.heading)}</h2>'
                     f'<p class="note">{sec.text}</p>')
        if sec.id in damaged:
            parts.append(f'<div class="panel" data-damaged="{sec.id}">Skipped: {html.escape(damaged[sec.id])}</div>')
        elif not rows:
            empty.append(sec.id)
            parts.append(f'<div class="panel" data-empty="{sec.id}">{sec.empty}</div>')
        else:
            spec = sec.chart(rows).to_dict()
            specs[f"chart-{sec.id}"] = spec
            parts.append(f'<div class="chart" id="chart-{sec.id}"></div>')
            if sec.id == "trace":
                parts.append(_table(_rows(warehouse, "trace_summary")))
            if sec.id == "validation":
                for query, title in VALIDATION_TABLES:
                    parts.append(f"<h3>{title}</h3>" + (_table(_rows(warehouse, query)) or "<p>none</p>"))
            if png:
                path = out / f"{sec.id}.png"
                path.write_bytes(vlc.vegalite_to_png(spec, scale=2))
                pngs.append(str(path))
        parts.append("</section>")
        if progress is not None:
            progress(1)
    runs = _table(_rows_runs(warehouse))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    payload = json.dumps(specs, ensure_ascii=False, allow_nan=False).replace("</", "<\\/")
    page = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<title>sweepkit report</title>"
        f"<style>{CSS}</style><script>{_bundle()}</script></head><body>"
        "<h1>sweepkit report</h1>"
        f"<p class='note'>Which inference lever helps which workload, on which hardware, at what cost. "
        f"Built {stamp} from <code>{html.escape(str(warehouse.root))}</code>; every chart is a query in "
        f"<code>queries/report_*.sql</code>. Speculative acceptance α is assumed, not measured.</p>"
        + "".join(parts)
        + f"<section><h2>Runs in the warehouse</h2>{runs}</section>"
        f"<script type='application/json' id='sweepkit-specs'>{payload}</script>"
        f"<script>{EMBED}</script></body></html>")
    html_path = out / "report.html"
    html_path.write_text(page, encoding="utf-8")
    return {"html": str(html_path), "pngs": pngs, "charts": list(specs), "empty": empty,
            "damaged": damaged, "seconds": time.perf_counter() - t0}


def _rows_runs(warehouse) -> list[dict]:
    table = warehouse.query("select run_id, kind, grid_name, row_count, round(wall_s, 2) as wall_s, "
                            "ended_at from runs where status = 'committed' order by ended_at desc limit 20")
    return [{k: _clean(v) for k, v in r.items()} for r in table.to_pylist()]


def _bundle() -> str:
    """The Vega + Vega-Lite + Vega-Embed scripts, inlined (``</script>`` inside them escaped)."""
    import vl_convert as vlc

    return vlc.javascript_bundle().replace("</script", "<\\/script")
