// The decode explorer: every change re-prices one point and the speed-up curve (POST /api/decode).
"use strict";
const $ = (id) => document.getElementById(id);
const ROWS = [["s_per_token_plain", "ms / token, plain", 1e3], ["s_per_token_spec", "ms / token, speculative", 1e3],
  ["speedup", "speed-up", 1], ["tokens_per_pass", "E[tokens] per verify pass", 1], ["plain_bound", "plain pass bound"],
  ["verify_bound", "verify pass bound"], ["energy_per_token_plain_j", "J / token, plain", 1], ["energy_per_token_spec_j", "J / token, speculative", 1],
  ["fits_in_memory", "fits in memory"]];

async function run() {
  $("gamma_v").textContent = $("gamma").value;
  $("alpha_v").textContent = Number($("alpha").value).toFixed(2);
  const body = {device: $("device").value, model: $("model").value, draft: $("draft").value, tp: Number($("tp").value),
                batch: Number($("batch").value), context: Number($("context").value), gamma: Number($("gamma").value),
                alpha: Number($("alpha").value)};
  document.body.dataset.state = "running";
  try {
    const t0 = performance.now();
    const r = await post("decode", "/api/decode", body);
    if (r === null) return;
    const tb = $("point").tBodies[0];
    tb.innerHTML = "";
    for (const [k, label, scale] of ROWS) {
      const tr = el("tr", {"data-field": k});
      tr.appendChild(el("td", {class: "name"}, label));
      tr.appendChild(el("td", {}, scale ? fmt(r[k] * scale) : String(r[k])));
      tb.appendChild(tr);
    }
    drawCurve(r);
    $("break_even").textContent = r.break_even_batch === null ? "(no break-even in 1 … 1,024)" : `break-even batch ≈ ${r.break_even_batch.toFixed(1)}`;
    setStatus(`priced in ${(performance.now() - t0).toFixed(0)} ms`);
    document.body.dataset.state = "ready";
  } catch (e) {
    setStatus(e.message, true);
    document.body.dataset.state = "error";
  }
  document.body.dataset.runs = String(Number(document.body.dataset.runs) + 1);
}

function drawCurve(r) {
  const W = 520, H = 260, b = r.curve.batch, s = r.curve.speedup;
  const top = Math.max(1.2, ...s) * 1.05;
  const x = (v) => 40 + Math.log2(v) / Math.log2(b[b.length - 1]) * (W - 60);
  const y = (v) => H - 30 - v / top * (H - 50);
  const svg = svgEl("svg", {width: W, height: H});
  svg.appendChild(svgEl("line", {x1: 40, x2: W - 20, y1: y(1), y2: y(1), stroke: "#999", "stroke-dasharray": "4 3"}));
  svg.appendChild(svgEl("path", {d: s.map((v, i) => (i ? "L" : "M") + x(b[i]).toFixed(1) + "," + y(v).toFixed(1)).join(""),
                                 fill: "none", stroke: "#3d7be8", "stroke-width": 2, class: "curve"}));
  svg.appendChild(svgEl("circle", {cx: x(Math.min(r.batch, b[b.length - 1])), cy: y(r.speedup), r: 4, fill: "#e8a33d"}));
  if (r.break_even_batch !== null) svg.appendChild(svgEl("line", {x1: x(r.break_even_batch), x2: x(r.break_even_batch), y1: 10, y2: H - 30, stroke: "#a00"}));
  for (const v of [1, 8, 64, 512]) svg.appendChild(svgEl("text", {x: x(v) - 6, y: H - 12}, String(v)));
  svg.appendChild(svgEl("text", {x: 0, y: y(1) + 4}, "1.0×"));
  svg.appendChild(svgEl("text", {x: W / 2 - 20, y: H - 1}, "batch"));
  $("curve").innerHTML = "";
  $("curve").appendChild(svg);
}

async function init() {
  const opt = await getJSON("/api/options");
  fillSelect($("device"), opt.all_devices, "H100");
  fillSelect($("model"), opt.models, "llama-3-8b");
  fillSelect($("draft"), opt.drafts, "mtp");
  for (const id of ["device", "model", "draft", "tp", "batch", "context", "gamma", "alpha"]) $(id).addEventListener("input", run);
  run();
}

init().catch((e) => setStatus(e.message, true));
