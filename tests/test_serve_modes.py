"""The what-if page offers every serving mode the engine models, and each preset shows its true layout.

The layout words come from :func:`sweepkit.serve.layouts.layout_label` (served in ``GET /api/options``); the
page fills its mode, pools and hand-off from the preset's fields. The browser test needs Chromium (CI installs
it: .ci/run); the others run the real app on a real socket.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import uvicorn

from sweepkit.cli.serve import bind, url
from sweepkit.serve.api import build_context
from sweepkit.serve.app import create_app
from sweepkit.serve.layouts import layout_label
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.levers import CHOICES, load_levers
from support.browser import find_chromium, open_page

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = str(ROOT / "tests/grids/serve-workloads.toml")
PAGE = ROOT / "sweepkit/serve/static/whatif.html"


def test_every_preset_says_its_mode_and_pools():
    levers, cluster = load_levers(), load_cluster()
    assert layout_label(levers["baseline"], cluster) == "colocated, 2 x TP4"
    assert layout_label(levers["disagg-1p1d"], cluster) == ("disaggregated 1P:1D (prefill 1 x TP4, decode 1 x TP4, "
                                                            "push hand-off)")
    assert layout_label(levers["disagg-2p1d"], cluster).startswith("disaggregated 2P:1D (prefill 2 x TP2, decode")
    assert layout_label(levers["tp2pp2-mb1"], cluster) == "colocated, 2 x (TP2, PP2), 1 micro-batch"
    for name, lever in levers.items():
        assert layout_label(lever, cluster).startswith("disaggregated" if lever.mode == "disagg" else "colocated"), name


def test_the_page_offers_every_mode_the_engine_models():
    html = PAGE.read_text(encoding="utf-8")
    select = re.search(r'<select id="mode">(.*?)</select>', html, re.S).group(1)
    offered = re.findall(r'<option value="([^"]+)"([^>]*)>', select)
    assert {v for v, _ in offered} == set(CHOICES["mode"])
    assert not any("disabled" in attrs for _, attrs in offered) and "not modelled" not in html
    for field in ("prefill_instances", "prefill_tp", "handoff", "layout_summary"):
        assert f'id="{field}"' in html, field


@pytest.fixture(scope="module")
def server():
    ctx = build_context(None, WORKLOADS)
    sock = bind("127.0.0.1", 0)
    app = uvicorn.Server(uvicorn.Config(create_app(ctx, warm=False), log_level="warning"))
    thread = threading.Thread(target=app.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = url(sock)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(base + "/api/health", timeout=5) as r:
                if json.load(r).get("status") == "ok":
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, "the app did not start"
        time.sleep(0.1)
    yield base
    app.should_exit = True
    thread.join(timeout=10)


def test_options_word_every_presets_layout(server):
    with urllib.request.urlopen(server + "/api/options", timeout=60) as r:
        opt = json.load(r)
    assert set(opt["layouts"]) == set(opt["levers"])
    assert opt["layouts"]["disagg-1p1d"].startswith("disaggregated 1P:1D")
    assert opt["choices"]["mode"] == ["colocated", "disagg"]


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed (CI installs it: .ci/run)")
def test_the_disaggregated_preset_opens_with_its_fields(server):
    with open_page(f"{server}/what-if?workload=tiny-batch&device=H100&lever=disagg-1p1d") as page:
        page.wait("document.getElementById('layout_summary').textContent !== ''", 120, "what-if page")
        fields = page.evaluate("JSON.stringify(['mode', 'layout', 'prefill_instances', 'prefill_tp', 'handoff',"
                               " 'layout_summary'].map((id) => document.getElementById(id).value"
                               " ?? document.getElementById(id).textContent))")
        mode, layout, prefill_n, prefill_tp, handoff, summary = json.loads(fields)
        assert (mode, layout, prefill_n, prefill_tp, handoff) == ("disagg", "1x4x1x1", "1", "4", "push")
        assert summary.startswith("disaggregated 1P:1D")
        assert page.evaluate("document.getElementById('prefill_tp').disabled") is False
        assert page.evaluate("document.getElementById('layout_name').textContent") == "decode pool"
        page.wait("document.body.dataset.state === 'ready'", 300, "the disaggregated what-if")   # the engine ran it
        assert page.evaluate("document.querySelector(\"tr[data-metric='ttft_p99_s'] td.after\").textContent") != ""
        assert page.errors() == []
