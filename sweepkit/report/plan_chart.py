"""The report's plan chart: the simulated configurations of the latest plan run, objective against TTFT p99
and TPOT p99, frontier points filled (rows of ``queries/report_plan.sql``)."""

from __future__ import annotations

import altair as alt

WIDTH = 250


def plan_frontier(rows: list[dict]) -> alt.VConcatChart:
    """One row of two panels per workload (objective vs TTFT p99, vs TPOT p99); frontier points filled and
    labelled by hover with their settings and the lever table ``sweepkit simulate`` reads.

    Example:
      >>> row = dict(workload="chat", configuration="H100 1 GPUs: 1xtp1", device="H100", frontier=True,
      ...            objective_name="tokens_per_gpu", objective=900.0, bound=1200.0, ttft_p99_s=0.2,
      ...            tpot_p99_s=0.02, cost_per_mtok_usd=0.9, energy_per_token_j=0.5, lever_toml="[levers.x]")
      >>> sorted(plan_frontier([row]).to_dict()["vconcat"][0]) [:1]
      ['hconcat']
    """
    name = rows[0]["objective_name"] if rows else "tokens_per_gpu"
    y_title = "output tokens/s per GPU" if name == "tokens_per_gpu" else "output tokens per USD"
    tooltip = ["configuration:N", alt.Tooltip("objective:Q", format=",.0f"), alt.Tooltip("bound:Q", format=",.0f"),
               alt.Tooltip("ttft_p99_s:Q", format=".3f"), alt.Tooltip("tpot_p99_s:Q", format=".4f"),
               alt.Tooltip("cost_per_mtok_usd:Q", format=".3f"), alt.Tooltip("energy_per_token_j:Q", format=".3f"),
               "lever_toml:N"]
    panels = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        data = alt.Data(values=[r for r in rows if r["workload"] == workload])
        pair = []
        for x, title in (("ttft_p99_s", "TTFT p99 (s)"), ("tpot_p99_s", "TPOT p99 (s)")):
            base = alt.Chart(data).encode(x=alt.X(f"{x}:Q", title=title, scale=alt.Scale(zero=False)),
                                          y=alt.Y("objective:Q", title=y_title), tooltip=tooltip)
            points = base.mark_point(size=70).encode(
                color=alt.Color("device:N", scale=alt.Scale(scheme="dark2"), title="device"),
                fill=alt.condition("datum.frontier", alt.Color("device:N", scale=alt.Scale(scheme="dark2")),
                                   alt.value("white")),
                shape=alt.Shape("frontier:N", title="on the frontier"))
            pair.append(points.properties(width=WIDTH, height=200, title=f"{workload}: {y_title} vs {title}"))
        panels.append(alt.hconcat(*pair))
    return alt.vconcat(*panels)
