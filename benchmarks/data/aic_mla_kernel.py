"""A roofline fit of NVIDIA's measured generation-MLA kernel (absorbed MLA decode attention) per GPU and KV format.

aiconfigurator-core (github.com/ai-dynamo/aiconfigurator, Apache-2.0) ships the TensorRT-LLM generation MLA
kernel's latency per layer under ``aiconfigurator_core/systems/data/<gpu>/mla/trtllm/<version>/
generation_mla_perf.parquet`` (columns kv_cache_dtype, num_heads, tp_size, batch_size, isl, step, latency in ms).
This script (aiconfigurator is not a dependency of sweepkit; without ``--dir`` it says so and exits 0) fits,
per GPU directory and KV dtype, over the rows at tp 1 with 64 or 128 heads, batch >= 16 and 512-32,768 cached
positions S = isl + step, one layer's time

    t = t_call + R t_row + max(F / R_f,  K kv / R_b)
    F = 2 R S H (2 d_c + d_r)          (QK over d_c + d_r = 576 values, PV over d_c = 512)
    K = R S (d_c + d_r)                (the latent cache read once)

(R rows, H heads, kv bytes per value) by least squares on the log of the time, from four starting compute rates,
R_b at most the GPU's HBM peak (devices.toml), and prints R_f, R_b, t_row, t_call and the fit's median and largest |error|.
``--ratios`` prints instead, per GPU and heads, what an FP8 latent cache does to the kernel's time: the ratio
t(FP8 KV) / t(BF16 KV) over the table's points measured in both (same heads, rows and cached positions; rows
>= 64, 2,048-16,384 cached), median and range. A cache read at one byte rate for both would give 0.5. Beside
it, the ratio the shipped TensorRT-LLM profile prices (:func:`priced_ratio`: its attention class, the GPU's
entry for the DeepSeek checkpoints' format, FP4 on Blackwell and FP8 before). docs/validation.md ("The expert
imbalance on the busiest EP rank's grouped GEMMs", "Tried, not shipped") quotes its output.

Example:
  AIC=.../site-packages/aiconfigurator_core/systems/data
  python benchmarks/data/aic_mla_kernel.py --dir $AIC/b200_sxm $AIC/h200_sxm $AIC/h100_sxm
"""

from __future__ import annotations

import argparse
from pathlib import Path

import duckdb
import numpy as np
from scipy.optimize import least_squares

D_C, D_R = 512, 64
"""DeepSeek-V3's latent and RoPE key widths (HF deepseek-ai/DeepSeek-V3 config.json: kv_lora_rank,
qk_rope_head_dim)."""
KV_BYTES = {"bfloat16": 2.0, "fp8": 1.0}


def table_rows(path: Path, kv: str) -> np.ndarray:
    """(heads, rows, cached positions, seconds) of the table's tp-1 rows for one KV dtype."""
    return np.array(duckdb.connect().execute(
        "select num_heads, batch_size, isl + step, latency / 1e3 from read_parquet(?) where tp_size = 1 and "
        "kv_cache_dtype = ? and batch_size >= 16 and isl + step between 512 and 32768 and num_heads in (64, 128)",
        [str(path), kv]).fetchall(), float)


def fit(rows: np.ndarray, kv_bytes: float, hbm_bytes_per_s: float) -> tuple[np.ndarray, np.ndarray]:
    """((R_f, R_b, t_row, t_call), relative errors) of the module docstring's form over ``rows``."""
    h, b, s, t = rows.T
    flops, kv_read = 2.0 * b * s * h * (2 * D_C + D_R), b * s * (D_C + D_R) * kv_bytes

    def model(p):
        r_f, r_b, t_row, t_call = np.exp(p)
        return t_call + b * t_row + np.maximum(flops / r_f, kv_read / r_b)

    # no rate above the HBM peak nor beyond 20 PFLOP/s; times from 1 ps to 1 ms
    lo, hi = np.log([1e12, 1e10, 1e-12, 1e-12]), np.log([2e16, hbm_bytes_per_s, 1e-3, 1e-3])
    starts = [np.log([r_f, 0.7 * hbm_bytes_per_s, 1e-7, 5e-6]) for r_f in (0.4e15, 0.7e15, 1.2e15, 2.5e15)]
    best = min((least_squares(lambda p: np.log(model(p) / t), x0, bounds=(lo, hi)) for x0 in starts),
               key=lambda r: r.cost)
    return np.exp(best.x), model(best.x) / t - 1.0


def kv_time_ratios(path: Path) -> dict[int, np.ndarray]:
    """{heads: t(FP8 KV) / t(BF16 KV) at each (rows, cached positions) the table measures in both} over the
    tp-1 rows with >= 64 rows and 2,048-16,384 cached positions."""
    rows = duckdb.connect().execute(
        "select b.num_heads, f.latency / b.latency from read_parquet(?) b join read_parquet(?) f using "
        "(num_heads, tp_size, batch_size, isl, step) where b.kv_cache_dtype = 'bfloat16' and f.kv_cache_dtype = "
        "'fp8' and b.tp_size = 1 and b.batch_size >= 64 and b.isl + b.step between 2048 and 16384 "
        "and b.num_heads in (64, 128) order by 1", [str(path), str(path)]).fetchall()
    return {h: np.array([r for hh, r in rows if hh == h]) for h in sorted({h for h, _ in rows})}


def priced_ratio(gpu: str, heads: int) -> float:
    """t(FP8 KV) / t(BF16 KV) of one cached position's decode attention as the shipped TensorRT-LLM profile
    prices it: max(F / (P a), K kv / (B b_kv)) (sweepkit.costmodel.efficiency.step_time_by_class), F = 2 H
    (2 d_c + d_r), K = d_c + d_r, with the profile's a and b_kv for ``gpu`` in fp4 (Blackwell) or fp8."""
    from sweepkit.catalogue import get_device
    from sweepkit.catalogue.efficiency import profile_for

    dev = get_device(gpu)
    fields = profile_for("TensorRT-LLM").fields(gpu, "fp4" if dev.speedup("fp4") > dev.speedup("fp8") else "fp8")

    def t(kv_bytes: float) -> float:
        return max(2.0 * heads * (2 * D_C + D_R) / (dev.peak_flops_per_s * fields["attn_prefill_eff"]),
                   (D_C + D_R) * kv_bytes / (dev.hbm_bytes_per_s * fields["kv_bw_eff"]))

    return t(1.0) / t(2.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", nargs="*", default=[], help="aiconfigurator_core/systems/data/<gpu> folders")
    ap.add_argument("--version", default="1.3.0rc20", help="TensorRT-LLM version of the tables")
    ap.add_argument("--ratios", action="store_true", help="print t(FP8 KV) / t(BF16 KV) per GPU and heads instead")
    args = ap.parse_args(argv)
    if not args.dir:
        print("no --dir given: point it at aiconfigurator_core/systems/data/<gpu> (pip install aiconfigurator)")
        return 0
    from sweepkit.catalogue import get_device

    for folder in map(Path, args.dir):
        gpu = folder.name.split("_")[0].upper()
        table = folder / "mla" / "trtllm" / args.version / "generation_mla_perf.parquet"
        if args.ratios:
            for heads, r in kv_time_ratios(table).items():
                print(f"{gpu} {heads:3d} heads: t(FP8 KV) / t(BF16 KV) median {np.median(r):.2f}, "
                      f"{r.min():.2f}-{r.max():.2f} ({len(r)} points); priced {priced_ratio(gpu, heads):.2f}")
            continue
        for kv, kv_bytes in KV_BYTES.items():
            (r_f, r_b, t_row, t_call), err = fit(table_rows(table, kv), kv_bytes, get_device(gpu).hbm_bytes_per_s)
            print(f"{gpu} KV {kv:8s} R_f {r_f / 1e15:5.2f} PFLOP/s  R_b {r_b / 1e12:5.2f} TB/s  t_row {t_row * 1e9:5.0f} ns"
                  f"  t_call {t_call * 1e6:5.1f} us  |error| median {np.median(abs(err)):.1%}, max {abs(err).max():.0%}"
                  f" ({len(err)} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
