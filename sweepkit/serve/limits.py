"""Limits of ``sweepkit serve``: request bodies (size, time to arrive) and simulations waiting per worker.

A hostile or careless client gets a 4xx answer and never a 5xx or a stuck server:

* a body larger than :attr:`Limits.max_body_bytes` is refused ``413`` (from its ``Content-Length`` before a
  byte is read, or as soon as a chunked body passes the bound), one that takes longer than
  :attr:`Limits.body_timeout_s` to arrive is refused ``408``: a slow client holds its own connection only;
* a simulation (what-if or decode) that would wait behind :attr:`Limits.max_waiting` others is refused ``429``
  with ``Retry-After``, as is a capacity search beyond :attr:`Limits.max_capacity_jobs` queued or running;
  the pages, ``/api/health`` and ``/api/options`` answer whatever is queued.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading


@dataclasses.dataclass(frozen=True)
class Limits:
    """The bounds of one server.

    Attributes:
      max_body_bytes: bytes, largest request body (the API's bodies are a few hundred bytes).
      body_timeout_s: s, longest wait for a request's whole body once its headers are in.
      max_waiting: simulations (what-if, decode) queued or running at once, per endpoint.
      max_capacity_jobs: capacity searches queued or running at once.
      retry_after_s: s, the ``Retry-After`` given with a 429.
      max_jobs_kept: finished capacity jobs kept for ``GET /api/capacity/{job}`` (the oldest go first).
    """

    max_body_bytes: int = 64 << 10
    body_timeout_s: float = 10.0
    max_waiting: int = 8
    max_capacity_jobs: int = 2
    retry_after_s: int = 2
    max_jobs_kept: int = 256


DEFAULT = Limits()
"""The bounds ``sweepkit serve`` runs with."""


class Gate:
    """A count of admitted work, refusing more than ``limit`` at once (thread-safe).

    Example:
      >>> g = Gate(1)
      >>> g.enter(), g.enter()
      (True, False)
      >>> g.leave(); g.enter()
      True
    """

    def __init__(self, limit: int):
        self.limit, self.count, self.lock = limit, 0, threading.Lock()

    def enter(self) -> bool:
        with self.lock:
            if self.count >= self.limit:
                return False
            self.count += 1
            return True

    def leave(self) -> None:
        with self.lock:
            self.count -= 1


class _BodyRefused(Exception):
    """A body over the size bound (413) or too slow to arrive (408); raised from ``receive``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


async def _send_json(send, status: int, payload: dict, headers: tuple = ()) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware bounding every HTTP request's body in size and in time to arrive (:class:`Limits`)."""

    def __init__(self, app, limits: Limits = DEFAULT):
        self.app, self.limits = app, limits

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        lim = self.limits
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _send_json(send, 400, {"error": f"Content-Length = {declared[:32].decode('latin-1')!r} is "
                                                      f"not allowed; expected a number of bytes"})
                return
            if size > lim.max_body_bytes:
                await _send_json(send, 413, _too_large(size, lim))
                return
        seen, started, complete = 0, False, False

        async def bounded_receive():
            nonlocal seen, complete
            if complete:                                  # the body is in: a wait for a disconnect is unbounded
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), lim.body_timeout_s)
            except TimeoutError:
                raise _BodyRefused(408, f"body is not allowed; expected the whole body within "
                                        f"{lim.body_timeout_s:g} s") from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > lim.max_body_bytes:
                    raise _BodyRefused(413, _too_large(seen, lim)["error"])
                complete = not message.get("more_body", False)
            return message

        async def tracked_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, tracked_send)
        except _BodyRefused as exc:
            if not started:
                await _send_json(send, exc.status, {"error": str(exc)})


def _too_large(size: int, lim: Limits) -> dict:
    return {"error": f"body of {size:,} bytes is not allowed; expected at most {lim.max_body_bytes:,} bytes"}


def busy(what: str, waiting: int, lim: Limits):
    """The 429 answer when ``waiting`` units of ``what`` already fill their gate."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": f"busy: {waiting} {what} already waiting or running (the limit); retry after "
                                  f"{lim.retry_after_s} s", "retry_after_s": lim.retry_after_s},
                        status_code=429, headers={"Retry-After": str(lim.retry_after_s)})
