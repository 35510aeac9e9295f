// The what-if page: every change re-runs before and after on the serving engine (POST /api/whatif).
"use strict";
const METRICS = [["ttft_p50_s", "TTFT p50", "s"], ["ttft_p99_s", "TTFT p99", "s"], ["tpot_p99_s", "TPOT p99", "s"],
  ["itl_p99_s", "ITL p99", "s"], ["output_tok_s", "output tok/s", ""], ["energy_per_token_j", "J / token", ""],
  ["attainment", "SLO attainment", "%"]];
const FIELDS = ["batching", "token_budget", "kv", "preemption", "router", "weight_format", "kv_format", "compute_format", "draft"];
const DISAGG = ["prefill_instances", "prefill_tp", "handoff"];
let OPT = null, dirty = false, timer = null;
const $ = (id) => document.getElementById(id);

function layoutKey(l, c) {
  const inst = l.instances ?? c.instances, tp = l.tp ?? c.tp, pp = l.pp ?? 1, mb = l.microbatches ?? pp;
  return `${inst}x${tp}x${pp}x${mb}`;
}
function layoutLabel(k) {
  const [i, t, p, m] = k.split("x");
  return p === "1" ? `${i} x TP${t}` : `${i} x (TP${t}, PP${p}), ${m} micro-batch${m === "1" ? "" : "es"}`;
}

function applyPreset(name) {
  const l = OPT.levers[name], c = OPT.cluster;
  $("mode").value = l.mode ?? "colocated";
  $("layout").value = layoutKey(l, c);
  $("prefill_instances").value = l.prefill_instances ?? 1;
  $("prefill_tp").value = String(l.prefill_tp ?? l.tp ?? c.tp);
  $("handoff").value = l.handoff ?? "pull";
  $("batching").value = l.batching ?? "prefill-priority";
  $("token_budget").value = l.token_budget ?? c.token_budget;
  $("kv").value = l.kv ?? "reserved";
  $("preemption").value = l.preemption ?? "recompute";
  $("prefix_caching").checked = !!l.prefix_caching;
  $("router").value = l.router ?? "least-loaded";
  $("weight_format").value = l.weight_format ?? "bf16";
  $("kv_format").value = l.kv_format ?? "bf16";
  $("compute_format").value = l.compute_format ?? "bf16";
  $("draft").value = l.draft;
  $("gamma").value = l.gamma || 3;
  $("alpha").value = l.draft === "none" ? 0.7 : l.alpha;
  dirty = false;
  syncOutputs();
  $("layout_summary").textContent = OPT.layouts[name];
}

// The after configuration's layout in words, as /api/options words each preset's (sweepkit/serve/layouts.py).
function layoutSummary() {
  const [i, t, p, m] = $("layout").value.split("x");
  const pool = (n, tp, pp, mb) => pp === "1" ? `${n} x TP${tp}` : `${n} x (TP${tp}, PP${pp}), ${mb} micro-batch${mb === "1" ? "" : "es"}`;
  if ($("mode").value !== "disagg") return `colocated, ${pool(i, t, p, m)}`;
  const n = $("prefill_instances").value;
  return `disaggregated ${n}P:${i}D (prefill ${pool(n, $("prefill_tp").value, "1", "1")}, decode ${pool(i, t, p, m)}, ` +
         `${$("handoff").value} hand-off)`;
}

function syncOutputs() {
  const spec = $("draft").value !== "none", disagg = $("mode").value === "disagg";
  $("gamma").disabled = $("alpha").disabled = !spec;
  for (const f of DISAGG) $(f).disabled = !disagg;
  $("layout_name").textContent = disagg ? "decode pool" : "layout";
  if (dirty) $("layout_summary").textContent = layoutSummary();
  $("gamma_v").textContent = $("gamma").value;
  $("alpha_v").textContent = Number($("alpha").value).toFixed(2);
}

function afterLever() {
  if (!dirty) return $("preset").value;
  const [i, t, p, m] = $("layout").value.split("x").map(Number);
  const o = {name: "custom", instances: i, tp: t, pp: p, microbatches: m, prefix_caching: $("prefix_caching").checked,
             token_budget: Number($("token_budget").value)};
  for (const f of FIELDS) if (f !== "token_budget") o[f] = $(f).value;
  if (o.draft !== "none") { o.gamma = Number($("gamma").value); o.alpha = Number($("alpha").value); }
  o.mode = $("mode").value;
  if (o.mode === "disagg") {
    o.prefill_instances = Number($("prefill_instances").value);
    o.prefill_tp = Number($("prefill_tp").value);
    o.handoff = $("handoff").value;
  }
  return o;
}

function saveURL() {
  const q = new URLSearchParams({workload: $("workload").value, device: $("device").value, lever: $("preset").value});
  if ($("before").value !== "baseline") q.set("before", $("before").value);
  history.replaceState(null, "", "/what-if?" + q.toString());
}

function schedule() { clearTimeout(timer); timer = setTimeout(run, 120); }

async function run() {
  saveURL();
  setStatus("simulating before and after …");
  document.body.dataset.state = "running";
  try {
    const body = {workload: $("workload").value, device: $("device").value, before: $("before").value,
                  after: afterLever(), rate: Number($("rate").value)};
    const r = await post("whatif", "/api/whatif", body);
    if (r === null) return;                              // superseded by a newer change
    show(r);
    setStatus(`${r.workload} on ${r.device} at ${fmt(r.rate_per_s)} ${r.load_unit}: answered in ${r.elapsed_s.toFixed(2)} s`);
    document.body.dataset.state = "ready";
  } catch (e) {
    setStatus(e.message, true);
    document.body.dataset.state = "error";
  }
  document.body.dataset.runs = String(Number(document.body.dataset.runs) + 1);
}

function show(r) {
  const tb = $("metrics").tBodies[0];
  tb.innerHTML = "";
  for (const [k, label, unit] of METRICS) {
    const tr = el("tr", {"data-metric": k});
    tr.appendChild(el("td", {class: "name"}, label));
    tr.appendChild(el("td", {class: "before"}, fmt(r.before.metrics[k], unit)));
    tr.appendChild(el("td", {class: "after"}, fmt(r.after.metrics[k], unit)));
    const pct = r.change_pct[k];
    tr.appendChild(el("td", {class: "change " + (r.verdict[k] || "")}, pct === null ? "–" : (pct > 0 ? "+" : "") + pct.toFixed(1) + " %"));
    tb.appendChild(tr);
  }
  $("band").textContent = r.same_pct;
  drawTimeline($("tl_before"), r.before.timeline.requests, r.after.timeline.requests);
  drawTimeline($("tl_after"), r.after.timeline.requests, r.before.timeline.requests);
  drawWhere(r);
}

const PHASES = [["queue_s", "q"], ["prefill_s", "p"], ["handoff_s", "h"], ["decode_s", "d"]];

function drawTimeline(host, reqs, other) {
  const W = 560, row = 11, H = reqs.length * row + 24;
  const end = Math.max(1e-9, ...reqs.map((q) => q.finish_s), ...other.map((q) => q.finish_s));
  const x = (t) => 30 + t / end * (W - 40);
  const svg = svgEl("svg", {width: W, height: H, class: "timeline"});
  reqs.forEach((q, i) => {
    let t = q.arrival_s;
    for (const [k, cls] of PHASES) {
      if (q[k] > 0) svg.appendChild(svgEl("rect", {x: x(t), y: i * row + 2, width: Math.max(0.5, x(t + q[k]) - x(t)), height: row - 2, class: cls}));
      t += q[k];
    }
  });
  svg.appendChild(svgEl("text", {x: 30, y: H - 4}, "0 s"));
  svg.appendChild(svgEl("text", {x: W - 60, y: H - 4}, fmt(end, "s")));
  host.innerHTML = "";
  host.appendChild(svg);
}

function drawWhere(r) {
  const W = 520, sides = [["before", r.before.timeline.mean_s], ["after", r.after.timeline.mean_s]];
  const total = Math.max(1e-9, ...sides.map(([, m]) => PHASES.reduce((a, [k]) => a + m[k], 0)));
  const svg = svgEl("svg", {width: W, height: 64});
  sides.forEach(([name, m], i) => {
    let x = 50;
    svg.appendChild(svgEl("text", {x: 0, y: i * 28 + 16}, name));
    for (const [k, cls] of PHASES) {
      const w = m[k] / total * (W - 130);
      if (w > 0) svg.appendChild(svgEl("rect", {x, y: i * 28 + 4, width: w, height: 18, class: cls}));
      x += w;
    }
    svg.appendChild(svgEl("text", {x: x + 4, y: i * 28 + 16}, fmt(PHASES.reduce((a, [k]) => a + m[k], 0), "s")));
  });
  $("where").innerHTML = "";
  $("where").appendChild(svg);
}

async function capacity() {
  $("cap_progress").textContent = "searching …";
  $("cap_table").hidden = true;
  try {
    let job = await post("capacity", "/api/capacity", {workload: $("workload").value, device: $("device").value, lever: afterLever()});
    while (job && job.state === "running") {
      $("cap_progress").textContent = `searching … ${job.simulations} simulated loads`;
      await new Promise((ok) => setTimeout(ok, 500));
      job = await getJSON("/api/capacity/" + job.job);
    }
    if (!job) return;
    if (job.state === "error") throw new Error(job.error);
    const c = job.result, tb = $("cap_table").tBodies[0];
    tb.innerHTML = "";
    for (const [label, v] of [["capacity (" + c.load_unit + ")", c.capacity_per_s], ["goodput / GPU (req/s)", c.goodput_req_s_per_gpu],
                              ["$ / M tokens", c.usd_per_mtok], ["J / token", c.energy_per_token_j]]) {
      const tr = el("tr"); tr.appendChild(el("td", {class: "name"}, label)); tr.appendChild(el("td", {}, fmt(v))); tb.appendChild(tr);
    }
    $("cap_table").hidden = false;
    $("cap_progress").textContent = `done (${c.simulated_loads} simulated loads)`;
  } catch (e) {
    $("cap_progress").textContent = e.message;
    $("cap_progress").className = "error";
  }
}

function setRate() {
  const w = OPT.workloads.find((x) => x.name === $("workload").value);
  $("rate").value = w.reference_rate_per_s;
  $("unit").textContent = w.load_unit + (w.recorded ? " (the sweep's reference load)" : " (no reference load recorded)");
}

async function init() {
  OPT = await getJSON("/api/options");
  const q = new URLSearchParams(location.search);
  const names = Object.keys(OPT.levers);
  fillSelect($("workload"), OPT.workloads.map((w) => w.name), q.get("workload") || (OPT.workloads.find((w) => w.name === "chat") || OPT.workloads[0]).name);
  fillSelect($("device"), OPT.all_devices, q.get("device") || OPT.devices[0]);
  fillSelect($("before"), names, q.get("before") || "baseline");
  fillSelect($("preset"), names, q.get("lever") || "baseline");
  const layouts = [...new Set(names.map((n) => layoutKey(OPT.levers[n], OPT.cluster)))];
  $("layout").innerHTML = "";
  for (const k of layouts) $("layout").appendChild(el("option", {value: k}, layoutLabel(k)));
  for (const f of ["batching", "kv", "preemption", "router", "handoff"]) fillSelect($(f), OPT.choices[f]);
  fillSelect($("prefill_tp"), [1, 2, 4, 8].map(String));
  for (const f of ["weight_format", "kv_format", "compute_format"]) fillSelect($(f), OPT.formats);
  fillSelect($("draft"), OPT.drafts);
  setRate();
  if (q.get("rate")) $("rate").value = q.get("rate");
  applyPreset($("preset").value);
  $("preset").addEventListener("change", () => { applyPreset($("preset").value); schedule(); });
  $("workload").addEventListener("change", () => { setRate(); schedule(); });
  for (const id of ["device", "before", "rate"]) $(id).addEventListener("change", schedule);
  for (const id of ["mode", "layout", "token_budget", "prefix_caching", "gamma", "alpha", ...FIELDS, ...DISAGG])
    $(id).addEventListener("change", () => { dirty = true; syncOutputs(); schedule(); });
  for (const id of ["gamma", "alpha"]) $(id).addEventListener("input", syncOutputs);
  $("capacity").addEventListener("click", capacity);
  run();
}

init().catch((e) => setStatus(e.message, true));
