"""Load `sweepkit serve` with concurrent clients and hostile requests; print the answers by status.

Starts the real app (uvicorn on a real socket, 127.0.0.1:0) in this process, no warehouse, tiny workloads,
then fires at once N legitimate requests (health, options, matrix, decode changes, what-ifs) and the hostile
ones below, each on its own connection, while two "slowloris" connections hold half-sent headers. Prints the
count per status code, the 5xx count, the slowest answer, and whether /api/health answers afterwards.

    .venv/bin/python benchmarks/bench_serve_load.py [--clients 64] [--whatif 8] [--body-timeout 1.0]

Hostile requests: bad JSON, a JSON array, unknown fields, 30,000 nested brackets, bytes that are not UTF-8,
NaN, a 5,000-digit integer, a wrong-typed lever, an empty body, `null`, a 1 MiB body (declared and chunked),
a Content-Length of 10^15 with no body, a body that stalls after 10 bytes, a wrong method, an unknown path,
an unknown capacity job, a bad capacity lever, a 60 kB JSON string, a bad `tp`.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import platform
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ROOT / "tests" / "grids" / "serve-workloads.toml"
MIB = 1 << 20


def raw(host: str, port: int, data: bytes, *, stall_s: float = 0.0, timeout_s: float = 120.0) -> int:
    """Send ``data`` on a fresh connection (optionally stall before closing the write side) and return the
    answer's HTTP status (0: no answer)."""
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        try:
            s.sendall(data)
        except OSError:                            # the server answered and closed before the body was in
            pass
        if stall_s:
            time.sleep(stall_s)
        buf = b""
        try:
            while b"\r\n" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
        except OSError:
            pass
    line = buf.split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) >= 2 and line[1].isdigit() else 0


def request(method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> bytes:
    """A plain HTTP/1.1 request's bytes (Content-Length from the body unless ``headers`` give one)."""
    h = {"Host": "127.0.0.1", "Connection": "close", **({"Content-Type": "application/json"} if body is not None
                                                          else {})}
    if body is not None and "Content-Length" not in (headers or {}) and "Transfer-Encoding" not in (headers or {}):
        h["Content-Length"] = str(len(body))
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return head.encode() + (body or b"")


def post(path: str, obj) -> bytes:
    return request("POST", path, json.dumps(obj).encode())


def chunked(total: int) -> bytes:
    piece = b"x" * 65536
    body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(total // len(piece))) + b"0\r\n\r\n"
    return request("POST", "/api/whatif", body, {"Transfer-Encoding": "chunked"})


def hostile() -> list[tuple[str, bytes, float]]:
    """(name, request bytes, seconds to stall after sending) of the 20 hostile requests."""
    w = {"workload": "tiny-chat", "device": "H100"}
    return [
        ("bad-json", request("POST", "/api/whatif", b"{not json"), 0.0),
        ("array", post("/api/whatif", [1, 2]), 0.0),
        ("unknown-field", post("/api/whatif", {**w, "sql": "select 1"}), 0.0),
        ("deep-nesting", request("POST", "/api/decode", b"[" * 30_000 + b"]" * 30_000), 0.0),
        ("not-utf8", request("POST", "/api/decode", bytes(range(128, 256))), 0.0),
        ("nan", request("POST", "/api/decode", b'{"alpha": NaN}'), 0.0),
        ("huge-int", request("POST", "/api/decode", b'{"batch": ' + b"9" * 5000 + b"}"), 0.0),
        ("lever-types", post("/api/whatif", {**w, "after": {"draft": ["mtp"], "gamma": {}}}), 0.0),
        ("empty", request("POST", "/api/decode", b""), 0.0),
        ("null", request("POST", "/api/capacity", b"null"), 0.0),
        ("1MiB-declared", request("POST", "/api/whatif", b"{" + b" " * MIB + b"}"), 0.0),
        ("1MiB-chunked", chunked(MIB), 0.0),
        ("length-1e15", request("POST", "/api/whatif", None, {"Content-Length": str(10**15)}), 0.0),
        ("slow-body", request("POST", "/api/decode", None, {"Content-Length": "100"}) + b'{"batch": 1', 0.0),
        ("wrong-method", request("GET", "/api/whatif"), 0.0),
        ("unknown-path", post("/api/nope", {}), 0.0),
        ("unknown-job", request("GET", "/api/capacity/999999"), 0.0),
        ("capacity-lever", post("/api/capacity", {**w, "lever": "warp"}), 0.0),
        ("60kB-string", post("/api/decode", "x" * 60_000), 0.0),
        ("tp-text", post("/api/decode", {"tp": "8"}), 0.0),
    ]


def legit(n: int, whatif: int) -> list[tuple[str, bytes, float]]:
    """``n`` ordinary requests: ``whatif`` what-ifs, then decode changes, health, options and matrix in turn."""
    out = [(f"whatif-{i}", post("/api/whatif", {"workload": "tiny-chat", "device": "H100", "before": "baseline",
                                               "after": "mtp", "page": f"p{i}"}), 0.0) for i in range(whatif)]
    kinds = ["decode", "health", "decode", "options", "decode", "matrix"]
    for i in range(n - whatif):
        kind = kinds[i % len(kinds)]
        data = post("/api/decode", {"batch": 1 + i, "context": 512, "page": f"d{i}"}) if kind == "decode" else \
            request("GET", f"/api/{kind}")
        out.append((f"{kind}-{i}", data, 0.0))
    return out


def start(body_timeout_s: float, workloads: Path = WORKLOADS):
    """The app on 127.0.0.1:0 in a thread; returns (host, port, stop)."""
    import uvicorn

    from sweepkit.cli.serve import bind
    from sweepkit.serve.api import build_context
    from sweepkit.serve.app import create_app
    from sweepkit.serve.limits import Limits

    sock = bind("127.0.0.1", 0)
    app = create_app(build_context(None, str(workloads)), warm=False, limits=Limits(body_timeout_s=body_timeout_s))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    host, port = sock.getsockname()[:2]
    deadline = time.monotonic() + 60
    while raw(host, port, request("GET", "/api/health")) != 200:
        if time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.1)

    def stop():
        server.should_exit = True
        thread.join(timeout=10)
    return host, port, stop


def fire(host: str, port: int, cases: list[tuple[str, bytes, float]], holders: int = 2) -> dict:
    """Send every case at once (one thread and connection each) while ``holders`` connections hold half-sent
    headers; returns {"status": {name: code}, "seconds": {name: s}, "health_after": code}."""
    held = []
    for _ in range(holders):                        # slowloris: a request line and half a header, then nothing
        s = socket.create_connection((host, port))
        s.sendall(b"POST /api/whatif HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        held.append(s)
    status, seconds = {}, {}

    def one(case):
        name, data, stall = case
        t0 = time.perf_counter()
        status[name] = raw(host, port, data, stall_s=stall)
        seconds[name] = time.perf_counter() - t0

    try:
        with ThreadPoolExecutor(len(cases)) as pool:
            list(pool.map(one, cases))
        health = raw(host, port, request("GET", "/api/health"))
    finally:
        for s in held:
            s.close()
    return {"status": status, "seconds": seconds, "health_after": health}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=64, help="legitimate requests fired at once")
    p.add_argument("--whatif", type=int, default=8, help="of which what-if simulations")
    p.add_argument("--body-timeout", type=float, default=1.0, help="the server's body timeout, s")
    a = p.parse_args()
    host, port, stop = start(a.body_timeout)
    try:
        t0 = time.perf_counter()
        out = fire(host, port, legit(a.clients, a.whatif) + hostile())
        wall = time.perf_counter() - t0
    finally:
        stop()
    hostile_names = {n for n, _, _ in hostile()}
    by = collections.Counter(out["status"].values())
    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"python {sys.version.split()[0]}")
    print(f"{a.clients} legitimate ({a.whatif} what-ifs) + {len(hostile_names)} hostile requests at once, "
          f"2 slowloris connections held, {wall:.1f} s")
    print("answers by status:", dict(sorted(by.items())))
    print("legitimate:", dict(sorted(collections.Counter(c for n, c in out["status"].items()
                                                         if n not in hostile_names).items())))
    print("hostile:", {n: out["status"][n] for n, _, _ in hostile()})
    print("5xx:", sum(1 for c in out["status"].values() if c >= 500), " no answer:", by.get(0, 0))
    print(f"slowest answer: {max(out['seconds'].values()):.2f} s; /api/health afterwards: {out['health_after']}")


if __name__ == "__main__":
    main()
