"""The Starlette app of ``sweepkit serve``: pages, static scripts, the JSON API, off-loop simulations.

Responsiveness:

* at start-up a warm-up thread compiles the programs the first pages need (the decode explorer's, and a
  what-if of every lever of the warehouse's sweep against the baseline on the first workload and device), so
  a change costs a simulation, not a compilation; compiled executables also persist across runs in the
  compile cache (:mod:`sweepkit.jaxcache`);
* simulations run on worker threads (one for what-ifs, one for capacity searches), never on the event loop,
  so ``/api/health`` and the pages answer while a run is in flight;
* a request carries its page's id (``page``); a what-if or decode request that is still waiting when a newer
  one for the same page arrives is answered ``409 superseded`` without running (the page drops it too);
* bodies are bounded in size and time, and simulations waiting per endpoint in number (:mod:`sweepkit.serve.limits`):
  beyond a bound the answer is a 4xx (413, 408, 429 with ``Retry-After``), never a stuck server.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from sweepkit.errors import InputError
from sweepkit.serve import api
from sweepkit.serve.api import BadRequest, Context
from sweepkit.serve.limits import DEFAULT, BodyLimit, Gate, Limits, busy

PAGES = {"/": "whatif.html", "/what-if": "whatif.html", "/decode": "decode.html", "/matrix": "matrix.html"}
"""Page routes -> files under ``sweepkit/serve/static``."""


class Latest:
    """The newest request number per (page, endpoint): older waiting requests are superseded."""

    def __init__(self):
        self.lock, self.seq, self.newest = threading.Lock(), itertools.count(1), {}

    def begin(self, key) -> int:
        with self.lock:
            n = next(self.seq)
            self.newest[key] = n
            return n

    def stale(self, key, n: int) -> bool:
        with self.lock:
            return self.newest.get(key, n) != n


class Server:
    """State of one running app: the context, worker threads, capacity jobs, warm-up status."""

    def __init__(self, ctx: Context, warm: bool = True, limits: Limits = DEFAULT):
        self.ctx, self.latest, self.jobs, self.job_ids = ctx, Latest(), {}, itertools.count(1)
        self.limits = limits
        self.gates = {name: Gate(limits.max_waiting) for name in ("whatif", "decode")}
        self.gates["capacity"] = Gate(limits.max_capacity_jobs)
        self.sim = ThreadPoolExecutor(1, thread_name_prefix="sweepkit-whatif")
        self.cap = ThreadPoolExecutor(1, thread_name_prefix="sweepkit-capacity")
        self.warm = dict(done=not warm, programs=0, seconds=0.0, error=None)
        self.want_warm = warm

    def warm_up(self) -> None:
        """Compile the first pages' programs (on the what-if worker, before any client's run)."""
        from sweepkit.serve.decode import explore
        from sweepkit.serve.whatif import run_whatif

        t0 = time.perf_counter()
        try:
            explore("H100", "llama-3-8b", "mtp", 1, 512, 3, 0.7)
            self.warm["programs"] += 1
            ctx = self.ctx
            if ctx.workloads:
                w = next((ctx.workloads[n] for n in ctx.reference if n in ctx.workloads), None) \
                    or next(iter(ctx.workloads.values()))
                device = (ctx.sweep_devices or ctx.cluster.devices or ("H100",))[0]
                base = ctx.levers.get("baseline")
                afters = [ctx.levers[n] for n in (ctx.sweep_levers or ("baseline",)) if n in ctx.levers]
                for lv in afters if base is not None else []:
                    if not lv.devices or device in lv.devices:
                        run_whatif(w, ctx.cluster, device, base, lv, api.reference_rate(ctx, w.name))
                        self.warm["programs"] += 1
        except Exception as exc:  # noqa: BLE001 - a warm-up failure must not stop the server
            self.warm["error"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        finally:
            self.warm.update(done=True, seconds=round(time.perf_counter() - t0, 3))

    async def run(self, pool, key, fn, *args):
        """Run ``fn`` on ``pool`` unless a newer request for ``key`` arrives first; None when superseded."""
        n = self.latest.begin(key) if key is not None else 0
        loop = asyncio.get_running_loop()

        def call():
            if key is not None and self.latest.stale(key, n):
                return None
            return fn(*args)

        return await loop.run_in_executor(pool, call)

    def keep_jobs(self) -> None:
        """Forget the oldest finished capacity jobs beyond ``limits.max_jobs_kept``."""
        done = [j for j, s in self.jobs.items() if s["state"] != "running"]
        for job in done[:max(0, len(self.jobs) - self.limits.max_jobs_kept)]:
            del self.jobs[job]


def _error(exc: Exception) -> JSONResponse:
    line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return JSONResponse({"error": line}, status_code=400)


async def _body(request: Request):
    try:
        return await request.json()
    except (ValueError, RecursionError):          # not JSON, not UTF-8, or nested beyond the parser's depth
        raise BadRequest("body is not allowed; expected a JSON object") from None


def _page_key(body, endpoint: str):
    page = body.get("page") if isinstance(body, dict) else None
    return (str(page)[:64], endpoint) if page is not None else None


def create_app(ctx: Context, warm: bool = True, limits: Limits = DEFAULT) -> Starlette:
    """The app over ``ctx`` (:func:`sweepkit.serve.api.Context`); ``warm`` compiles at start-up; ``limits``
    bound bodies and waiting simulations (:class:`sweepkit.serve.limits.Limits`)."""
    from sweepkit.serve.decode import explore
    from sweepkit.serve.whatif import run_capacity, run_whatif

    srv = Server(ctx, warm, limits)

    async def admitted(name: str, what: str, pool, key, fn):
        """``srv.run(pool, key, fn)`` inside the endpoint's gate; the 429 answer when the gate is full."""
        gate = srv.gates[name]
        if not gate.enter():
            return busy(what, gate.limit, limits)
        try:
            out = await srv.run(pool, key, fn)
        finally:
            gate.leave()
        return JSONResponse({"superseded": True}, status_code=409) if out is None else out
    static = resources.files("sweepkit.serve") / "static"

    def page(name):
        async def handler(request):
            return FileResponse(str(static / name), media_type="text/html")
        return handler

    async def health(request):
        return JSONResponse(dict(status="ok", run_id=ctx.run_id, warm=srv.warm,
                                 warehouse=None if ctx.warehouse is None else str(ctx.warehouse.root)))

    async def opts(request):
        return JSONResponse(api.options(ctx))

    async def matrix(request):
        rows = await asyncio.to_thread(api.matrix_rows, ctx)
        return JSONResponse(dict(run_id=ctx.run_id, rows=rows))

    async def whatif(request):
        try:
            body = await _body(request)
            args = api.whatif_args(ctx, body)
            t0 = time.perf_counter()
            out = await admitted("whatif", "what-if simulations", srv.sim, _page_key(body, "whatif"),
                                 lambda: run_whatif(args["w"], ctx.cluster, args["device"], args["before"],
                                                    args["after"], args["rate_per_s"]))
        except (BadRequest, InputError) as exc:
            return _error(exc)
        if isinstance(out, JSONResponse):
            return out
        out.update(workload=args["w"].name, device=args["device"], rate_per_s=args["rate_per_s"],
                   load_unit=args["w"].load_unit, offline=args["w"].offline, elapsed_s=time.perf_counter() - t0)
        return JSONResponse(out)

    async def decode(request):
        try:
            body = await _body(request)
            args = api.decode_args(body)
            out = await admitted("decode", "decode evaluations", None, _page_key(body, "decode"),
                                 lambda: explore(**args))
        except (BadRequest, InputError) as exc:
            return _error(exc)
        return out if isinstance(out, JSONResponse) else JSONResponse(dict(out, **args))

    async def capacity(request):
        try:
            args = api.capacity_args(ctx, await _body(request))
            from sweepkit.serving.config import Config, check

            check(ctx.cluster, Config(args["device"], args["lever"]), "lever")
        except (BadRequest, InputError) as exc:
            return _error(exc)
        gate = srv.gates["capacity"]
        if not gate.enter():
            return busy("capacity searches", gate.limit, limits)
        srv.keep_jobs()
        job = str(next(srv.job_ids))
        state = srv.jobs[job] = dict(job=job, state="running", simulations=0, result=None, error=None)

        def work():
            try:
                state["result"] = run_capacity(args["w"], ctx.cluster, args["device"], args["lever"],
                                               progress=lambda n: state.__setitem__("simulations",
                                                                                    state["simulations"] + n),
                                               start_per_s=args["start_per_s"])
                state["state"] = "done"
            except Exception as exc:  # noqa: BLE001 - reported to the page in one line
                state.update(state="error", error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            finally:
                gate.leave()

        srv.cap.submit(work)
        return JSONResponse(state, status_code=202)

    async def capacity_job(request):
        state = srv.jobs.get(request.path_params["job"])
        if state is None:
            return JSONResponse({"error": f"job = {request.path_params['job']!r} is not allowed; expected a job "
                                          f"id from POST /api/capacity"}, status_code=404)
        return JSONResponse(state)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if srv.want_warm:
            srv.sim.submit(srv.warm_up)
        yield
        for pool in (srv.sim, srv.cap):
            pool.shutdown(wait=False, cancel_futures=True)

    routes = [Route(p, page(f)) for p, f in PAGES.items()] + [
        Route("/api/health", health), Route("/api/options", opts), Route("/api/matrix", matrix),
        Route("/api/whatif", whatif, methods=["POST"]), Route("/api/decode", decode, methods=["POST"]),
        Route("/api/capacity", capacity, methods=["POST"]), Route("/api/capacity/{job}", capacity_job),
        Mount("/static", StaticFiles(directory=str(static)), name="static")]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(BodyLimit, limits=limits)])
    app.state.server = srv
    return app
