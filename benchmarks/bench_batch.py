"""Benchmark: a batch of K lanes of one compiled program, ``jax.vmap``ped, on whatever device JAX has.

K loads of one configuration (``--lever`` on ``--device``, the packaged cluster, ``--workload``), spread evenly
over ``--spread`` x ``--rate``, run as one ``jax.vmap`` of the engine's ``while_loop``,
``--chunk`` lanes a call (the program is compiled once for the chunk's size; the last chunk is padded with
copies of its last lane). A vmapped ``while_loop`` runs every lane of a call until its slowest ends and turns
each ``lax.cond`` into both branches, so on a CPU separate lanes are cheaper (``bench_lane.py --vmap``); on an
accelerator the batch is the point. Prints the device, compile seconds, run seconds, lanes/s, lane-iterations/s
(the lanes' own iterations, not the batch's), the batch's iterations, XLA's memory estimate per call, and
checks that ``--check`` lanes of the batch equal the same lanes run alone (finish times, ITL histogram,
iterations: a batch must change no result).

Usage: python benchmarks/bench_batch.py [--workload chat] [--lever baseline] [--device H100] [--lanes 100000]
                                        [--chunk 8192] [--rate 1.9375] [--spread 0.5,1.5] [--check 4] [--json OUT]
       python benchmarks/bench_batch.py --lanes 8 --chunk 4          # a CPU smoke run (tests/test_bench_batch.py)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="chat")
    ap.add_argument("--lever", default="baseline")
    ap.add_argument("--device", default="H100", help="the catalogue device simulated (not the one JAX runs on)")
    ap.add_argument("--lanes", type=int, default=100_000, help="K, lanes in the batch")
    ap.add_argument("--chunk", type=int, default=8_192, help="lanes per call of the vmapped program (XLA:CPU "
                    "estimates 6.0 MB a chat lane, so 8,192 lanes take ~49 GB)")
    ap.add_argument("--rate", type=float, default=1.9375, help="the load --spread multiplies, per second (chat's "
                    "reference load)")
    ap.add_argument("--spread", default="0.5,1.5", help="lowest,highest load as multiples of --rate")
    ap.add_argument("--check", type=int, default=4, help="lanes of the batch also run alone and compared")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args(argv)
    lo, hi = (float(x) for x in args.spread.split(","))
    if args.lanes < 1 or args.chunk < 1 or not 0 < lo <= hi:
        ap.error(f"--lanes {args.lanes} and --chunk {args.chunk} must be >= 1 and --spread {args.spread} "
                 "two loads 0 < lo <= hi")

    import jax
    import numpy as np

    from sweepkit.serving import lanes as L
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.engine import simulate
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.workloads import load_workloads

    w, cl = load_workloads()[args.workload], load_cluster()
    cfg = Config(args.device, load_levers()[args.lever])
    rates = args.rate * np.linspace(lo, hi, args.lanes)
    chunk = min(args.chunk, args.lanes)
    out = dict(date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), machine=platform.machine(),
               cpus=os.cpu_count(), jax=jax.__version__, backend=jax.default_backend(),
               devices=[str(d) for d in jax.devices()], workload=w.name, lever=args.lever, simulated_device=args.device,
               lanes=args.lanes, chunk=chunk, rates_per_s=[float(rates[0]), float(rates[-1])])
    print(f"{out['backend']} {out['devices']}, jax {out['jax']}, {out['date']}: {w.name}, {args.lever} on "
          f"{args.device}, {args.lanes:,} loads {rates[0]:.4g}-{rates[-1]:.4g} /s, {chunk:,} lanes a call", flush=True)
    with jax.enable_x64(True):
        t = time.perf_counter()
        pol, req, loads, shape = L.lane_inputs(w, cl, cfg, rates)
        stacked = {f: np.stack([np.asarray(getattr(ld, f)) for ld in loads]) for f in vars(loads[0])}
        out["inputs_s"] = time.perf_counter() - t
        many = jax.jit(jax.vmap(lambda p, q, ld: simulate(p, q, ld, shape), in_axes=(None, None, 0)))
        take = lambda a, b: type(loads[0])(**{f: _padded(v[a:b], chunk) for f, v in stacked.items()})  # noqa: E731
        t = time.perf_counter()
        compiled = many.lower(pol, req, take(0, chunk)).compile()
        out["compile_s"] = time.perf_counter() - t
        mem = compiled.memory_analysis()
        if mem is not None:
            out["call_bytes"] = int(mem.temp_size_in_bytes + mem.output_size_in_bytes + mem.argument_size_in_bytes)
        iters, top, t = 0, 0, time.perf_counter()
        finish, hist, lane_iters = [], [], []
        for a in range(0, args.lanes, chunk):
            n = min(chunk, args.lanes - a)
            st = jax.block_until_ready(compiled(pol, req, take(a, a + chunk)))
            it = np.asarray(st.iters)[:n]
            iters, top = iters + int(it.sum()), top + int(it.max())
            print(f"  lanes {a + n:,} of {args.lanes:,}: {time.perf_counter() - t:.1f} s, this call's slowest lane "
                  f"{int(it.max()):,} iterations", flush=True)
            if a == 0:
                k = min(args.check, n)
                finish, hist, lane_iters = np.asarray(st.finish_s)[:k], np.asarray(st.hist)[:k], it[:k]
        run_s = time.perf_counter() - t
        out.update(run_s=run_s, lanes_per_s=args.lanes / run_s, lane_iterations=iters,
                   lane_iterations_per_s=iters / run_s, batch_iterations=top)
        one = jax.jit(lambda p, q, ld: simulate(p, q, ld, shape))
        same = True
        for i in range(len(lane_iters)):
            alone = one(pol, req, loads[i])
            same &= (int(alone.iters) == int(lane_iters[i]) and np.array_equal(np.asarray(alone.finish_s), finish[i])
                     and np.array_equal(np.asarray(alone.hist), hist[i]))
        out["checked_lanes"], out["batch_equals_alone"] = len(lane_iters), bool(same)
    mem = f", XLA's estimate {out['call_bytes'] / 2**30:.2f} GiB a call" if "call_bytes" in out else ""
    print(f"inputs {out['inputs_s']:.1f} s, compile {out['compile_s']:.1f} s{mem}; run {run_s:.2f} s: "
          f"{out['lanes_per_s']:,.1f} lanes/s, {out['lane_iterations_per_s']:,.0f} lane-iterations/s "
          f"({iters:,} of them; {top:,} batch iterations); {out['checked_lanes']} lanes equal alone: "
          f"{out['batch_equals_alone']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    if not same:
        raise SystemExit("a lane of the batch differs from the same lane run alone")
    return out


def _padded(v, n: int):
    """``v`` [m, ...] padded to n rows with copies of its last row."""
    import numpy as np

    return v if v.shape[0] == n else np.concatenate([v, np.repeat(v[-1:], n - v.shape[0], axis=0)])


if __name__ == "__main__":
    main()
