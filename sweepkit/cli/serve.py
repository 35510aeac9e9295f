"""``sweepkit serve``: the live what-if explorer (a local web app on the serving engine and cost model)."""

from __future__ import annotations

import click

from sweepkit.cli.common import note, warehouse_option


@click.command(context_settings={"max_content_width": 100})
@warehouse_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (127.0.0.1: this machine only).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="TCP port (0: any free).")
@click.option("--workloads", "workloads_file", default=None, type=click.Path(dir_okay=False),
              help="A workloads TOML file (default: the packaged five).")
@click.option("--levers", "levers_file", default=None, type=click.Path(dir_okay=False),
              help="A levers TOML file (default: the packaged levers).")
@click.option("--cluster", "cluster_file", default=None, type=click.Path(dir_okay=False),
              help="A cluster TOML file (default: the packaged 2 x TP4 cluster).")
@click.option("--profile", "profile", default=None, metavar="NAME|FILE",
              help="Efficiency profile pricing every target pass: reference (default), seed, tensorrt-llm, "
                   "tensorrt-llm-triton, tensorrt-llm-gptsession, vllm, sglang or a profile file (docs/serving.md).")
@click.option("--no-warm", is_flag=True, help="Do not compile the first pages' programs at start-up.")
def serve(warehouse, host, port, workloads_file, levers_file, cluster_file, profile, no_warm) -> None:
    """Start the what-if explorer: pages /what-if, /decode, /matrix and the JSON API under /api (docs/serve.md).

    Every script and style is served from the package: no network is needed. The warehouse's newest serving
    run gives the matrix and each workload's reference load.

    \b
    Example: sweepkit serve --warehouse /tmp/wh --port 8000
    """
    import dataclasses

    import uvicorn

    from sweepkit.serve.api import build_context
    from sweepkit.serve.app import create_app
    from sweepkit.store import Warehouse

    from sweepkit.serving.profile import resolve_profile

    chosen = resolve_profile(profile)[0]                # a bad name or file: one line, before anything starts
    wh = Warehouse(warehouse)
    if not wh.root.is_dir():
        if warehouse is not None:
            from sweepkit.errors import bad_value

            raise bad_value("--warehouse", warehouse, "an existing warehouse folder (`sweepkit simulate GRID` makes one)")
        note(f"no warehouse at {wh.root}: no matrix; loads default to 1/s (sweepkit simulate GRID records them)")
        wh = None
    ctx = build_context(wh, workloads_file, levers_file, cluster_file)
    if chosen is not None:
        ctx = dataclasses.replace(ctx, cluster=dataclasses.replace(ctx.cluster, profile=chosen))
    sock = bind(host, port)
    config = uvicorn.Config(create_app(ctx, warm=not no_warm), log_level="warning")
    note(f"sweepkit serve: {url(sock)}/what-if  (Ctrl-C stops it)")
    uvicorn.Server(config).run(sockets=[sock])


def bind(host: str, port: int):
    """A listening TCP socket on (host, port); port 0 picks a free one. One-line error if the address is taken."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        from sweepkit.errors import InputError

        raise InputError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc}); expected a "
                         f"local address and a free port") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url(sock) -> str:
    """The base URL of a bound socket (http://127.0.0.1:8000)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
