"""Measured expert- and data-parallel rows priced by the serving engine, with and without their layouts.

Prints, for every packaged row with ep, dp or pp > 1: its layout (sweepkit.validation.row_layout), the
measured value, the value priced as tensor parallelism only (the row with ep = dp = 1) and with its layout,
then the median |error| of both over the rows each prices, and the wall time. First, LMSYS's 96-H100
DeepSeek-V3 decode pool (EP72 over 9 nodes, 256 + 32 redundant experts = 288 slots, 4 per GPU; 256 rows of
2,000 cached tokens per GPU: 22,282 output tok/s per node, lmsys.org/blog/2025-05-05-large-scale-ep) as one
decode step of that layout on InfiniBand NDR, with and without two-batch overlap (the blog's ablation: +25.5 %
at 256 tokens per GPU, -27 % at 32; 22,310 / 1.255 = 17,777 tok/s per node without it), and DeepSeek's own
profile as the same blog quotes it (EP128, 128 rows of 4,096 cached tokens per GPU with overlap: 18,598 tok/s
per node, on H800, priced as H100: the same SMs, clocks and HBM), and LMSYS's EP32 prefill (16,384 tokens per
GPU, 4,096-token prompts: 59,337 input tok/s per node with simulated perfect EPLB, 50,302 with the default expert
distribution) under the SGLang profile. Then the steady state (``--steady``): every
expert- or data-parallel row
the analytic steady state prices, under the seed constants and under its framework's shipped profile,
median |error| per slice and split.

The serving engine prices each row's passes with its framework's shipped profile (``--profile reference``:
the reference constants).

Usage: PYTHONPATH=. nice python benchmarks/bench_layouts.py [--requests 128] [--lmsys-only] [--steady]
       [--profile reference]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from sweepkit.validation.measurements import load_measurements
from sweepkit.validation.row_layout import row_layout
from sweepkit.validation.serving_points import MODELLED, serving_status
from sweepkit.validation.serving_runs import evaluate_serving_points


def _price(rows, profile=None):
    ok = [m for m in rows if serving_status(m) == MODELLED]
    values = evaluate_serving_points(ok, profile=profile) if ok else []
    return {m.row: v for m, v in zip(ok, values)}


LMSYS_DECODE_TOK_S_PER_NODE = 22282.0
"""Output tokens/s per 8-GPU node of LMSYS's EP72 decode pool at 256 rows per GPU, 2,000-token inputs."""


LMSYS_NO_TBO_TOK_S_PER_NODE = 22310.0 / 1.255
"""The same without two-batch overlap: the blog's 22,310 tok/s at 256 tokens per GPU over its measured +25.5 %."""
DEEPSEEK_PROFILE_TOK_S_PER_NODE = 18598.0
"""DeepSeek's profile-data decode (EP128, 128 rows of 4,096 cached tokens per GPU, two-batch overlap), per node."""


def lmsys_step_s(rows: int, *, overlap: bool, imbalance: float, profile=None, ep: int = 72,
                 ctx: float = 2000.0) -> float:
    """One decode step of DeepSeek-V3 FP8 on ``ep`` H100s as EP``ep`` (72: 288 slots; DP attention on every GPU,
    nodes of 8 on InfiniBand NDR), ``rows`` rows of ``ctx`` cached tokens per GPU; under ``profile`` when given."""
    import jax
    import jax.numpy as jnp

    from sweepkit.catalogue import get_device, get_model
    from sweepkit.costmodel.efficiency import efficiency_arrays
    from sweepkit.costmodel.layout import check_layout, make_layout
    from sweepkit.costmodel.passes import decode_work
    from sweepkit.costmodel.steps import instance, target_pass_cost

    dev, model = get_device("H100"), get_model("deepseek-v3")
    redundant = -model.n_experts % ep                     # 32 at EP72: 288 slots, as deployed
    check_layout(model, dev, 1, ep, ep, f"EP{ep}", 8, redundant)
    with jax.enable_x64(True):
        f = jnp.float64
        lay = make_layout(dev, model, 1, dp=ep, ep=ep, imbalance=imbalance, compute_format="fp8", gpus_per_node=8,
                          redundant_experts=redundant, two_batch_overlap=overlap, dtype=f)
        inst = instance(dev, model, None, 1, "fp8", "fp8", "fp8", dtype=f, layout=lay)
        if profile is not None:
            import dataclasses
            inst = dataclasses.replace(inst, efficiency=efficiency_arrays(profile.fields("H100", "fp8"), f))
        b = rows * ep
        return float(target_pass_cost(inst, decode_work(f(b * ctx), f(b))).t_s)


LMSYS_PREFILL_TOK_S_PER_NODE = {1.0: 59337.0, 1.3: 50302.0}
"""Input tokens/s per node of LMSYS's EP32 prefill (4 x 8 H100, 16,384 tokens per GPU, 4,096-token prompts, two-batch
overlap), by expert imbalance: 1.0 the simulated perfect EPLB, 1.3 (sweepkit's default without a balancer) the
default expert distribution (lmsys.org/blog/2025-05-05-large-scale-ep, "Overall Throughput")."""


def lmsys_prefill_step_s(imbalance: float, profile, *, tokens_per_gpu: float = 16384.0, prompt: float = 4096.0,
                         ep: int = 32) -> float:
    """One prefill step of DeepSeek-V3 FP8 on ``ep`` H100s as EP``ep`` (DP attention on every GPU, nodes of 8 on
    InfiniBand NDR, two-batch overlap), ``tokens_per_gpu`` prompt tokens per GPU in prompts of ``prompt`` tokens,
    under ``profile`` (the class split of :func:`sweepkit.costmodel.profiled.measured_pass_s`)."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    from sweepkit.catalogue import get_device, get_model
    from sweepkit.costmodel.efficiency import efficiency_arrays
    from sweepkit.costmodel.layout import layout_work, make_layout
    from sweepkit.costmodel.moe_comm import moe_all_to_all, overlap_microbatches
    from sweepkit.costmodel.passes import Work, combine
    from sweepkit.costmodel.profiled import measured_pass_s
    from sweepkit.costmodel.steps import instance

    dev, model = get_device("H100"), get_model("deepseek-v3")
    with jax.enable_x64(True):
        f = jnp.float64
        lay = make_layout(dev, model, 1, dp=ep, ep=ep, imbalance=imbalance, compute_format="fp8", gpus_per_node=8,
                          two_batch_overlap=True, dtype=f)
        inst = instance(dev, model, None, 1, "fp8", "fp8", "fp8", dtype=f, layout=lay)
        inst = dataclasses.replace(inst, efficiency=efficiency_arrays(profile.fields("H100", "fp8"), f))
        t = f(tokens_per_gpu * ep)
        pre, dec = Work(t, t * (prompt + 1.0), t), Work(f(0.0), f(0.0), f(0.0))
        extra = layout_work(lay, inst.target, combine(dec, pre), inst.weight_bytes, inst.kv_bytes)
        mb = overlap_microbatches(lay, 1.0, t)
        a2a_s, _ = moe_all_to_all(lay, inst.device, inst.target, t / (mb * ep), f(1.0))
        return float(measured_pass_s(inst, dec, pre, extra, (lay.moe_layers, a2a_s)))


def lmsys_prefill() -> None:
    """LMSYS's EP32 prefill at 16,384 tokens per GPU under the SGLang profile, input tok/s per node."""
    from sweepkit.catalogue.efficiency import profile_for

    for imb, measured in LMSYS_PREFILL_TOK_S_PER_NODE.items():
        per_node = 8 * 16384 / lmsys_prefill_step_s(imb, profile_for("SGLang"))
        print(f"LMSYS prefill EP32, 16,384 tokens per GPU, 4,096-token prompts, TBO, SGLang profile, I = {imb}: "
              f"{per_node:,.0f} input tok/s per node vs {measured:,.0f} measured ({per_node / measured - 1:+.1%})")


def lmsys_decode() -> None:
    """LMSYS's EP72 decode headline and its two-batch-overlap ablation (module doc), per-node tokens/s."""
    from sweepkit.catalogue.efficiency import packaged_profile, profile_for
    from sweepkit.costmodel.layout import IMBALANCE, IMBALANCE_EPLB

    for label, prof in (("reference constants", None), ("seed profile (classes summed)", packaged_profile()),
                        ("SGLang profile", profile_for("SGLang"))):
        for name, imb in (("EPLB", IMBALANCE_EPLB), ("no balancer", IMBALANCE)):
            on, off = (lmsys_step_s(256, overlap=o, imbalance=imb, profile=prof) for o in (True, False))
            per_node = 8 * 256 / on
            print(f"LMSYS decode EP72 x 288 slots, {label}, I = {imb} ({name}), TBO: step {on * 1e3:.1f} ms, "
                  f"{per_node:,.0f} tok/s per node vs {LMSYS_DECODE_TOK_S_PER_NODE:,.0f} measured "
                  f"({per_node / LMSYS_DECODE_TOK_S_PER_NODE - 1:+.1%}); without TBO {8 * 256 / off:,.0f} vs "
                  f"{LMSYS_NO_TBO_TOK_S_PER_NODE:,.0f} ({8 * 256 / off / LMSYS_NO_TBO_TOK_S_PER_NODE - 1:+.1%}) "
                  f"(TBO gain {off / on - 1:+.1%})")
        ds = 8 * 128 / lmsys_step_s(128, overlap=True, imbalance=IMBALANCE_EPLB, profile=prof, ep=128, ctx=4096.0)
        print(f"  DeepSeek profile EP128, 128 x 4,096 per GPU, TBO ({label}): {ds:,.0f} tok/s per node vs "
              f"{DEEPSEEK_PROFILE_TOK_S_PER_NODE:,.0f} measured ({ds / DEEPSEEK_PROFILE_TOK_S_PER_NODE - 1:+.1%})")
        gains = {r: lmsys_step_s(r, overlap=False, imbalance=IMBALANCE_EPLB, profile=prof)
                 / lmsys_step_s(r, overlap=True, imbalance=IMBALANCE_EPLB, profile=prof) - 1 for r in (32, 128, 256)}
        print(f"  TBO gain by rows per GPU ({label}): " + ", ".join(f"{r}: {g:+.1%}" for r, g in gains.items())
              + " (measured: 32: -27 %, 256: +25.5 %)")


def steady_layout_rows() -> None:
    """Median |error| of the EP / DP rows the steady state prices: seed constants against shipped profiles."""
    import numpy as np

    from sweepkit.catalogue.efficiency import packaged_profile, profile_for
    from sweepkit.validation.framework_fit import slice_of
    from sweepkit.validation.profiles import profile_values, steady_row

    points, _, _ = load_measurements()
    rows = [m for m in points if max(m.ep, m.dp, m.pp) > 1 and steady_row(m)]
    meas = np.array([m.value_si for m in rows])
    seed = 100 * (profile_values(rows, [packaged_profile()] * len(rows)) / meas - 1)
    fitted = 100 * (profile_values(rows, [profile_for(m.framework) for m in rows]) / meas - 1)
    groups: dict = {}
    for i, m in enumerate(rows):
        for key in ((slice_of(m), m.framework.split()[0], m.split), ("all", "", m.split), ("all", "", "both")):
            groups.setdefault(key, []).append(i)
    print(f"{'slice':22} {'framework':9} {'split':6} {'rows':>4} {'seed':>16} {'shipped profile':>16}")
    for (name, fw, split), idx in sorted(groups.items()):
        a, b = seed[idx], fitted[idx]
        print(f"{name:22} {fw:9} {split:6} {len(idx):4d} {np.median(np.abs(a)):7.1f} ({np.median(a):+6.1f}) "
              f"{np.median(np.abs(b)):7.1f} ({np.median(b):+6.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=128, help="requests simulated per row")
    ap.add_argument("--lmsys-only", action="store_true", help="only the LMSYS decode figure")
    ap.add_argument("--steady", action="store_true", help="also the steady state's errors, seed against profiles")
    ap.add_argument("--profile", default=None, choices=["reference"],
                    help="price the engine's passes with the reference constants (default: each row's framework's "
                         "shipped profile)")
    args = ap.parse_args()
    lmsys_decode()
    lmsys_prefill()
    if args.steady:
        steady_layout_rows()
    if args.lmsys_only:
        return
    points, _, _ = load_measurements()
    rows = [dataclasses.replace(m, requests=args.requests) for m in points if max(m.ep, m.dp, m.pp) > 1]
    t0 = time.perf_counter()
    tp_only = _price([dataclasses.replace(m, ep=1, dp=1, pp=1) for m in rows], args.profile)
    t1 = time.perf_counter()
    laid = _price(rows, args.profile)
    t2 = time.perf_counter()
    def err(v, m):
        return abs(v / m.value_si - 1.0)
    print(f"{'row':>5} {'source':26} {'model':12} {'dev':6} {'metric':16} {'layout':22} {'measured':>10} "
          f"{'tp-only':>10} {'layout':>10}")
    for m in rows:
        try:
            lay = row_layout(m)
            desc = f"{lay.instances}x tp{lay.tp} dp{lay.dp} ep{lay.ep} pp{lay.pp} n{lay.nodes}"
        except Exception as exc:  # noqa: BLE001 - the reason is the report
            desc = "-"
            why = str(exc)
        a, b = tp_only.get(m.row), laid.get(m.row)
        def fmt(v):
            return f"{v:10.4g}" if v is not None else f"{'-':>10}"
        print(f"{m.row:5d} {m.source[:26]:26} {m.model[:12]:12} {m.device[:6]:6} {m.metric[:16]:16} {desc:22} "
              f"{m.value_si:10.4g} {fmt(a)} {fmt(b)}")
        if b is None:
            print(f"      {serving_status(m)[:150] if desc != '-' else why[:150]}")
    for name, got in (("tp-only", tp_only), ("layout", laid)):
        errs = [err(v, m) for m in rows if (v := got.get(m.row)) is not None]
        med = statistics.median(errs) if errs else float("nan")
        print(f"{name:8}: {len(errs)} of {len(rows)} rows priced, median |error| {med:.1%}")
    both = [m for m in rows if m.row in tp_only and m.row in laid]
    if both:
        print(f"rows priced both ways ({len(both)}): median |error| tp-only "
              f"{statistics.median(err(tp_only[m.row], m) for m in both):.1%}, layout "
              f"{statistics.median(err(laid[m.row], m) for m in both):.1%}")
    print(f"wall: tp-only {t1 - t0:.0f} s, layout {t2 - t1:.0f} s ({args.requests} requests per row)")


if __name__ == "__main__":
    main()
