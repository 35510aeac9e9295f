// sweepkit serve: shared helpers (no external scripts).
"use strict";
const PAGE_ID = Math.random().toString(36).slice(2);
const inflight = {};

// POST a JSON body; a newer call with the same key aborts the older one (and the server supersedes it).
async function post(key, path, body) {
  if (inflight[key]) inflight[key].abort();
  const ctl = new AbortController();
  inflight[key] = ctl;
  let res;
  try {
    res = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json"},
                             body: JSON.stringify(Object.assign({page: PAGE_ID}, body)), signal: ctl.signal});
  } catch (e) {
    if (e.name === "AbortError") return null;
    throw e;
  }
  if (inflight[key] === ctl) delete inflight[key];
  if (res.status === 409) return null;                 // superseded by a newer request
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || ("HTTP " + res.status));
  return data;
}

async function getJSON(path) {
  const res = await fetch(path);
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || ("HTTP " + res.status));
  return data;
}

function fmt(v, unit) {
  if (v === null || v === undefined) return "–";
  if (unit === "s") return v < 1 ? (v * 1e3).toFixed(1) + " ms" : v.toFixed(3) + " s";
  if (unit === "%") return (v * 100).toFixed(1) + " %";
  if (Math.abs(v) >= 100) return v.toFixed(0);
  return v.toPrecision(4);
}

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svgEl(tag, attrs, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function setStatus(text, isError) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = isError ? "error" : "";
}

function fillSelect(sel, values, chosen) {
  sel.innerHTML = "";
  for (const v of values) {
    const o = el("option", {value: v}, v);
    if (v === chosen) o.selected = true;
    sel.appendChild(o);
  }
}
