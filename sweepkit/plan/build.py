"""The screen's inputs from the space's table and a workload: :class:`~sweepkit.plan.screen.Point` columns,
the :class:`~sweepkit.plan.screen.Demand` of a workload, and the screen run in chunks.

A workload's mean request over its turns (turn k of T carries the system prompt s, the history of k turns and
its new input x; y output tokens a turn):

    prompt = s + x (T + 1) / 2 + y (T - 1) / 2        cached = prompt - x        (what a prefix cache can serve)

E, tokens per row per verify step with gamma drafted tokens of conditional acceptances alpha_i, is
1 + sum_{k=1..gamma} prod_{i<=k} alpha_i (Leviathan et al., ICML 2023, arXiv:2211.17192, eq. 1 generalized
to per-position alphas).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.acceptance import workload_alphas
from sweepkit.catalogue import get_device, get_draft, get_format, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.layout import make_layout
from sweepkit.errors import InputError
from sweepkit.plan.screen import Demand, Point, screen
from sweepkit.serving.workloads import Workload

CHUNK = 1 << 18
"""Configurations per call of the compiled screen (one program for every chunk: the last is padded)."""


def demand(w: Workload, ttft_slo_s: float | None = None, tpot_slo_s: float | None = None) -> Demand:
    """The workload's mean request (module docstring) and its SLOs, or the given ones (``inf``: no SLO)."""
    t = w.turns
    prompt = w.system_prompt_tokens * (w.system_prompts > 0) + w.prompt_mean_tokens * (t + 1) / 2 \
        + w.output_mean_tokens * (t - 1) / 2
    def f(x):
        return jnp.asarray(x, jnp.float32)
    return Demand(prompt_tokens=f(prompt), cached_tokens=f(prompt - w.prompt_mean_tokens),
                  output_tokens=f(w.output_mean_tokens),
                  ttft_slo_s=f(w.ttft_slo_s if ttft_slo_s is None else ttft_slo_s),
                  tpot_slo_s=f(w.tpot_slo_s if tpot_slo_s is None else tpot_slo_s))


def tokens_per_step(workload: str, spec: str) -> tuple[float, int, str]:
    """(E, gamma, draft) of a ``spec`` value (``none`` or DRAFT:GAMMA) on a workload's acceptance model.

    Example:
      >>> round(tokens_per_step("chat", "mtp:3")[0], 4)     # 1 + .75 + .75 x .69 + .75 x .69 x .65
      2.6039
    """
    if spec == "none":
        return 1.0, 0, "none"
    draft, gamma = spec.split(":")
    alphas, _ = workload_alphas(workload, draft, int(gamma))
    return 1.0 + float(np.sum(np.cumprod(alphas))), int(gamma), draft


def layout_columns(table: dict[str, np.ndarray], model: str, tp: str, dp: str | None, ep: str | None):
    """The :class:`~sweepkit.costmodel.layout.Layout` of every row (float32 host columns), from the table's
    ``tp``, ``dp`` and ``ep`` columns (None: 1), its device and compute (= weight) format, as the serving
    engine builds a replica's (:func:`sweepkit.serving.config.pool_layout`, the default expert imbalance)."""
    m, n = get_model(model), len(table[tp])
    ones = np.ones(n, np.int64)
    keys = np.stack([np.unique(table["device"], return_inverse=True)[1], table[tp].astype(np.int64),
                     table[dp].astype(np.int64) if dp else ones, table[ep].astype(np.int64) if ep else ones,
                     np.unique(table["weight_format"], return_inverse=True)[1]], axis=1)
    uniq, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    lays = [make_layout(get_device(str(table["device"][i])), m, int(k[1]), dp=int(k[2]), ep=int(k[3]),
                        compute_format=str(table["weight_format"][i]), dtype=np.float32)
            for k, i in zip(uniq, first)]
    return jax.tree.map(lambda *xs: np.asarray(xs, np.float32)[inv.reshape(-1)], *lays)


def points(table: dict[str, np.ndarray], workload: str, model: str) -> Point:
    """The :class:`Point` columns (float32, host arrays) of every row of the space's table."""
    devices = sorted(set(table["device"]))
    dev_idx = np.searchsorted(np.array(devices, dtype=object), table["device"])
    dev = device_arrays([get_device(d) for d in devices], np.float32, host=True)
    spec_vals = sorted(set(table["spec"]))
    spec_E = {s: tokens_per_step(workload, s) for s in spec_vals}
    def col(k):
        return table[k].astype(np.float32)
    def look(k, fn):
        return np.array([fn(v) for v in table[k]], np.float32) if len(set(table[k])) > 1 else \
            np.full(len(table[k]), fn(table[k][0]), np.float32)
    speed = np.array([[get_device(d).speedup(f) for f in ("bf16", *[x for x in set(table["weight_format"])
                                                                    if x != "bf16"])] for d in devices])
    fmts = ["bf16", *[x for x in set(table["weight_format"]) if x != "bf16"]]
    f_idx = np.array([fmts.index(f) for f in table["weight_format"]])
    spec = table["spec"]
    uniq, inv = np.unique(spec.astype(str), return_inverse=True)
    E = np.array([spec_E[u][0] for u in uniq], np.float32)[inv]
    gamma = np.array([spec_E[u][1] for u in uniq], np.float32)[inv]
    return Point(
        device=jax.tree.map(lambda a: a[dev_idx], dev),
        layout=layout_columns(table, model, "tp", "dp", "ep"),
        prefill_layout=layout_columns(table, model, "prefill_tp", None, None),
        tp=col("tp"), pp=col("pp"), instances=col("instances"),
        disagg=(table["mode"] == "disagg").astype(np.float32), prefill_instances=col("prefill_instances"),
        prefill_tp=col("prefill_tp"), chunked=(table["batching"] == "chunked").astype(np.float32),
        batch_cap=col("batch_cap"), paged=np.char.startswith(table["kv"].astype(str), "paged").astype(np.float32),
        prefix=(table["kv"] == "paged+prefix").astype(np.float32),
        weight_bytes=look("weight_format", lambda f: get_format(f).bytes_per_value),
        kv_bytes=look("kv_format", lambda f: get_format(f).bytes_per_value),
        compute_speedup=speed[dev_idx, f_idx].astype(np.float32), draft=(gamma > 0).astype(np.float32),
        gamma=gamma, tokens_per_step=E,
        price_usd_per_gpu_hour=np.array([get_device(d).price_usd_per_gpu_hour for d in devices], np.float32)[dev_idx])


def run_screen(table: dict[str, np.ndarray], model: str, w: Workload, ttft_slo_s: float | None = None,
               tpot_slo_s: float | None = None, pts: Point | None = None) -> dict[str, np.ndarray]:
    """The screen of every row of the table for workload ``w``: dict of :class:`~sweepkit.plan.screen.Bound`
    fields as numpy columns."""
    target_model = get_model(model)
    if any(s != "none" for s in set(table["spec"])) and not target_model.n_layers:
        raise InputError(f"model {model!r}: no layers to draft from")
    target = model_arrays(target_model, jnp.float32)
    mtp = model_arrays(get_draft("mtp", target_model), jnp.float32)
    dm = demand(w, ttft_slo_s, tpot_slo_s)
    pts = pts if pts is not None else points(table, w.name, model)
    n = int(pts.tp.shape[0])
    size = min(CHUNK, 1 << max(math.ceil(math.log2(max(n, 1))), 10))
    out = []
    for lo in range(0, n, size):
        hi = min(lo + size, n)
        part = jax.tree.map(lambda a, lo=lo, hi=hi: _pad(a[lo:hi], size), pts)
        res = screen(part, target, mtp, dm)
        out.append(jax.tree.map(lambda a, k=hi - lo: np.asarray(a)[:k], res))
    return {k: np.concatenate([getattr(o, k) for o in out]) for k in out[0].__dataclass_fields__}


def _pad(a: np.ndarray, size: int) -> np.ndarray:
    return a if a.shape[0] == size else np.concatenate([a, np.repeat(a[-1:], size - a.shape[0], axis=0)])
