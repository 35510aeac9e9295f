"""The steady state's step, term by term, for the max-throughput rows of one source.

    python benchmarks/bench_step_breakdown.py --source trtllm-blog-dsr1-best-perf [--measurements FILE]

For every row of the source that a profile prices in the analytic steady state (:mod:`sweepkit.validation.steady`)
prints per attention-DP rank: the KV positions C / dp and how many whole requests (I + O) they hold, the running
requests n / dp, the step token budget, the decode rows, cached positions read and prompt tokens of the mean
step, the share f of steps that carry a prompt chunk (:mod:`sweepkit.validation.prompt_chunks`), then the terms
of a decode-only step and of the step carrying the chunk (:mod:`sweepkit.validation.step_parts`, ms), the
modelled and measured figures and the step time the measurement implies if all n requests run at once
(t = n / (output tokens/s per replica)).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys


def print_row(m) -> None:
    """Print one steady-state row's sizes and step terms (module docstring); x64 is the caller's."""
    import jax
    import jax.numpy as jnp

    from sweepkit.costmodel.efficiency import efficiency_arrays
    from sweepkit.costmodel.passes import Work, as_prefill
    from sweepkit.validation.profiles import row_fields, row_profile
    from sweepkit.validation.prompt_chunks import prompt_chunks
    from sweepkit.validation.serving_points import MAX_BATCH, TOKEN_BUDGET
    from sweepkit.validation.steady import prefill_ranks, row_value, step_work
    from sweepkit.validation.steady_rows import row_inputs
    from sweepkit.validation.steady_sizes import kv_positions, request_positions, running, token_budget
    from sweepkit.validation.step_parts import PARTS, step_parts

    prof = row_profile(m, None)
    rows = row_inputs([m], MAX_BATCH, TOKEN_BUDGET)
    rows = dataclasses.replace(rows, token_budget=jnp.asarray([prof.token_budget or TOKEN_BUDGET]))
    row = jax.tree_util.tree_map(lambda a: a[0], rows)
    eff = efficiency_arrays(row_fields(prof, m))
    dp = float(row.layout.dp)
    n, c, held = float(running(row)), float(kv_positions(row)), float(request_positions(row))
    decode, spread = step_work(row)
    p, f = prompt_chunks(running(row), row.isl, row.osl, token_budget(row), prefill_ranks(row))
    chunk = as_prefill(Work(tokens=p, attn_pairs=p * (row.isl + 1.0), kv_tokens=p, rows=p / row.isl))
    none = Work(*(0.0 * x for x in dataclasses.astuple(spread)))
    value = float(row_value(row, eff))
    print(f"\n{m.device} {m.model} w {m.weight_format} kv {m.kv_format} tp {m.tp} ep {m.ep} dp {m.dp} "
          f"I/O {m.input_tokens}/{m.output_tokens} c {m.concurrency} {m.metric}")
    print(f"  per rank: C {c / dp:,.0f} positions = {c / held / dp:,.1f} requests; n {n / dp:,.1f}; "
          f"token budget {float(token_budget(row)) / dp:,.0f}")
    print(f"  mean step: {float(decode.tokens):,.0f} decode rows, {float(decode.kv_tokens):,.0f} positions "
          f"read, {float(spread.tokens):,.0f} prompt tokens = {float(p):,.0f} in f = {float(f):.3f} of steps")
    for label, pre in (("decode only", none), ("with chunk", chunk)):
        parts = {k: float(v) * 1e3 for k, v in step_parts(row, eff, decode, pre).items()}
        print(f"  {label:11s} " + " ".join(f"{parts[k]:7.2f}" for k in PARTS) + f"  sum {sum(parts.values()):7.2f}")
    implied = n / (m.value_si / float(row.replicas)) * 1e3 if m.metric.endswith("throughput") else float("nan")
    print(f"  modelled {value:,.1f}  measured {m.value_si:,.1f}  ({value / m.value_si - 1:+.1%}); measured "
          f"step if all n run: {implied:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True, help="the rows of this source")
    ap.add_argument("--measurements", default=None, help="measurement CSV (default: the packaged sets)")
    args = ap.parse_args(argv)

    import jax

    from sweepkit.validation import load_measurements
    from sweepkit.validation.profiles import row_profile, steady_row
    from sweepkit.validation.step_parts import PARTS

    points, _, _ = load_measurements(args.measurements)
    points = [m for m in points if m.source == args.source and steady_row(m) and row_profile(m, None)]
    if not points:
        print(f"no steady-state row of source {args.source!r}", file=sys.stderr)
        return 2
    print("terms (ms): " + " ".join(PARTS))
    with jax.enable_x64(True):
        for m in points:
            print_row(m)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
