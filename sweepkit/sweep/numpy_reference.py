"""A plain-numpy implementation of the same decode-point maths, broadcasting over the same axes.

Used two ways: as the baseline of benchmarks/bench_sweep.py (engine vs numpy, same algorithm, same
factoring: hardware stage per outer point, verify per gamma, combination per alpha) and as an independent
oracle in the test suite (tests/sweep/test_numpy_reference.py). Written from
github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim without importing the JAX code.
"""

from __future__ import annotations

import numpy as np

from sweepkit.catalogue import get_device, get_draft, get_format, get_model

CLOCK_FLOOR, MEM_UTIL = 0.4, 0.9
OUTER = ("device", "model", "draft", "tp", "weight_format", "kv_format", "compute_format", "batch", "context")


def _roofline(F, By, d, n, k, overhead):
    peak = d["peak"] * d["mfu"] * n * k
    bw = d["bw"] * d["mbu"] * n
    tc, tm = F / peak, By / bw
    ec, em = F * d["ef"] / k, By * d["eb"]
    budget = (d["tdp"] - d["idle"]) * n
    over = (ec + em) > budget * np.maximum(tc, tm)
    safe = np.where(ec > 0, ec, 1.0)
    s_mem = np.sqrt(np.clip((budget * tm - em) / safe, 0, 1))
    p, q = em / safe, -budget * tc / safe
    s = np.ones_like(p)
    for _ in range(6):
        s = s - (s ** 3 + p * s + q) / (3 * s * s + p)
    s_cmp = np.where(CLOCK_FLOOR ** 3 + p * CLOCK_FLOOR + q >= 0, CLOCK_FLOOR, s)
    s = np.where(over, np.clip(np.where(s_mem * tm >= tc, s_mem, s_cmp), CLOCK_FLOOR, 1), 1.0)
    e_dyn = ec * s * s + em
    t = np.maximum(np.maximum(tc / s, tm), np.where(over, e_dyn / budget, 0)) + overhead
    bound = np.where(over, 2, np.where(tc >= tm, 1, 0))
    return t, e_dyn + d["idle"] * n * t, bound


def _pass(T, A, K, m, d, n, wb, kb, k, target):
    F = (2 * m["pmm"] * T + 2 * m["L"] * m["q"] * A) * m["present"]
    By = (m["pmm"] * wb + T * m["D"] * wb + K * m["kv"] * kb) * m["present"]
    t, e, bound = _roofline(F, By, d, n, k, d["overhead"] * m["present"] if target else 0.0)
    if not target:
        return t * m["present"], e * m["present"], bound
    size = T * m["D"] * 2.0
    count = m["ar"] * m["L"] * m["present"]           # n_ar L all-reduces (2 L; 1 L for a shared one)
    comm = count * _allreduce(size, n, d)
    comm_e = count * 2 * (n - 1) * size * 8 * d["link_e"]
    return t + comm, e + comm_e + d["idle"] * n * comm, bound


def _allreduce(S, n, d):
    """One all-reduce of S bytes over n devices: a ring, or on a full-mesh domain of G GPUs vLLM's custom kernels
    (csrc/custom_all_reduce.cuh): one-shot lat + S (G - 1) / B for n = 2 or S under 512 KiB (n <= 4) / 256 KiB,
    two-shot 2 lat + 2 S (G - 1) / (n B) below 8 MiB, for an even n <= min(8, G); the ring otherwise, which on
    the mesh owns min(n, G) - 1 of each GPU's G - 1 links."""
    peer = d["link_bw"] / np.maximum(d["domain"] - 1, 1)
    share = np.maximum((np.minimum(n, d["domain"]) - 1) / np.maximum(d["domain"] - 1, 1), 1 / 64)
    ring_bw = d["link_bw"] * np.where(d["mesh"] > 0, share, 1.0)
    ring = 2 * (n - 1) / n * S / ring_bw + 2 * (n - 1) * d["link_lat"]
    one = (n <= 2) | (S < np.where(n <= 4, 512 * 1024, 256 * 1024))
    custom = np.where(one, d["link_lat"] + S / peer, 2 * d["link_lat"] + 2 * S / (n * peer))
    served = (d["mesh"] > 0) & (S < 8 * 1024 * 1024) & (n <= np.minimum(8, d["domain"])) & (n % 2 == 0)
    return np.where(n > 1, np.where(served, custom, ring), 0.0)


def _tables(axes):
    """Per-axis value tables, built once per grid (host work both engines do once)."""
    devs = [get_device(d) for d in axes["device"]]
    tgts = [get_model(m) for m in axes["model"]]
    drfs = [[get_draft(d, t) for d in axes["draft"]] for t in tgts]
    dev = {k: np.array([getattr(d, a) for d in devs], np.float64) for k, a in (
        ("peak", "peak_flops_per_s"), ("bw", "hbm_bytes_per_s"), ("tdp", "tdp_w"), ("idle", "idle_w"),
        ("ef", "energy_per_flop_j"), ("eb", "energy_per_hbm_byte_j"), ("mfu", "flops_efficiency"),
        ("mbu", "bandwidth_efficiency"), ("overhead", "pass_overhead_s"), ("link_bw", "link_bytes_per_s"),
        ("link_lat", "link_latency_s"), ("link_e", "link_energy_per_bit_j"), ("mesh", "full_mesh"),
        ("domain", "scaleup_domain_gpus"))}
    speed = np.array([[d.speedup(f) for f in axes["compute_format"]] for d in devs], np.float64)
    tgt = {"pmm": [m.matmul_params for m in tgts], "L": [m.n_layers for m in tgts], "q": [m.q_dim for m in tgts],
           "D": [m.d_model for m in tgts], "kv": [m.kv_values_per_token for m in tgts],
           "ar": [m.allreduces_per_layer for m in tgts]}
    get = lambda dr, a: getattr(dr.model, a) if dr.model else 0     # noqa: E731
    drf = {"pmm": [[get(d, "matmul_params") for d in row] for row in drfs],
           "L": [[get(d, "n_layers") for d in row] for row in drfs], "q": [[get(d, "q_dim") for d in row] for row in drfs],
           "D": [[get(d, "d_model") for d in row] for row in drfs],
           "kv": [[d.model.kv_values_per_token if d.model else 0 for d in row] for row in drfs],
           "ar": [[get(d, "allreduces_per_layer") for d in row] for row in drfs],
           "present": [[float(d.present) for d in row] for row in drfs]}
    return dict(dev=dev, speed=speed, tgt={k: np.array(v, np.float64) for k, v in tgt.items()},
                drf={k: np.array(v, np.float64) for k, v in drf.items()},
                wb=np.array([get_format(f).bytes_per_value for f in axes["weight_format"]]),
                kb=np.array([get_format(f).bytes_per_value for f in axes["kv_format"]]),
                tp=np.array(axes["tp"], np.float64), batch=np.array(axes["batch"], np.float64),
                context=np.array(axes["context"], np.float64))


def _params(axes, start, count, tables=None):
    """Per-outer-point parameter vectors for outer points start .. start+count-1 (vectorised gathers)."""
    t = tables or _tables(axes)
    radices = [len(axes[a]) for a in OUTER]
    i = np.unravel_index(np.arange(start, start + count), radices)
    dv, md, dr, tp, wf, kf, cf, b, s = i
    out = {k: v[dv] for k, v in t["dev"].items()}
    out["k"] = t["speed"][dv, cf]
    out.update({f"t_{k}": v[md] for k, v in t["tgt"].items()})
    out.update({f"d_{k}": v[md, dr] for k, v in t["drf"].items()})
    out.update(tp=t["tp"][tp], wb=t["wb"][wf], kb=t["kb"][kf], batch=t["batch"][b], context=t["context"][s])
    return out


def n_outer(axes):
    return int(np.prod([len(axes[a]) for a in OUTER]))


def evaluate_numpy(axes, start=0, count=None, dtype=np.float32, tables=None):
    """Outputs for outer points start..start+count-1, each in its natural shape (like the engine's)."""
    count = n_outer(axes) - start if count is None else count
    P = {k: v.astype(dtype) for k, v in _params(axes, start, count, tables).items()}
    col = lambda v: v[:, None]                       # noqa: E731  [k] -> [k, 1] for broadcasting over gamma
    d = {k: col(P[k]) for k in ("peak", "bw", "tdp", "idle", "ef", "eb", "mfu", "mbu", "overhead",
                                 "link_bw", "link_lat", "link_e", "mesh", "domain")}
    tm = dict(pmm=col(P["t_pmm"]), L=col(P["t_L"]), q=col(P["t_q"]), D=col(P["t_D"]), kv=col(P["t_kv"]),
              ar=col(P["t_ar"]), present=np.ones_like(col(P["t_pmm"])))
    dm = dict(pmm=col(P["d_pmm"]), L=col(P["d_L"]), q=col(P["d_q"]), D=col(P["d_D"]), kv=col(P["d_kv"]),
              ar=col(P["d_ar"]), present=col(P["d_present"]))
    n, wb, kb, k = col(P["tp"]), col(P["wb"]), col(P["kb"]), col(P["k"])
    b, s = col(P["batch"]), col(P["context"])
    ctx = b * s
    gammas = np.asarray(axes["gamma"], dtype)[None, :]
    alphas = np.asarray(axes["alpha"], dtype)
    gmax = int(max(axes["gamma"]))
    plain_t, plain_e, plain_b = _pass(b, 2 * (ctx + b), ctx + b, tm, d, n, wb, kb, k, True)
    j = np.arange(max(gmax, 1), dtype=dtype)[None, :]
    dt, de, _ = _pass(b + 0 * j, 2 * (ctx + j * b + b), ctx + j * b + b, dm, d, n, wb, kb, k, False)
    cum_t = np.concatenate([np.zeros_like(dt[:, :1]), np.cumsum(dt, axis=1)], axis=1)
    cum_e = np.concatenate([np.zeros_like(de[:, :1]), np.cumsum(de, axis=1)], axis=1)
    c = gammas + 1
    ver_t, ver_e, ver_b = _pass(b * c, c * (2 * ctx + b * (c + 1)), ctx + b * c, tm, d, n, wb, kb, k, True)
    gi = np.asarray(axes["gamma"], dtype=np.int64)
    present = dm["present"] > 0
    t_draft = cum_t[:, gi] * dm["present"]                                   # [k, n_gamma]
    e_draft = cum_e[:, gi] * dm["present"]
    a2 = alphas[None, :]
    one_minus = 1 - a2
    safe = np.where(one_minus == 0, 0.5, one_minus)
    with np.errstate(divide="ignore"):
        e_table = np.where(one_minus == 0, gammas.T + 1, -np.expm1((gammas.T + 1) * np.log1p(-safe)) / safe)
    tokens = np.where(present[:, :, None], e_table[None], 1.0)               # [k, n_gamma, n_alpha]
    t_ver = np.where(present, ver_t, plain_t)
    e_pass = np.where(present, ver_e, plain_e) + e_draft
    s_plain = plain_t / b
    b3 = b[:, :, None]
    s_spec = (t_ver + t_draft)[:, :, None] / (b3 * tokens)
    # Natural shapes, like the engine's: [k] per outer point, [k, n_gamma], [k, n_gamma, n_alpha] per point.
    return {
        "t_plain_pass_s": plain_t[:, 0], "s_per_token_plain": s_plain[:, 0], "plain_bound": plain_b[:, 0],
        "energy_per_token_plain_j": (plain_e / b)[:, 0],
        "t_draft_s": t_draft, "t_verify_pass_s": t_ver, "verify_bound": np.where(present, ver_b, plain_b),
        "tokens_per_pass": tokens, "s_per_token_spec": s_spec, "speedup": s_plain[:, :, None] / s_spec,
        "energy_per_token_spec_j": e_pass[:, :, None] / (b3 * tokens),
    }
