"""Benchmark `sweepkit serve` against a running server: a chat what-if and a decode-explorer change, warm.

Starts `sweepkit serve --port 0` (packaged workloads, the given warehouse for reference loads), waits for
its warm-up, then times N requests of each kind over HTTP and prints median and range, machine and date.

    .venv/bin/python benchmarks/bench_serve.py [--warehouse W] [--repeat 5] [--workload chat] [--rate 1.9375]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request


def _call(base: str, path: str, body: dict | None = None, timeout_s: float = 900.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        return json.load(r)


def _timed(fn, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t0)
    return out


def _line(name: str, xs: list[float]) -> str:
    return (f"{name:<28} median {statistics.median(xs) * 1e3:9.1f} ms   range {min(xs) * 1e3:9.1f} .. "
            f"{max(xs) * 1e3:9.1f} ms   (n = {len(xs)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workload", default="chat")
    ap.add_argument("--rate", type=float, default=1.9375, help="offered load (the seed's chat reference load)")
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "sweepkit.cli", "serve", "--port", "0"]
    if args.warehouse:
        cmd += ["--warehouse", args.warehouse]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        while "http://" not in line:          # notices (no warehouse, ...) come before the URL
            if not line:
                raise SystemExit("sweepkit serve exited before printing its URL")
            line = proc.stderr.readline()
        base = line[line.index("http://"):].split()[0].removesuffix("/what-if")
        t0 = time.perf_counter()
        while True:
            try:
                if _call(base, "/api/health")["warm"]["done"]:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        warm_s = time.perf_counter() - t0
        body = dict(workload=args.workload, device="H100", before="baseline", after="mtp", rate=args.rate)
        _call(base, "/api/whatif", body)     # this shape compiled (or loaded from the cache) once
        whatif = _timed(lambda i: _call(base, "/api/whatif", dict(body, after={"draft": "mtp", "gamma": 3,
                                                                               "alpha": 0.6 + 0.05 * i})),
                        args.repeat)
        _call(base, "/api/decode", {"batch": 1})
        decode = _timed(lambda i: _call(base, "/api/decode", {"batch": 1 + i, "gamma": 1 + i % 8}),
                        max(args.repeat, 20))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores ({platform.processor() or platform.platform()}); "
          f"date {datetime.date.today()}; start-up warm-up {warm_s:.1f} s")
    print(_line(f"what-if {args.workload} @ {args.rate:g}/s", whatif))
    print(_line("decode-explorer change", decode))


if __name__ == "__main__":
    main()
