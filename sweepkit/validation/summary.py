"""What a validation run says in aggregate: error by slice, bias, the worst rows, and lever pairs.

Over the modelled rows of a validation table (sweepkit.validation.store.rows), with e = error_pct =
100 (modelled / measured - 1):

    median |e|            the typical miss, either way            bias = median e (> 0: the model is optimistic
                                                                  for throughputs, pessimistic for latencies)

A slice is device x model class (dense / MoE) x weight format x framework (its first word) x metric.

A lever pair is two rows sharing a ``pair_id`` and metric (and latency statistic), one ``:with`` and one
``:without``: measured change = with / without - 1, predicted change the same ratio of the modelled values,
given only where the pair is expressed (the ``:with`` row's ``pair_status``, sweepkit.validation.levers:
every part of the lever is one the model prices, both sides priced the same way). The signs agree when both
changes have the same sign; agreement is counted over the pairs whose measured change is beyond
+-:data:`SIGN_BAND_PCT` (a smaller change is within run-to-run noise). The size error of a pair is
predicted - measured change, in percentage points; :func:`pair_families` gives both per lever family.
"""

from __future__ import annotations

import math

from sweepkit.validation.measurements import LATENCIES

SIGN_BAND_PCT = 5.0
"""%, measured changes within +-5 % do not count toward sign agreement."""
LATENCY = ("ttft", "tpot", "itl")
"""Latency-under-load metrics of the accuracy targets (e2e_latency is reported in its slice)."""


def median(xs: list[float]) -> float | None:
    """The median of ``xs`` (None when empty)."""
    s = sorted(xs)
    n = len(s)
    if not n:
        return None
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def model_class(model: str) -> str:
    """'moe' when the catalogue model has routed experts, 'dense' otherwise ('unknown' when not catalogued)."""
    from sweepkit.catalogue import get_model
    from sweepkit.errors import InputError

    try:
        return "moe" if get_model(model).n_experts > 0 else "dense"
    except InputError:
        return "unknown"


def framework_family(framework: str) -> str:
    """'TensorRT-LLM v0.17 (...)' -> 'TensorRT-LLM' (the first word; '' stays '')."""
    return framework.split()[0] if framework.split() else ""


def modelled(table: list[dict]) -> list[dict]:
    """Rows with an error (status modelled and a finite value)."""
    return [r for r in table if r.get("error_pct") is not None and math.isfinite(r["error_pct"])]


def stats(rows: list[dict]) -> dict:
    """{'n', 'median_abs_error_pct', 'bias_pct'} of modelled rows."""
    errs = [r["error_pct"] for r in rows]
    return {"n": len(errs), "median_abs_error_pct": median([abs(e) for e in errs]), "bias_pct": median(errs)}


def by_slice(table: list[dict]) -> list[dict]:
    """One dict per slice (device, model_class, weight_format, framework, metric) with :func:`stats`,
    largest median |error| first."""
    groups: dict[tuple, list[dict]] = {}
    for r in modelled(table):
        key = (r["device"], model_class(r["model"]), r["weight_format"], framework_family(r["framework"]),
               r["metric"])
        groups.setdefault(key, []).append(r)
    out = [dict(zip(("device", "model_class", "weight_format", "framework", "metric"), k), **stats(v))
           for k, v in groups.items()]
    return sorted(out, key=lambda d: -(d["median_abs_error_pct"] or 0.0))


def worst(table: list[dict], n: int = 10) -> list[dict]:
    """The ``n`` modelled rows with the largest |error|."""
    return sorted(modelled(table), key=lambda r: -abs(r["error_pct"]))[:n]


def pairs(table: list[dict]) -> list[dict]:
    """Every lever pair (module docstring): pair_id, lever, metric, statistic, both sides' measured and
    modelled values, measured and predicted change (%), and whether the signs agree (None when a side is
    not modelled or the measured change is within the band)."""
    sides: dict[tuple, dict[str, list[dict]]] = {}
    for r in table:
        lever = r.get("lever") or ""
        side = lever.rsplit(":", 1)[-1] if ":" in lever else ""
        if side not in ("with", "without") or not r.get("pair_id"):
            continue
        stat = r.get("percentile") if r["metric"] in LATENCIES else ""
        for pid in (p.strip() for p in r["pair_id"].split(";") if p.strip()):
            sides.setdefault((pid, r["metric"], stat or ""), {}).setdefault(side, []).append(r)
    out = []
    for (pid, metric, stat), s in sorted(sides.items()):
        if len(s.get("with", [])) != 1 or len(s.get("without", [])) != 1:
            continue
        w, wo = s["with"][0], s["without"][0]
        meas = 100.0 * (w["measured"] / wo["measured"] - 1.0)
        pred = None
        if (w.get("modelled") is not None and wo.get("modelled") is not None and wo["modelled"] > 0
                and w.get("pair_status") == "expressed"):
            pred = 100.0 * (w["modelled"] / wo["modelled"] - 1.0)
        agree = None
        if pred is not None and abs(meas) > SIGN_BAND_PCT:
            agree = (meas > 0) == (pred > 0) and pred != 0.0
        out.append(dict(pair_id=pid, lever=w["lever"].rsplit(":", 1)[0], source=w["source"], metric=metric,
                        statistic=stat, lever_family=w.get("lever_family") or "",
                        pair_status=w.get("pair_status") or "", measured_without=wo["measured"],
                        measured_with=w["measured"], modelled_without=wo.get("modelled"),
                        modelled_with=w.get("modelled"), measured_change_pct=meas, predicted_change_pct=pred,
                        size_error_pct=None if pred is None else pred - meas, sign_agrees=agree))
    return out


def pair_families(pair_rows: list[dict]) -> list[dict]:
    """Per lever family (:func:`pairs`' ``lever_family``): pairs, pairs expressed, pairs counted toward sign
    agreement and agreeing, median |size error| (percentage points) and the median measured and predicted
    change over the expressed pairs; most pairs first."""
    groups: dict[str, list[dict]] = {}
    for p in pair_rows:
        groups.setdefault(p["lever_family"] or "unknown", []).append(p)
    out = []
    for fam, ps in groups.items():
        exp = [p for p in ps if p["predicted_change_pct"] is not None]
        agree, counted = sign_agreement(ps)
        why = sorted({p["pair_status"] for p in ps if p["pair_status"] and p["pair_status"] != "expressed"})
        out.append(dict(lever_family=fam, pairs=len(ps), expressed=len(exp), counted=counted, agree=agree,
                        median_abs_size_error_pct=median([abs(p["size_error_pct"]) for p in exp]),
                        median_measured_change_pct=median([p["measured_change_pct"] for p in exp]),
                        median_predicted_change_pct=median([p["predicted_change_pct"] for p in exp]),
                        not_expressed="; ".join(why)))
    return sorted(out, key=lambda d: (-d["pairs"], d["lever_family"]))


def sign_agreement(pair_rows: list[dict]) -> tuple[int, int]:
    """(pairs whose signs agree, pairs counted): over pairs with both sides modelled and a measured change
    beyond the band."""
    counted = [p for p in pair_rows if p["sign_agrees"] is not None]
    return sum(p["sign_agrees"] for p in counted), len(counted)


def targets(table: list[dict]) -> dict:
    """The accuracy targets: overall and TensorRT-LLM test-split median |error|, latency-under-load median
    |error| on TTFT and on TPOT / ITL, and lever-pair sign agreement."""
    rows = modelled(table)
    trt = [r for r in rows if framework_family(r["framework"]) == "TensorRT-LLM" and r["split"] == "test"]
    p = pairs(table)
    agree, counted = sign_agreement(p)
    return {"overall": stats(rows), "tensorrt_llm_test": stats(trt),
            "ttft": stats([r for r in rows if r["metric"] == "ttft"]),
            "tpot_itl": stats([r for r in rows if r["metric"] in ("tpot", "itl")]),
            "pairs_sign_agree": agree, "pairs_counted": counted, "pairs": len(p),
            "pairs_expressed": sum(x["predicted_change_pct"] is not None for x in p)}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def markdown(table: list[dict]) -> str:
    """The accuracy summary as Markdown: targets, error by slice, lever pairs, the worst rows."""
    t = targets(table)
    lines = ["## Accuracy", "", "| target | rows | median abs. error | bias |", "|---|---|---|---|"]
    for label, key in (("all modelled rows", "overall"), ("TensorRT-LLM, test split", "tensorrt_llm_test"),
                       ("TTFT under load", "ttft"), ("TPOT / ITL under load", "tpot_itl")):
        s = t[key]
        med = "-" if s["median_abs_error_pct"] is None else f"{s['median_abs_error_pct']:.1f}%"
        lines.append(f"| {label} | {s['n']} | {med} | {_pct(s['bias_pct'])} |")
    lines += ["", f"Lever pairs: signs agree in {t['pairs_sign_agree']} of {t['pairs_counted']} pairs with a "
              f"measured change beyond +-{SIGN_BAND_PCT:g}% ({t['pairs_expressed']} of {t['pairs']} pairs "
              "expressed).", "", "## Error by slice", "",
              "| device | class | format | framework | metric | rows | median abs. error | bias |",
              "|---|---|---|---|---|---|---|---|"]
    for s in by_slice(table):
        lines.append(f"| {s['device']} | {s['model_class']} | {s['weight_format']} | {s['framework']} | "
                     f"{s['metric']} | {s['n']} | {s['median_abs_error_pct']:.1f}% | {_pct(s['bias_pct'])} |")
    lines += ["", "## Lever families", "", "| family | pairs | expressed | signs agree | median abs. size error "
              "(points) | median measured | median predicted | not expressed |", "|---|---|---|---|---|---|---|---|"]
    for f in pair_families(pairs(table)):
        size = "-" if f["median_abs_size_error_pct"] is None else f"{f['median_abs_size_error_pct']:.1f}"
        lines.append(f"| {f['lever_family']} | {f['pairs']} | {f['expressed']} | {f['agree']} of {f['counted']} | "
                     f"{size} | {_pct(f['median_measured_change_pct'])} | {_pct(f['median_predicted_change_pct'])} | "
                     f"{f['not_expressed'] or '-'} |")
    lines += ["", "## Lever pairs", "", "| pair | lever | family | metric | measured change | predicted change | "
              "signs |", "|---|---|---|---|---|---|---|"]
    for p in pairs(table):
        sign = {True: "agree", False: "differ", None: "-"}[p["sign_agrees"]]
        lines.append(f"| {p['pair_id']} | {p['lever']} | {p['lever_family'] or '-'} | {p['metric']} {p['statistic']} | "
                     f"{_pct(p['measured_change_pct'])} | {_pct(p['predicted_change_pct'])} | {sign} |")
    lines += ["", "## Worst rows", "", "| source | setup | metric | measured | modelled | error |",
              "|---|---|---|---|---|---|"]
    for r in worst(table):
        lines.append(f"| {r['source']} | {r['setup']} | {r['metric']} | {r['measured']:.4g} {r['unit']} | "
                     f"{r['modelled']:.4g} | {_pct(r['error_pct'])} |")
    return "\n".join(lines) + "\n"
