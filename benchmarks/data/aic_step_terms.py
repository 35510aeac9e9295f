"""DeepSeek-V3 step terms on B200 from NVIDIA AIConfigurator's measured TensorRT-LLM kernel tables.

aiconfigurator-core (github.com/ai-dynamo/aiconfigurator, Apache-2.0) ships per-layer latencies measured with
TensorRT-LLM under ``aiconfigurator_core/systems/data/b200_sxm/{mla,moe}/trtllm/<version>/``:

  generation_mla_perf.parquet          the generation MLA kernel (absorbed, 128 heads at tp 1), ms per layer,
                                       by KV dtype, batch and cached length (``step``)
  mla_generation_module_perf.parquet   the whole MLA module of a decode step (projections + kernel), by KV
                                       dtype and the projections' GEMM type (bfloat16, fp8_block, nvfp4)
  moe_perf.parquet                     one EP rank's routed experts over ``num_tokens`` tokens of the EP group

This script (aiconfigurator is not a dependency of sweepkit; without ``--dir`` it says so and exits 0) prints,
for points ``BATCH:CONTEXT:KV`` (per attention-DP rank) and ``--moe-tokens`` (per EP group), the tables'
latency interpolated linearly in the batch (in the tokens for the MoE) times the layers (61 MLA, 58 MoE),
so they can be set beside the steady state's terms (benchmarks/bench_step_breakdown.py).

Example:
  python benchmarks/data/aic_step_terms.py --dir .../aiconfigurator_core/systems/data/b200_sxm \\
      --points 896:2047:fp8 384:2047:bfloat16 --moe-tokens 10752 4608
"""

from __future__ import annotations

import argparse
from pathlib import Path

import duckdb
import numpy as np

MLA_LAYERS, MOE_LAYERS = 61, 58
"""DeepSeek-V3's decoder layers and its MoE layers (HF deepseek-ai/DeepSeek-V3 config.json: 61 layers, the
first 3 dense)."""


def _interp(con, sql: str, x: float) -> float:
    pts = con.execute(sql).fetchall()
    xs, ys = np.array([p[0] for p in pts], float), np.array([p[1] for p in pts], float)
    return float(np.interp(x, xs, ys)) if len(xs) else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=None, help="aiconfigurator_core/systems/data/b200_sxm")
    ap.add_argument("--version", default="1.3.0rc20", help="TensorRT-LLM version of the tables")
    ap.add_argument("--points", nargs="*", default=["896:2047:fp8", "384:2047:bfloat16"])
    ap.add_argument("--moe-tokens", nargs="*", type=float, default=[10752.0, 4608.0])
    args = ap.parse_args(argv)
    if not args.dir:
        print("no --dir given: point it at aiconfigurator_core/systems/data/b200_sxm (pip install aiconfigurator)")
        return 0
    root = Path(args.dir)
    mla = root / "mla" / "trtllm" / args.version
    moe = root / "moe" / "trtllm" / args.version / "moe_perf.parquet"
    con = duckdb.connect()
    for point in args.points:
        batch, ctx, kv = point.split(":")
        b = float(batch)
        kernel = _interp(con, f"select batch_size, latency from '{mla / 'generation_mla_perf.parquet'}' where "
                              f"num_heads = 128 and kv_cache_dtype = '{kv}' and step = {int(ctx)} order by 1", b)
        print(f"batch {batch} x {ctx} cached, KV {kv}: generation MLA kernel {kernel * MLA_LAYERS:7.2f} ms / step")
        for gemm in ("bfloat16", "fp8_block", "nvfp4"):
            module = _interp(con, f"select batch_size, latency from '{mla / 'mla_generation_module_perf.parquet'}' "
                                  f"where num_heads = 128 and kv_cache_dtype = '{kv}' and gemm_type = '{gemm}' "
                                  f"and step = {int(ctx) + 1} order by 1", b)
            print(f"    MLA module, {gemm:9s} projections {module * MLA_LAYERS:7.2f} ms / step")
    for tokens in args.moe_tokens:
        for dist in ("balanced", "power_law_1.01"):
            t = _interp(con, f"select num_tokens, latency from '{moe}' where hidden_size = 7168 and inter_size = "
                             f"2048 and num_experts = 256 and topk = 8 and moe_ep_size = 8 and moe_tp_size = 1 and "
                             f"moe_dtype = 'nvfp4' and kernel_source = 'moe_torch_flow_cutlass' and "
                             f"distribution = '{dist}' order by 1", tokens)
            print(f"MoE EP8 NVFP4 (CUTLASS), {tokens:,.0f} tokens, {dist:15s} {t * MOE_LAYERS:7.2f} ms / step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
