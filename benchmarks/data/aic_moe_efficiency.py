"""Grouped MoE GEMM efficiency of a device x format from NVIDIA AIConfigurator's measured MoE kernel tables.

aiconfigurator-core (github.com/ai-dynamo/aiconfigurator, Apache-2.0) ships measured MoE layer latencies per
GPU and framework under ``aiconfigurator_core/systems/data/<gpu>/moe/<framework>/<version>/moe_perf.parquet``
(columns moe_dtype, kernel_source, num_tokens, hidden_size, inter_size, topk, num_experts, moe_tp_size,
moe_ep_size, distribution, latency in ms: one EP rank's routed experts over ``num_tokens`` tokens of the whole
EP group). This script reads one table from a path given on the command line (aiconfigurator is not a
dependency of sweepkit; without a path it says so and exits 0) and prices the same layer with sweepkit's MoE
class (:func:`sweepkit.costmodel.efficiency.step_time_by_class`, one decode step of T tokens over ep GPUs,
the catalogue model's MoE layers, divided by their count):

    t(T) = max(2 P_e k T / (P ep k_fmt e(T k / E_read(T))),  P_e E_read(T) w / (B ep b_w)) x s_tp
    s_tp = 1 + l (ep - 1) (D L / P_mm) / r_0          (sweepkit.costmodel.efficiency.tp_stretch, r_0 = 1e-5)
    e(t) = e_max t / (t + T_half)

with the profile's weight_bw_eff b_w and tp_loss l held (an entry of a shipped profile, default the
TensorRT-LLM profile's B200 fp4 entry). e_max and T_half minimise the squared log error over the table's token
counts in [--min-tokens, --max-tokens] (grid search), per shape; the median over the shapes is printed as the
suggested entry (``--joint`` also fits one pair over every shape at once, for comparison). Rows of the table's
``balanced`` routing (expert imbalance is the layout's, not the kernel's).

Example:
  AIC=.../site-packages/aiconfigurator_core
  python benchmarks/data/aic_moe_efficiency.py \\
      --table $AIC/systems/data/b200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import duckdb
import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.catalogue import get_device, get_format, get_model
from sweepkit.catalogue.efficiency import profile_for
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time_by_class
from sweepkit.costmodel.passes import Work

POINTS = ("deepseek-v3:8", "qwen3-235b-a22b:8", "qwen3-235b-a22b:4", "qwen3-30b-a3b:1",
          "gpt-oss-120b:1:w4a8_mxfp4_mxfp8", "gpt-oss-120b:8:w4a8_mxfp4_mxfp8")
"""Default (catalogue model, EP degree[, table dtype]) shapes: DEP8 and TP+EP layouts of the Blackwell FP4 MoE
deployments (DeepSeek-R1 NVFP4, Qwen3 NVFP4, gpt-oss-120b's MXFP4 experts with MXFP8 activations)."""
KERNELS = {"nvfp4": "moe_torch_flow_cutlass", "w4a8_mxfp4_mxfp8": "moe_torch_flow", "fp8_block": "deepgemm",
           "fp8": "moe_torch_flow_cutlass"}
"""Table dtype -> kernel source priced (TensorRT-LLM's default CUTLASS MoE backend; gpt-oss's MXFP4 flow; DeepGEMM for
block-scaled FP8)."""


def table_latency(table: str, dtype: str, kernel: str, model, ep: int) -> tuple[np.ndarray, np.ndarray]:
    """(num_tokens, latency in s) of the table's balanced rows for ``model``'s MoE layer at EP ``ep``."""
    rows = duckdb.connect().execute(
        "select num_tokens, latency from read_parquet(?) where moe_dtype = ? and kernel_source = ? and "
        "hidden_size = ? and inter_size = ? and num_experts = ? and topk = ? and moe_tp_size = 1 and "
        "moe_ep_size = ? and distribution = 'balanced' order by num_tokens",
        [table, dtype, kernel, model.d_model, model.moe_d_ff, model.n_experts, model.experts_per_token,
         ep]).fetchall()
    if not rows:
        raise SystemExit(f"{table}: no balanced {dtype} {kernel} rows for {model.name} at ep {ep}")
    arr = np.array(rows, dtype=float)
    return arr[:, 0], arr[:, 1] * 1e-3


def priced(tokens: np.ndarray, model, device: str, fmt: str, fields: dict, ep: int) -> np.ndarray:
    """sweepkit's MoE class per MoE layer (s) at each token count, under ``fields`` (moe_eff_max and
    moe_tokens_half may be arrays broadcasting against ``tokens``)."""
    dev = get_device(device)
    net = jax.tree_util.tree_map(lambda a: a[0], model_arrays([model]))
    d = jax.tree_util.tree_map(lambda a: a[0], device_arrays([dev]))
    moe = {k: jnp.asarray(fields[k], dtype=jnp.float64) for k in ("moe_eff_max", "moe_tokens_half")}
    eff = dataclasses.replace(efficiency_arrays({**fields, "moe_eff_max": 0.5, "moe_tokens_half": 0.0}), **moe)
    t = np.asarray(tokens, dtype=float)
    zero = np.zeros_like(t)
    work = Work(tokens=t, attn_pairs=zero, kv_tokens=zero)
    w = get_format(fmt).bytes_per_value
    parts = step_time_by_class(work, Work(tokens=zero, attn_pairs=zero, kv_tokens=zero), net, d, eff,
                               float(ep), w, w, dev.speedup(fmt))
    return np.asarray(parts["moe"]) / model.n_moe_layers


def fit(tokens: np.ndarray, t_s: np.ndarray, model, device: str, fmt: str, fields: dict,
        ep: int) -> tuple[float, float]:
    """(e_max, T_half) minimising the squared log error of :func:`priced` against ``t_s`` by grid search."""
    e = np.linspace(0.05, 1.0, 96)
    h = np.arange(0.0, 2048.0 + 1, 8.0)
    best, arg = np.inf, (0.0, 0.0)
    for em in e:
        mod = priced(tokens[None, :], model, device, fmt, {**fields, "moe_eff_max": em,
                                                            "moe_tokens_half": h[:, None]}, ep)
        err = ((np.log(mod) - np.log(t_s)[None, :]) ** 2).sum(-1)
        j = int(np.argmin(err))
        if err[j] < best:
            best, arg = err[j], (float(em), float(h[j]))
    return arg


def joint_fit(shapes: list[tuple], device: str, fmt: str, fields: dict) -> tuple[float, float]:
    """(e_max, T_half) minimising the squared log error summed over every shape's token counts: ``shapes`` of
    (model, ep, token counts, table seconds)."""
    e = np.linspace(0.05, 1.0, 96)
    h = np.arange(0.0, 2048.0 + 1, 8.0)
    err = np.zeros((len(e), len(h)))
    for model, ep, tokens, t_s in shapes:
        for i, em in enumerate(e):
            mod = priced(tokens[None, :], model, device, fmt, {**fields, "moe_eff_max": em,
                                                                "moe_tokens_half": h[:, None]}, ep)
            err[i] += ((np.log(mod) - np.log(t_s)[None, :]) ** 2).sum(-1)
    i, j = np.unravel_index(np.argmin(err), err.shape)
    return float(e[i]), float(h[j])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Example: python benchmarks/data/aic_moe_efficiency.py --table "
                                        "AIC/systems/data/b200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet")
    ap.add_argument("--table", help="an AIConfigurator moe_perf.parquet (skips when not given)")
    ap.add_argument("--dtype", default="nvfp4", choices=sorted(KERNELS))
    ap.add_argument("--device", default="B200")
    ap.add_argument("--format", default="fp4", help="sweepkit compute format of the entry")
    ap.add_argument("--framework", default="TensorRT-LLM", help="shipped profile whose other fields are held")
    ap.add_argument("--points", nargs="+", default=list(POINTS), help="MODEL:EP shapes (default: %(default)s)")
    ap.add_argument("--min-tokens", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=16384)
    ap.add_argument("--joint", action="store_true", help="also one (e_max, T_half) fitted over every shape at once")
    args = ap.parse_args(argv)
    if not args.table:
        print("no AIConfigurator table given (--table not set): nothing to do")
        return 0
    if not Path(args.table).is_file():
        raise SystemExit(f"--table: no such file {args.table} (an AIConfigurator moe_perf.parquet)")
    fields = profile_for(args.framework).fields(args.device, args.format)
    print(f"{args.device} {args.format} under the {args.framework} profile: moe_eff_max "
          f"{fields['moe_eff_max']:.4f}, moe_tokens_half {fields['moe_tokens_half']:.1f} (held: weight_bw_eff "
          f"{fields['weight_bw_eff']:.4f}, tp_loss {fields['tp_loss']:.4f}); table {args.table}")
    fits, shapes = [], []
    for point in args.points:
        name, ep, dtype = (point.split(":") + [args.dtype])[:3]
        if not ep.isdigit() or int(ep) < 1 or dtype not in KERNELS:
            raise SystemExit(f"--points: {point!r} is not MODEL:EP[:DTYPE] with DTYPE one of {', '.join(KERNELS)}")
        model, ep = get_model(name), int(ep)
        tokens, t_s = table_latency(args.table, dtype, KERNELS[dtype], model, ep)
        keep = (tokens >= args.min_tokens) & (tokens <= args.max_tokens)
        tokens, t_s = tokens[keep], t_s[keep]
        before = priced(tokens, model, args.device, args.format, fields, ep)
        e_max, t_half = fit(tokens, t_s, model, args.device, args.format, fields, ep)
        after = priced(tokens, model, args.device, args.format,
                       {**fields, "moe_eff_max": e_max, "moe_tokens_half": t_half}, ep)
        fits.append((e_max, t_half))
        shapes.append((model, ep, tokens, t_s))
        print(f"{name} ep{ep}: moe_eff_max = {e_max:.3f}, moe_tokens_half = {t_half:.0f}; median |error| over "
              f"{len(tokens)} token counts: profile {np.median(abs(before / t_s - 1)):.0%}, fitted "
              f"{np.median(abs(after / t_s - 1)):.0%}")
        for i in range(0, len(tokens), max(1, len(tokens) // 6)):
            print(f"  T {int(tokens[i]):6d}: table {t_s[i] * 1e3:7.4f} ms, profile {before[i] * 1e3:7.4f} ms "
                  f"({before[i] / t_s[i] - 1:+.0%}), fitted {after[i] * 1e3:7.4f} ms ({after[i] / t_s[i] - 1:+.0%})")
    e_med, h_med = np.median(fits, axis=0)
    e_j, h_j = joint_fit(shapes, args.device, args.format, fields) if args.joint else (e_med, h_med)
    for label, (e_x, h_x) in (("median of the shapes' fits", (e_med, h_med)), ("one fit over every shape", (e_j, h_j))):
        print(f"{label}: moe_eff_max = {e_x:.3f}, moe_tokens_half = {h_x:.0f}")
        for model, ep, tokens, t_s in shapes:
            mod = priced(tokens, model, args.device, args.format, {**fields, "moe_eff_max": e_x,
                                                                   "moe_tokens_half": h_x}, ep)
            print(f"  {model.name} ep{ep}: median |error| {np.median(abs(mod / t_s - 1)):.0%}, "
                  f"bias {np.median(mod / t_s - 1):+.0%}")
        if not args.joint:
            break
    print(f"suggested (the median of {len(fits)} shapes):\nmoe_eff_max = {e_med:.3f}\nmoe_tokens_half = {h_med:.0f}.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
