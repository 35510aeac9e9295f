"""`sweepkit serve`: the real app on a real socket, a real warehouse from `sweepkit simulate`, real Chromium.

Tiny workloads (tests/grids/serve-workloads.toml: 16 short requests) keep every simulation to milliseconds;
the compiles are shared with the `sweepkit simulate` run of the fixture (same process, same shapes).
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import uvicorn
from click.testing import CliRunner

from sweepkit.catalogue import get_device
from sweepkit.cli import main
from sweepkit.cli.serve import bind, url
from support.browser import find_chromium, open_page
from sweepkit.serve.api import build_context, recorded
from sweepkit.serve.app import create_app
from sweepkit.store import Warehouse

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = str(ROOT / "tests/grids/serve-workloads.toml")
SCREENSHOT = ROOT / "docs/img/what-if.png"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`sweepkit simulate tests/grids/serve-small.toml` into a fresh warehouse, then the app on 127.0.0.1:0."""
    root = tmp_path_factory.mktemp("serve") / "wh"
    res = CliRunner().invoke(main, ["simulate", "tests/grids/serve-small.toml", "--warehouse", str(root),
                                    "--format", "json"])
    assert res.exit_code == 0, res.output
    wh = Warehouse(root)
    ctx = build_context(wh, WORKLOADS)
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(ctx, warm=True), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = url(sock)
    deadline = time.monotonic() + 600
    while not _get(base, "/api/health").get("warm", {}).get("done"):
        assert time.monotonic() < deadline, "warm-up did not finish"
        time.sleep(0.2)
    yield base, wh, ctx
    server.should_exit = True
    thread.join(timeout=10)


def _get(base, path):
    try:
        with urllib.request.urlopen(base + path, timeout=600) as r:
            return json.load(r)
    except urllib.error.URLError:
        return {}


def _post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def test_live_numbers_equal_the_recorded_reference_numbers(served):
    """The what-if of a swept lever at the sweep's load = the warehouse's row (same engine, same requests)."""
    base, wh, ctx = served
    status, r = _post(base, "/api/whatif", {"workload": "tiny-batch", "device": "H100", "before": "baseline",
                                            "after": "mtp"})
    assert status == 200, r
    assert r["rate_per_s"] == ctx.reference["tiny-batch"]
    for side, lever in (("before", "baseline"), ("after", "mtp")):
        row = recorded(wh, ctx.run_id, "tiny-batch", "H100", lever)
        m = r[side]["metrics"]
        for k in ("ttft_p99_s", "tpot_p99_s", "itl_p99_s", "output_tok_s", "energy_per_token_j"):
            assert m[k] == pytest.approx(row[k], rel=1e-12), (side, k)
        assert m["attainment"] == pytest.approx(row["slo_attainment"], rel=1e-12)
    assert r["after"]["metrics"]["tpot_p99_s"] < r["before"]["metrics"]["tpot_p99_s"]   # MTP at alpha 0.7 helps
    tl = r["before"]["timeline"]
    assert 1 <= len(tl["requests"]) <= 24
    for q in tl["requests"]:   # queue + prefill + hand-off = TTFT; decode = finish - first token
        assert q["queue_s"] + q["prefill_s"] + q["handoff_s"] == pytest.approx(q["first_s"] - q["arrival_s"])
        assert q["decode_s"] == pytest.approx(q["finish_s"] - q["first_s"])


@pytest.mark.parametrize("body, needle", [
    ({"workload": "nope", "device": "H100"}, "workload = 'nope' is not allowed; expected one of tiny-batch, tiny-chat"),
    ({"workload": "tiny-chat", "device": "X9"}, "device = 'X9' is not allowed"),
    ({"workload": "tiny-chat", "device": "H100", "after": "warp"}, "after = 'warp' is not allowed"),
    ({"workload": "tiny-chat", "device": "H100", "rate": -1}, "rate = -1 is not allowed; expected a number in"),
    ({"workload": "tiny-chat", "device": "H100", "after": {"draft": "mtp", "gamma": 3, "alpha": 1.5}},
     "alpha"),
    ({"workload": "tiny-chat", "device": "H100", "after": {"draft": "mtp", "gamma": 3, "alpha": 0.8, "pp": 2,
                                                           "tp": 2}},
     "speculative decoding with pipeline parallelism is not modelled"),
    ({"workload": "tiny-chat", "device": "H100", "sql": "select 1"}, "field 'sql' is not allowed"),
    ([1, 2], "body is not allowed; expected a JSON object"),
])
def test_bad_input_is_http_400_one_line(served, body, needle):
    base, _, _ = served
    status, r = _post(base, "/api/whatif", body)
    assert status == 400, r
    assert needle in r["error"] and "\n" not in r["error"], r["error"]


def test_decode_api_and_its_bad_input(served):
    base, _, _ = served
    status, r = _post(base, "/api/decode", {"device": "H100", "model": "llama-3-8b", "draft": "mtp", "batch": 1,
                                            "context": 512, "gamma": 3, "alpha": 0.7})
    assert status == 200
    # the README's hand check (sweepkit.evaluate, float64): 6.126 ms plain, 3.076 ms with MTP gamma 3 alpha 0.7
    assert round(r["s_per_token_plain"] * 1e3, 3) == 6.126 and round(r["s_per_token_spec"] * 1e3, 3) == 3.076
    assert r["break_even_batch"] is None or r["break_even_batch"] > 1
    status, r = _post(base, "/api/decode", {"batch": 0})
    assert status == 400 and r["error"].startswith("batch = 0 is not allowed")


def test_matrix_api_links_each_cell_to_a_preset_what_if(served):
    base, _, _ = served
    rows = _get(base, "/api/matrix")["rows"]
    assert rows and {r["lever"] for r in rows} == {"mtp"}
    assert rows[0]["whatif"] == "/what-if?workload=tiny-batch&device=H100&lever=mtp"


def test_the_server_answers_while_a_capacity_search_runs(served):
    base, _, _ = served
    status, job = _post(base, "/api/capacity", {"workload": "tiny-batch", "device": "H100", "lever": "baseline"})
    assert status == 202
    t0 = time.perf_counter()
    assert _get(base, "/api/health")["status"] == "ok"
    assert time.perf_counter() - t0 < 5.0
    while job["state"] == "running":
        time.sleep(0.2)
        job = _get(base, f"/api/capacity/{job['job']}")
    assert job["state"] == "done", job
    assert job["result"]["goodput_req_s_per_gpu"] > 0 and job["result"]["energy_per_token_j"] > 0


def test_a_live_capacity_search_starts_where_the_sweep_does(served):
    """Twice the sweep's reference load of the workload (as `sweepkit simulate`), else 1/s, and the same
    capacity as the search of `sweepkit.serving.capacity` from that start."""
    from sweepkit.serve.api import capacity_args
    from sweepkit.serve.whatif import run_capacity
    from sweepkit.serving.capacity import search
    from sweepkit.serving.config import Config

    _, _, ctx = served
    ctx = dataclasses.replace(ctx, reference={"tiny-chat": 0.75})
    args = capacity_args(ctx, {"workload": "tiny-chat", "device": "H100", "lever": "baseline"})
    assert args["start_per_s"] == 1.5
    assert capacity_args(dataclasses.replace(ctx, reference={}), {"workload": "tiny-chat", "device": "H100",
                                                                  "lever": "baseline"})["start_per_s"] == 1.0
    live = run_capacity(args["w"], ctx.cluster, "H100", args["lever"], start_per_s=args["start_per_s"])
    dev = get_device("H100")
    caps, _, rows = search(args["w"], ctx.cluster, [Config("H100", args["lever"])], [dev.price_usd_per_gpu_hour],
                           [dev.idle_w], start=1.5)
    assert live["capacity_per_s"] == caps[0] and live["simulated_loads"] == len(rows)


def test_serve_binds_to_127_0_0_1_by_default(served, tmp_path):
    _, wh, _ = served
    proc = subprocess.Popen([sys.executable, "-m", "sweepkit.cli", "serve", "--port", "0", "--no-warm",
                             "--warehouse", str(wh.root)], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SWEEPKIT_JAX_CACHE": "off"})
    try:
        line = proc.stderr.readline()
        assert line.startswith("sweepkit serve: http://127.0.0.1:"), line
        base = line.split()[2].removesuffix("/what-if")
        deadline = time.monotonic() + 60
        while _get(base, "/api/health").get("status") != "ok":
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed (CI installs it: .ci/run)")
def test_what_if_page_in_chromium_change_alpha_numbers_change(served, tmp_path):
    base, _, _ = served
    with open_page(f"{base}/what-if?workload=tiny-batch&device=H100&lever=mtp") as page:
        page.wait("document.body.dataset.state === 'ready'", 300, "what-if page")
        cell = "document.querySelector(\"tr[data-metric='tpot_p99_s'] td.after\").textContent"
        first = page.evaluate(cell)
        assert page.evaluate("document.getElementById('preset').value") == "mtp"
        page.evaluate("(() => { const a = document.getElementById('alpha'); a.value = 0.95;"
                      " a.dispatchEvent(new Event('change')); })()")
        page.wait("document.body.dataset.runs === '2' && document.body.dataset.state === 'ready'", 300,
                  "after the alpha change")
        assert page.evaluate(cell) != first
        assert page.evaluate("document.querySelectorAll('#tl_after rect').length") > 0
        shot = tmp_path / "what-if.png"
        page.screenshot(shot)
        assert page.errors() == []
    if shot.stat().st_size < 300_000 and os.environ.get("SWEEPKIT_UPDATE_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copy(shot, SCREENSHOT)


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed (CI installs it: .ci/run)")
def test_matrix_cell_opens_the_preset_what_if_and_decode_page_reprices(served):
    base, _, _ = served
    with open_page(f"{base}/matrix") as page:
        page.wait("document.body.dataset.state === 'ready'", 60, "matrix page")
        page.evaluate("document.querySelector('a.cell').click()")
        page.wait("location.pathname === '/what-if' && document.body.dataset.state === 'ready'", 300, "what-if")
        assert page.evaluate("[document.getElementById('workload').value, document.getElementById('device').value,"
                             " document.getElementById('preset').value].join()") == "tiny-batch,H100,mtp"
        page.navigate(f"{base}/decode")
        page.wait("location.pathname === '/decode' && document.body.dataset.state === 'ready'", 60, "decode")
        before = page.evaluate("document.querySelector(\"tr[data-field='speedup'] td:last-child\").textContent")
        page.evaluate("(() => { const b = document.getElementById('batch'); b.value = 64;"
                      " b.dispatchEvent(new Event('input')); })()")
        page.wait("document.body.dataset.runs === '2'", 60, "decode change")
        assert page.evaluate("document.querySelector(\"tr[data-field='speedup'] td:last-child\").textContent") != before
        assert page.evaluate("document.querySelector('#curve path.curve') !== null")
        assert page.errors() == []
