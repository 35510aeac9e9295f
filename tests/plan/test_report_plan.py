"""The report's plan chart renders (vl-convert) from report_plan.sql's documented columns."""

from __future__ import annotations

import vl_convert as vlc

from sweepkit.report.plan_chart import plan_frontier
from sweepkit.store import list_queries


def test_the_plan_chart_renders_from_the_documented_columns():
    q = next(x for x in list_queries() if x.name == "report_plan")
    base = {c: None for c, _ in q.columns}
    rows = [dict(base, workload=w, configuration=f"H100 8 GPUs: {i}xtp{8 // i}", device="H100", frontier=i == 2,
                 objective_name="tokens_per_gpu", objective=900.0 + 100 * i, bound=2000.0, ttft_p99_s=0.1 * i,
                 tpot_p99_s=0.01 * i, cost_per_mtok_usd=1.0, energy_per_token_j=0.5, lever_toml="[levers.x]")
            for w in ("chat", "coding-agent") for i in (1, 2, 4)]
    spec = plan_frontier(rows).to_dict()
    assert len(spec["vconcat"]) == 2 and all(len(p["hconcat"]) == 2 for p in spec["vconcat"])
    assert vlc.vegalite_to_png(spec)[:8] == b"\x89PNG\r\n\x1a\n"
