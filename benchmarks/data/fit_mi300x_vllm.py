"""Fit the vLLM profile's MI300X FP8 entry on the AMD train rows (dstack's and Oracle's Llama-3.1-405B runs).

    python benchmarks/data/fit_mi300x_vllm.py [--write]

Two stages, every other field of the shipped vLLM profile held (the framework overheads are vLLM-wide and stay):

1. gemm_eff_max, gemm_tokens_half and allreduce_overhead_s jointly on the 38 ``dstack-llama405b-mi300x`` rows
   (max throughput of bursts of 4-256, TP8 and TP4), minimising sum_i log(model_i / measured_i)^2 under the
   analytic steady state (:func:`sweepkit.validation.profiles.profile_values`): a grid, then Nelder-Mead in log
   space. Those runs used vLLM 0.6.3 with ``--enforce-eager`` (no HIP graphs: every kernel launched from the
   host), so their fixed time per layer is host launch work a graph-mode release does not pay; the fitted
   allreduce_overhead_s of this stage absorbs it and is not kept.
2. allreduce_overhead_s alone, with the curve of stage 1 held, on the 9 ``oracle-blog-llama405b-mi300x`` rows
   (``benchmark_latency.py``: one batch of 1-256 requests, 128 in / 128 out, default settings, so graphs),
   by bounded scalar minimisation of the same loss. Each row's time is the cost model's step times summed
   over the batch: its prompts in chunks of the profile's token budget, then 127 decode steps
   (:func:`sweepkit.costmodel.efficiency.step_time`, the pricing the serving engine calls per step).

No test row (``rocm-vllm-dev-docker``) and no check row (``dstack-deepseek-r1-mi300x``) is read. Prints each
stage's values and losses; ``--write`` appends the entry to sweepkit/catalogue/profile-vllm.toml (replacing an
existing MI300X FP8 entry).
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from pathlib import Path

import numpy as np

KEY = ("MI300X", "fp8")
STAGE1 = ("gemm_eff_max", "gemm_tokens_half", "allreduce_overhead_s")
GRID = {"gemm_eff_max": (0.15, 0.3, 0.5, 0.8), "gemm_tokens_half": (10.0, 100.0, 500.0, 2000.0),
        "allreduce_overhead_s": (1e-6, 1e-5, 4e-5)}
PROFILE = Path(__file__).resolve().parents[2] / "sweepkit" / "catalogue" / "profile-vllm.toml"


def batch_latency_s(m, fields: dict, budget: float) -> float:
    """Seconds of one batch of ``m.concurrency`` requests: prompt chunks of ``budget`` tokens, then the decode
    steps of the remaining output tokens (each row's context growing by one a step)."""
    import jax
    import jax.numpy as jnp

    from sweepkit.catalogue import get_device, get_format, get_model
    from sweepkit.costmodel.arrays import device_arrays, model_arrays
    from sweepkit.costmodel.efficiency import efficiency_arrays, step_time
    from sweepkit.costmodel.work import chunk_work, decode_work

    dev, net = device_arrays(get_device(m.device)), model_arrays(get_model(m.model))
    wb, kvb = get_format(m.weight_format).bytes_per_value, get_format(m.kv_format).bytes_per_value
    k, tp, b = get_device(m.device).speedup(m.compute_format), float(m.tp), float(m.concurrency)
    eff = efficiency_arrays(fields)
    none = decode_work(0.0, 0.0)
    total = b * m.input_tokens
    chunks = [min(budget, total - s) for s in np.arange(0.0, total, budget)]
    t = sum(float(step_time(none, chunk_work(0.0, n), net, dev, eff, tp, wb, kvb, k)) for n in chunks)
    ctx = jnp.arange(m.output_tokens - 1, dtype=float) + m.input_tokens
    step = jax.vmap(lambda c: step_time(decode_work(b * c, b), chunk_work(0.0, 0.0), net, dev, eff, tp, wb, kvb, k))
    return t + float(jnp.sum(step(ctx)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="append the entry to sweepkit/catalogue/profile-vllm.toml")
    args = ap.parse_args(argv)

    import jax
    from scipy.optimize import minimize, minimize_scalar

    from sweepkit.catalogue.efficiency import profile_for
    from sweepkit.validation.field_refit import with_field
    from sweepkit.validation.framework_fit import fittable, framework_rows
    from sweepkit.validation.measurements import load_measurements
    from sweepkit.validation.profiles import profile_values

    jax.config.update("jax_enable_x64", True)
    points, name, sha = load_measurements(None)
    shipped = profile_for("vLLM")
    base = shipped.fields(*KEY)
    base = {**base, **{f: shipped.default[f] for f in STAGE1}}     # start from the default, not an earlier fit
    prof = shipped
    for f in STAGE1:
        prof = with_field(prof, KEY, f, shipped.default[f])

    dstack = [m for m in framework_rows(points, "vLLM") if m.source == "dstack-llama405b-mi300x"
              and m.split == "train" and fittable(m)]
    measured = np.array([m.value_si for m in dstack])

    def with_values(x):
        p = prof
        for f, v in zip(STAGE1, x):
            p = with_field(p, KEY, f, float(v))
        return p

    def loss_at(x):
        r = np.log(profile_values(dstack, [with_values(x)] * len(dstack)) / measured)
        return float(np.sum(r ** 2))

    def loss1(u):
        return loss_at(np.exp(u))

    start = min(itertools.product(*GRID.values()), key=loss_at)
    opt = minimize(loss1, np.log(start), method="Nelder-Mead", options=dict(xatol=1e-3, fatol=1e-4, maxiter=400))
    x1 = {f: float(v) for f, v in zip(STAGE1, np.exp(opt.x))}
    print(f"stage 1, {len(dstack)} dstack rows: loss {loss_at([base[f] for f in STAGE1]):.3f} -> {opt.fun:.3f};",
          ", ".join(f"{f} {v:.6g}" for f, v in x1.items()))

    oracle = [m for m in points if m.source == "oracle-blog-llama405b-mi300x" and m.split == "train" and fittable(m)]
    budget = shipped.token_budget
    held = {**base, "gemm_eff_max": x1["gemm_eff_max"], "gemm_tokens_half": x1["gemm_tokens_half"]}

    def loss2(overhead_s):
        r = [np.log(batch_latency_s(m, {**held, "allreduce_overhead_s": overhead_s}, budget) / m.value_si)
             for m in oracle]
        return float(np.sum(np.square(r)))

    res = minimize_scalar(loss2, bounds=(0.0, 2e-4), method="bounded", options=dict(xatol=1e-7))
    print(f"stage 2, {len(oracle)} Oracle rows: loss {loss2(0.0):.4f} at 0 -> {res.fun:.4f}; "
          f"allreduce_overhead_s {res.x:.6g}")
    fitted = {"gemm_eff_max": x1["gemm_eff_max"], "gemm_tokens_half": x1["gemm_tokens_half"],
              "allreduce_overhead_s": float(res.x)}
    source = (f"fitted by benchmarks/data/fit_mi300x_vllm.py on the AMD train rows only ({name}, sha256 {sha}): "
              f"gemm_eff_max, gemm_tokens_half with allreduce_overhead_s jointly on the {len(dstack)} "
              f"dstack-llama405b-mi300x rows (vLLM 0.6.3, --enforce-eager; the "
              f"{x1['allreduce_overhead_s'] * 1e6:.1f} us of allreduce_overhead_s fitted there are eager host launch "
              f"work and are not kept), then "
              f"allreduce_overhead_s alone on the {len(oracle)} oracle-blog-llama405b-mi300x batch-latency rows "
              f"with the curve held; the all-reduce itself is priced on the full mesh (sweepkit/costmodel/allreduce.py)")
    entry = "\n".join(['[efficiency."MI300X".fp8]'] + [f"{k} = {v!r}" for k, v in fitted.items()]
                      + [f'source = "{source}"'])
    print(entry)
    if args.write:
        text = re.sub(r'\n\[efficiency\."MI300X"\.fp8\]\n(?:[^\[]*\n)?', "\n", PROFILE.read_text(encoding="utf-8"))
        PROFILE.write_text(text.rstrip("\n") + "\n\n" + entry + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
