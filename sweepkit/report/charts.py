"""The report's charts as Altair (Vega-Lite) specifications, one function per chart, rows in -> chart out.

Every function takes the rows of its query (``queries/report_*.sql``, a list of dicts) and returns an
``alt.Chart`` (or layered / concatenated chart) with the data inlined, so the spec renders anywhere with no
network. Colours mean the same thing everywhere: bound memory blue, power orange, compute red; verdict
better green, worse red, same grey.
"""

from __future__ import annotations

import json

import altair as alt

from sweepkit.catalogue.metrics import MATRIX

BOUND_COLOURS = alt.Scale(domain=["memory", "power", "compute"], range=["#4c78a8", "#f58518", "#e45756"])
VERDICT_COLOURS = alt.Scale(domain=["better", "worse", "same"], range=["#54a24b", "#e45756", "#bab0ac"])
METRICS = [m.name for m in MATRIX]
"""The lever matrix's metrics in display order (sweepkit/catalogue/metrics.py)."""
WIDTH = 520


def _data(rows: list[dict]) -> alt.Data:
    return alt.Data(values=rows)


def speedup_vs_batch(rows: list[dict]) -> alt.LayerChart:
    """Speed-up against batch, one line per device x context; points shaped by the verify pass's bound.

    Devices take the dark2 scheme, so no device shares a colour with a bound elsewhere in the report; the
    markers carry the device's colour and their shape (own legend) the bound.

    The dashed rule at 1 is break-even: below it speculation loses. Where the grid has ``[bands]`` the
    rows carry speedup_p10 / speedup_p90, drawn as a shaded band around each line.
    """
    base = alt.Chart(_data(rows)).encode(
        x=alt.X("batch:Q", scale=alt.Scale(type="log", base=2), title="batch (rows decoded together)"),
        y=alt.Y("speedup:Q", title="speed-up (x, plain / speculative time per token)"),
        color=alt.Color("device:N", title="device", scale=alt.Scale(scheme="dark2")),
        detail="context:N",
    )
    lines = base.mark_line(strokeWidth=1.5).encode(
        strokeDash=alt.StrokeDash("context:O", title="context per row (tokens)"))
    tooltip = ["device:N", "model:N", "draft:N", "context:Q", "batch:Q", "gamma:Q", "alpha:Q",
               alt.Tooltip("ms_per_token_plain:Q", format=".3f", title="ms/token plain"),
               alt.Tooltip("ms_per_token_spec:Q", format=".3f", title="ms/token speculative"),
               alt.Tooltip("speedup:Q", format=".2f"), "verify_bound:N", "fits_in_memory:N"]
    points = base.mark_point(size=60, filled=True).encode(      # marker colour: the device's line
        shape=alt.Shape("verify_bound:N", title="verify pass bound (marker)",
                        scale=alt.Scale(domain=["memory", "power", "compute"],
                                        range=["circle", "diamond", "triangle-up"]),
                        legend=alt.Legend(symbolFillColor="black", symbolStrokeColor="black")),
        tooltip=tooltip)
    layers = [lines, points]
    if any(r.get("speedup_p10") is not None for r in rows):
        band = base.mark_area(opacity=0.18).encode(y="speedup_p10:Q", y2="speedup_p90:Q")
        layers.insert(0, band)
    rule = alt.Chart(alt.Data(values=[{"y": 1.0, "label": "break-even"}])).encode(y="y:Q")
    even = rule.mark_rule(strokeDash=[6, 4], color="black") + rule.mark_text(
        align="left", dx=4, dy=-6, color="black").encode(x=alt.value(0), text="label:N")
    g = rows[0] if rows else {}
    title = (f"Speed-up against batch: {g.get('model', '')} + {g.get('draft', '')} draft, "
             f"gamma {g.get('gamma', '')}, " + _acceptance_label(g))
    return alt.layer(*layers, even).properties(width=WIDTH, height=300, title=title)


def _acceptance_label(row: dict) -> str:
    """'alpha 0.7' for i.i.d. acceptance, else the model's name (and alpha_1); bands say p10-p90."""
    name = row.get("acceptance") or "iid"
    label = f"alpha {row.get('alpha', '')}" if name == "iid" else f"acceptance {name} (alpha_1 {row.get('alpha', '')})"
    return label + (", band p10-p90" if row.get("speedup_p10") is not None else "")


def regime_map(rows: list[dict]) -> alt.FacetChart:
    """Batch x context cells coloured by the verify pass's bound, speed-up printed in each cell."""
    base = alt.Chart().encode(
        x=alt.X("batch:O", title="batch"),
        y=alt.Y("context:O", sort="descending", title="context per row (tokens)"),
    )
    cells = base.mark_rect(stroke="white").encode(
        color=alt.Color("verify_bound:N", scale=BOUND_COLOURS, title="verify pass bound"),
        opacity=alt.condition("datum.fits_in_memory", alt.value(1.0), alt.value(0.35)),
        tooltip=["device:N", "context:Q", "batch:Q", "plain_bound:N", "verify_bound:N",
                 alt.Tooltip("speedup:Q", format=".2f"), "fits_in_memory:N"])
    text = base.mark_text(fontSize=9).encode(text=alt.Text("speedup:Q", format=".2f"))
    return alt.layer(cells, text, data=_data(rows)).properties(width=300, height=130).facet(
        column=alt.Column("device:N", title=None),
        title="Bound regime map (batch x context; speed-up in each cell, faded: does not fit in HBM)")


def alpha_gamma_map(rows: list[dict]) -> alt.LayerChart:
    """Speed-up over alpha x gamma at one decode point; diverging colour centred on break-even (1)."""
    base = alt.Chart(_data(rows)).encode(
        x=alt.X("alpha:O", title="alpha (acceptance per drafted token)"),
        y=alt.Y("gamma:O", sort="descending", title="gamma (drafted tokens per pass)"),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("speedup:Q", title="speed-up",
                        scale=alt.Scale(scheme="redyellowgreen", domainMid=1.0)),
        tooltip=["gamma:Q", "alpha:Q", alt.Tooltip("tokens_per_pass:Q", format=".3f"),
                 alt.Tooltip("speedup:Q", format=".2f")])
    text = base.mark_text(fontSize=8).encode(text=alt.Text("speedup:Q", format=".1f"))
    g = rows[0] if rows else {}
    title = (f"Speed-up over alpha x gamma: {g.get('device', '')}, batch {g.get('batch', '')}, "
             f"context {g.get('context', '')}")
    return alt.layer(cells, text).properties(width=WIDTH, height=160, title=title)


def lever_order(names) -> list[str]:
    """Levers in the packaged file's order (grouped by family: batching, KV, prefix caching, disaggregation,
    parallelism, formats, speculation, combinations); levers it does not know follow, by name."""
    from sweepkit.serving.levers import load_levers

    packaged = load_levers()
    family = {}
    for lv in packaged.values():
        family.setdefault(lv.family, len(family))
    known = sorted((n for n in names if n in packaged),
                   key=lambda n: (family[packaged[n].family], list(packaged).index(n)))
    return known + sorted(n for n in set(names) if n not in packaged)


def lever_matrix(rows: list[dict]) -> alt.FacetChart:
    """Per lever (grouped by family), a small table of workloads x metrics, one column of panels per device, as
    the chapter prints it: ✓ better / ✗ worse / = same, the change with its caveat marks (``✓ +27% α``), a cell
    without a change says why (``n/a (no capacity)``) and, for a grid with ``[serving.bands]``, the share of draws
    that agree with the verdict, e.g. ``✓ +27% α (94%)``.

    Hover shows the absolute numbers (baseline and lever value), the caveats and the draws' shares and band.
    """
    order = lever_order(list(dict.fromkeys(r["lever"] for r in rows)))
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    banded = any(r.get("draws") is not None for r in rows)
    base = alt.Chart().encode(
        x=alt.X("metric:N", sort=METRICS, title=None, axis=alt.Axis(orient="top", labelAngle=0)),
        y=alt.Y("workload:N", sort=workloads, title=None),
    )
    cells = base.mark_rect(stroke="white").encode(
        color=alt.Color("verdict:N", scale=VERDICT_COLOURS, title="vs baseline"),
        tooltip=["device:N", "lever:N", "workload:N", "metric:N",
                 alt.Tooltip("baseline_value:Q", format=".4g", title="baseline"),
                 alt.Tooltip("lever_value:Q", format=".4g", title="lever"),
                 alt.Tooltip("change_pct:Q", format="+.1f", title="change %"), "verdict:N", "caveats:N"]
        + ([alt.Tooltip(f"{c}:Q", format=".0%", title=c.replace("_", " ") + " (draws)")
            for c in ("share_better", "share_worse", "share_same")]
           + [alt.Tooltip(f"change_{q}:Q", format="+.1f", title=f"change % {q} (draws)") for q in ("p10", "p90")]
           if banded else []))
    text = base.mark_text(fontSize=10).encode(text=alt.Text("cell:N"))
    chart = alt.layer(cells, text, data=_data(rows)).transform_calculate(
        cell="datum.mark ? datum.mark + ' ' + datum.label : datum.label").properties(
            width=int(WIDTH * (1.5 if banded else 1)), height=alt.Step(18))
    return chart.facet(row=alt.Row("lever:N", sort=order, title=None, header=alt.Header(labelAngle=0,
                                                                                         labelAlign="left")),
                       column=alt.Column("device:N", title=None),
                       title="Lever matrix: change from the baseline (✓ better, ✗ worse, = same, by more than ±2%)"
                             + ("; (n%): share of draws agreeing" if banded else ""))


def best_lever(rows: list[dict]) -> alt.Chart:
    """The lever with the most goodput per GPU for each workload and device, with its gain over the baseline."""
    base = alt.Chart(_data(rows)).transform_calculate(
        row="datum.workload + ' · ' + datum.device",
        label="datum.lever + '  ' + format(datum.gain_x, '.2f') + 'x, $' + format(datum.cost_per_mtok_usd, '.3g')"
              " + '/M tok'").encode(y=alt.Y("row:N", title=None))
    bars = base.mark_bar().encode(
        x=alt.X("gain_x:Q", title="goodput per GPU / the baseline's"), color=alt.Color("device:N", title="device"),
        tooltip=["workload:N", "device:N", "lever:N", alt.Tooltip("goodput_per_gpu_per_s:Q", format=".4g"),
                 alt.Tooltip("cost_per_mtok_usd:Q", format=".4g"), alt.Tooltip("energy_per_token_j:Q", format=".4g"),
                 alt.Tooltip("gain_x:Q", format=".2f"), "levers_compared:Q"])
    text = base.mark_text(align="left", dx=4, fontSize=10).encode(x="gain_x:Q", text="label:N")
    return alt.layer(bars, text).properties(width=WIDTH, height=alt.Step(18),
                                           title="Best lever per workload and device (goodput per GPU at capacity)")


def explorer(rows: list[dict]) -> alt.Chart:
    """Any two metrics against each other: one point per device x lever x workload; pick x and y below it."""
    xm = alt.param(name="x_metric", value="tpot_p99",
                   bind=alt.binding_select(options=METRICS, name="x metric "))
    ym = alt.param(name="y_metric", value="goodput",
                   bind=alt.binding_select(options=METRICS, name="y metric "))
    return alt.Chart(_data(rows)).mark_point(size=70, filled=True, opacity=0.8).transform_calculate(
        x="datum[x_metric]", y="datum[y_metric]",
    ).encode(
        x=alt.X("x:Q", title="x: the metric picked below", scale=alt.Scale(zero=False)),
        y=alt.Y("y:Q", title="y: the metric picked below", scale=alt.Scale(zero=False)),
        color=alt.Color("lever:N", title="lever"),
        shape=alt.Shape("workload:N", title="workload"),
        tooltip=["device:N", "lever:N", "workload:N"] + [alt.Tooltip(f"{m.name}:Q", format=".4g", title=m.label)
                                                         for m in MATRIX],
    ).add_params(xm, ym).properties(width=WIDTH, height=320, title=alt.TitleParams(
        text=alt.ExprRef("'Explorer: ' + y_metric + ' against ' + x_metric"),
        subtitle="one point per device x lever x workload; pick the metrics below the chart"))


def trace_timeline(rows: list[dict]) -> alt.VConcatChart:
    """The trace: a timeline of steps per request (draft passes grey, target pass by bound, tokens emitted
    printed), and each speculative step's drafted tokens split into accepted, rejected and the target's own."""
    data = _data(rows)
    lane = alt.Y("lane:N", title=None)
    tip = ["lane:N", "pass_index:Q", "pass_kind:N", alt.Tooltip("start_ms:Q", format=".3f"),
           alt.Tooltip("verify_start_ms:Q", format=".3f"), alt.Tooltip("end_ms:Q", format=".3f"),
           "drafted_tokens:Q", "accepted_tokens:Q", "rejected_tokens:Q", "target_token:N", "emitted_tokens:Q",
           "tokens_done:Q", "bound:N"]
    draft = alt.Chart(data).mark_bar(color="#bab0ac", height=14).encode(
        x=alt.X("start_ms:Q", title="time (ms)"), x2="verify_start_ms:Q", y=lane, tooltip=tip)
    target = alt.Chart(data).mark_bar(height=14, stroke="white", strokeWidth=0.5).encode(
        x="verify_start_ms:Q", x2="end_ms:Q", y=lane,
        color=alt.Color("bound:N", scale=BOUND_COLOURS, title="target pass bound"), tooltip=tip)
    label = alt.Chart(data).mark_text(fontSize=8, color="white", align="right", dx=-2).encode(
        x="end_ms:Q", y=lane, text=alt.Text("emitted_tokens:Q"))
    timeline = alt.layer(draft, target, label).properties(
        width=WIDTH + 200, height=alt.Step(22),
        title="Trace timeline: each step (grey = draft passes, coloured = target pass; number = tokens emitted)")
    kinds = ["accepted_tokens", "rejected_tokens", "target_tokens"]
    names = {"accepted_tokens": "accepted draft", "rejected_tokens": "rejected draft",
             "target_tokens": "target token (correction / bonus)"}
    tokens = alt.Chart(data).transform_filter(
        "datum.mode == 'speculative' && datum.pass_kind == 'decode'"
    ).transform_fold(kinds, as_=["kind", "tokens"]).transform_calculate(
        kind_label=" || ".join(f"(datum.kind == {json.dumps(k)} && {json.dumps(v)})" for k, v in names.items()),
        order=f"indexof({json.dumps(kinds)}, datum.kind)",
    ).mark_bar().encode(
        x=alt.X("pass_index:O", title="speculative step"),
        y=alt.Y("tokens:Q", title="tokens"),
        color=alt.Color("kind_label:N", title="drafted / emitted",
                        scale=alt.Scale(domain=list(names.values()), range=["#54a24b", "#e45756", "#4c78a8"])),
        order="order:Q",
        tooltip=["lane:N", "pass_index:Q", "drafted_tokens:Q", "accepted_tokens:Q", "rejected_tokens:Q",
                 "target_token:N", "emitted_tokens:Q"],
    ).properties(width=WIDTH // 2 + 40, height=140).facet(
        column=alt.Column("request:N", title="request"), title="Tokens per speculative step",
    ).resolve_scale(x="independent")
    return alt.vconcat(timeline, tokens).resolve_scale(color="independent")


def validation_scatter(rows: list[dict]) -> alt.VConcatChart:
    """Modelled against measured on log-log axes, one panel per metric, with y = x and the +-25% band.

    Values in base SI (tokens/s of the whole measured system, or seconds), the same range on both axes;
    colour = device, shape = weight format, filled = test split (not fitted on), hollow = train.
    """
    panels = []
    for metric in dict.fromkeys(r["metric"] for r in rows):
        mine = [dict(r, split_fill=r["split"] == "test") for r in rows if r["metric"] == metric]
        a = min(min(r["measured_si"], r["modelled_si"]) for r in mine) * 0.8
        b = max(max(r["measured_si"], r["modelled_si"]) for r in mine) * 1.25
        xs = [a * (b / a) ** (i / 20) for i in range(21)]
        ref = _data([{"x": x, "lo": 0.75 * x, "hi": 1.25 * x} for x in xs])
        unit = "s" if metric in ("step_time", "ttft", "tpot", "itl", "e2e_latency") else "tok/s"
        scale = alt.Scale(type="log", domain=[a, b], nice=False, clamp=True)
        x = alt.X("x:Q", title=f"measured ({unit})", scale=scale)
        band = alt.Chart(ref).mark_area(opacity=0.15, color="#4c78a8").encode(
            x=x, y=alt.Y("lo:Q", title=f"modelled ({unit})", scale=scale), y2="hi:Q")
        line = alt.Chart(ref).mark_line(color="black", strokeDash=[4, 3]).encode(x=x, y=alt.Y("x:Q", scale=scale))
        points = alt.Chart(_data(mine)).mark_point(size=50).encode(
            x=alt.X("measured_si:Q", scale=scale), y=alt.Y("modelled_si:Q", scale=scale),
            color=alt.Color("device:N"), shape=alt.Shape("weight_format:N"),
            fill=alt.condition("datum.split_fill", alt.Color("device:N"), alt.value("transparent")),
            tooltip=["source:N", "setup:N", "measured:Q", "modelled:Q", "unit:N",
                     alt.Tooltip("error_pct:Q", format=".1f")])
        panels.append(alt.layer(band, line, points).properties(width=280, height=280, title=metric))
    rows_of = [alt.hconcat(*panels[i:i + 3]) for i in range(0, len(panels), 3)]
    return alt.vconcat(*rows_of).properties(
        title="Cost model against measurement: y = x, shaded +-25% (filled: test split)")
