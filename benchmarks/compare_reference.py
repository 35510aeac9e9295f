"""Compare a serving run's H100 lever matrix with the reference simulator's published H100 sweep.

The reference's figures (benchmarks/data/reference-matrix-h100.csv: % change from the H100 baseline per lever x
workload x metric; reference-baseline-h100.csv: the baseline's absolute figures) come from the public sweep
record of github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim (the chapter's lever tables). A cell's
verdict is better / worse / same beyond +-2% (higher is better for goodput only); a lever whose capacity is 0
has n/a cost and energy, compared as "n/a".

Prints the share of cells with the same verdict (over the levers present in both), per lever and in total, every
cell that differs, and the baseline's absolute figures against the reference's (+-10%).

Usage: python benchmarks/compare_reference.py [--warehouse W] [--run-id RUN] [--levers a,b] [--json OUT]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parent / "data"
SAME_PCT = 2.0


def verdict(metric: str, pct: float | None) -> str:
    if pct is None or not math.isfinite(pct):
        return "n/a"
    if abs(pct) <= SAME_PCT:
        return "same"
    return "better" if (pct > 0) == (metric == "goodput") else "worse"


def reference_cells() -> dict:
    with open(DATA / "reference-matrix-h100.csv", newline="") as f:
        return {(r["lever"], r["workload"], r["metric"]): (float(r["change_pct"]) if r["change_pct"] else None)
                for r in csv.DictReader(f)}


def ours(wh, run_id: str) -> dict:
    from sweepkit.store.queries import run_query

    t = run_query(wh, "matrix", {"run_id": run_id}, parse_text=False).to_pylist()
    return {(r["lever"], r["workload"], r["metric"]): r["change_pct"] for r in t if r["device"] == "H100"}


def baseline_rows(wh, run_id: str) -> dict:
    sql = ("select c.workload, c.capacity_per_s, c.goodput_per_gpu_per_s as goodput_req_s_per_gpu, "
           "c.cost_per_mtok_usd as usd_per_mtok, c.energy_per_token_j, c.ttft_p99_s_at_ref as ttft_p99_s, "
           "c.tpot_p99_s_at_ref as tpot_p99_s, c.itl_p99_s_at_ref as itl_p99_s from capacity c join runs r using (run_id) "
           "where c.device = 'H100' and c.lever = 'baseline' and r.kind = 'serving' and r.status = 'committed' "
           "and ($run_id = 'latest' or c.run_id = $run_id) order by r.ended_at desc")
    out = {}
    for row in wh.query(sql, {"run_id": run_id}).to_pylist():
        out.setdefault(row["workload"], row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", default=None)
    ap.add_argument("--run-id", default="latest")
    ap.add_argument("--levers", default=None, help="comma-separated levers to compare (default: all in both)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from sweepkit.store import Warehouse

    wh = Warehouse(args.warehouse) if args.warehouse else Warehouse()
    ref, got = reference_cells(), ours(wh, args.run_id)
    keys = [k for k in ref if k in got and (not args.levers or k[0] in args.levers.split(","))]
    by_lever, diffs = defaultdict(lambda: [0, 0]), []
    for k in keys:
        a, b = verdict(k[2], ref[k]), verdict(k[2], got[k])
        by_lever[k[0]][0] += a == b
        by_lever[k[0]][1] += 1
        if a != b:
            diffs.append((*k, ref[k], got[k], a, b))
    same = sum(v[0] for v in by_lever.values())
    print(f"{'lever':22s} same/cells")
    for lv, (s, n) in by_lever.items():
        print(f"{lv:22s} {s:3d}/{n:3d}  {100.0 * s / n:5.1f}%")
    total = len(keys)
    print(f"total: {same}/{total} cells with the reference's verdict ({100.0 * same / max(total, 1):.1f}%)")
    print("\ndiffering cells (lever, workload, metric, reference %, sweepkit %, verdicts):")
    for lv, w, m, r, g, a, b in diffs:
        fmt = lambda x: "n/a" if x is None or not math.isfinite(x) else f"{x:+.1f}"  # noqa: E731
        print(f"  {lv:20s} {w:17s} {m:17s} {fmt(r):>9s} {fmt(g):>9s}  {a} -> {b}")
    with open(DATA / "reference-baseline-h100.csv", newline="") as f:
        ref_base = {r["workload"]: r for r in csv.DictReader(f)}
    base = baseline_rows(wh, args.run_id)
    print("\nbaseline, H100: sweepkit vs reference (% difference)")
    worst = 0.0
    for w, row in base.items():
        if w not in ref_base:
            continue
        parts = []
        for k, v in row.items():
            if k == "workload" or k not in ref_base[w] or v is None:
                continue
            r = float(ref_base[w][k])
            d = 100.0 * (float(v) / r - 1.0) if r else float("nan")
            worst = max(worst, abs(d)) if math.isfinite(d) else worst
            parts.append(f"{k} {float(v):.4g} vs {r:.4g} ({d:+.1f}%)")
        print(f"  {w}: " + "; ".join(parts))
    print(f"largest baseline difference: {worst:.1f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(same=same, cells=total, diffs=diffs,
                                                   by_lever={k: v for k, v in by_lever.items()}), indent=2))


if __name__ == "__main__":
    main()
