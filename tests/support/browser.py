"""Open a report in headless Chromium over the DevTools protocol: console errors, charts drawn, a screenshot.

Used by the browser test and to make ``docs/report.png``. Needs a ``chromium`` binary (Debian's package;
nothing is downloaded) and the ``websocket-client`` package (test extra). The browser runs with
``--headless --no-sandbox`` and a throw-away profile, and is killed when the :func:`inspect_page` call ends.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         "--remote-allow-origins=*", "--hide-scrollbars"]

CHART_CHECK = """Array.from(document.querySelectorAll('div.chart')).map(d => {
  const s = d.querySelector('svg, canvas');
  if (!s) return {id: d.id, area: 0, marks: 0};
  const r = s.getBoundingClientRect();
  const marks = s.tagName.toLowerCase() === 'svg' ? s.querySelectorAll('path, rect, line, text').length : 1;
  return {id: d.id, area: r.width * r.height, marks: marks};
})"""


def find_chromium() -> str | None:
    """The Chromium binary on PATH (``chromium``, ``chromium-browser``), or None."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclasses.dataclass
class PageReport:
    """What the browser saw: console errors and uncaught exceptions, each chart's drawn area and marks."""

    errors: list[str]
    charts: list[dict]
    rendered: str | None
    screenshot: str | None


class CdpError(RuntimeError):
    """A DevTools command's error reply; ``navigating``: the page navigated while it ran (its JavaScript
    context went away), which a caller polling for the next page may retry."""

    NAVIGATING = ("navigated or closed", "context was destroyed", "Cannot find context")

    def __init__(self, method: str, error: dict):
        super().__init__(f"{method}: {error}")
        self.navigating = any(m in str(error.get("message", "")) for m in self.NAVIGATING)


class _Cdp:
    """A minimal DevTools client: send a command, wait for its reply, keep every event."""

    def __init__(self, ws_url: str):
        import websocket  # websocket-client

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict] = []

    def call(self, method: str, **params) -> dict:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise CdpError(method, msg["error"])
                return msg.get("result", {})
            self.events.append(msg)

    def evaluate(self, expression: str):
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return res.get("result", {}).get("value")

    def close(self) -> None:
        self.ws.close()


def _errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: " + (d.get("exception", {}).get("description") or d.get("text", "")))
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console.error: " + " ".join(str(a.get("value", a.get("description", "")))
                                                    for a in p.get("args", [])))
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(f"log: {p['entry'].get('text', '')} ({p['entry'].get('url', '')})")
    return out


def inspect_page(html_path: str | Path, screenshot: str | Path | None = None, *, width_px: int = 1280,
                 timeout_s: float = 60.0, chromium: str | None = None, signal: bool = True) -> PageReport:
    """Load ``html_path`` in headless Chromium, wait for the charts, check them, optionally screenshot.

    The page signals it is done by setting ``document.body.dataset.rendered`` (the report's embed script
    does, once every chart's promise settles); with ``signal=False`` the load event is enough.

    Raises:
      RuntimeError: no Chromium, or it did not start / the page did not finish within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    with _chromium(chromium, width_px, timeout_s) as cdp:
        cdp.call("Page.navigate", url=Path(html_path).resolve().as_uri())
        rendered = None
        while time.monotonic() < deadline:
            rendered = cdp.evaluate("document.readyState !== 'complete' ? null : "
                                    + ("(document.body.dataset.rendered || null)" if signal else "'loaded'"))
            if rendered is not None:
                break
            time.sleep(0.1)
        if rendered is None:
            raise RuntimeError(f"the page did not finish rendering within {timeout_s:.0f} s")
        charts = cdp.evaluate(CHART_CHECK) or []
        shot = None
        if screenshot is not None:
            size = cdp.call("Page.getLayoutMetrics")["cssContentSize"]
            cdp.call("Emulation.setDeviceMetricsOverride", width=width_px, height=int(size["height"]) + 1,
                     deviceScaleFactor=1, mobile=False)
            time.sleep(0.2)
            data = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
            Path(screenshot).write_bytes(base64.b64decode(data))
            shot = str(screenshot)
        cdp.evaluate("0")  # flush pending events
        return PageReport(errors=_errors(cdp.events), charts=charts, rendered=rendered, screenshot=shot)


@contextlib.contextmanager
def _chromium(chromium: str | None, width_px: int, timeout_s: float):
    """Headless Chromium with the Runtime, Log and Page domains on; yields its DevTools connection, then stops
    the browser and deletes its profile (and the temporary files it kept there)."""
    binary = chromium or find_chromium()
    if binary is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="sweepkit-chromium-")
    # Chromium keeps its singleton lock and socket in a directory under TMPDIR that a terminated browser
    # leaves behind; inside the profile, it goes with the profile.
    proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                             f"--window-size={width_px},1000", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "TMPDIR": profile})
    cdp = None
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start (exit status {proc.poll()})")
            time.sleep(0.05)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.load(r) if t.get("type") == "page"]
        cdp = _Cdp(pages[0]["webSocketDebuggerUrl"])
        for domain in ("Runtime", "Log", "Page"):
            cdp.call(f"{domain}.enable")
        yield cdp
    finally:
        if cdp is not None:
            cdp.close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for _ in range(5):          # a helper process may still write a file as the browser exits
            shutil.rmtree(profile, ignore_errors=True)
            if not os.path.exists(profile):
                break
            time.sleep(0.2)


class LivePage:
    """A page of a running web app in headless Chromium (:func:`open_page`): navigate, evaluate, wait, shoot."""

    def __init__(self, cdp: _Cdp):
        self.cdp = cdp

    def navigate(self, url: str) -> None:
        self.cdp.call("Page.navigate", url=url)

    def evaluate(self, expression: str):
        return self.cdp.evaluate(expression)

    def wait(self, expression: str, timeout_s: float = 60.0, what: str = "the page"):
        """Poll ``expression`` until it is truthy; returns its value. Raises RuntimeError after ``timeout_s``.
        A poll that the page's own navigation interrupts counts as not yet."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                value = self.cdp.evaluate(f"(() => {{ try {{ return {expression}; }} catch (e) {{ return null; }} }})()")
            except CdpError as exc:
                if not exc.navigating:
                    raise
                value = None
            if value:
                return value
            time.sleep(0.1)
        raise RuntimeError(f"{what}: {expression} did not hold within {timeout_s:.0f} s")

    def screenshot(self, path: str | Path, width_px: int = 1280) -> None:
        size = self.cdp.call("Page.getLayoutMetrics")["cssContentSize"]
        self.cdp.call("Emulation.setDeviceMetricsOverride", width=width_px, height=int(size["height"]) + 1,
                      deviceScaleFactor=1, mobile=False)
        time.sleep(0.2)
        data = self.cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions seen so far."""
        self.cdp.evaluate("0")  # flush pending events
        return _errors(self.cdp.events)


@contextlib.contextmanager
def open_page(url: str, *, width_px: int = 1280, timeout_s: float = 60.0, chromium: str | None = None):
    """Headless Chromium on ``url`` (an app's page, e.g. ``sweepkit serve``); yields a :class:`LivePage`.

    Raises:
      RuntimeError: no Chromium, or it did not start within ``timeout_s``.
    """
    with _chromium(chromium, width_px, timeout_s) as cdp:
        cdp.call("Page.navigate", url=url)
        yield LivePage(cdp)


if os.environ.get("SWEEPKIT_BROWSER_DEBUG"):  # pragma: no cover
    FLAGS.append("--enable-logging=stderr")
