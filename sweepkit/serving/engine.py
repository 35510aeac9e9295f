"""Build simulator inputs for (device, lever) configurations x loads, run them as one compiled program.

Routing: session s goes to instance s mod I (round robin over sessions, in start order; a session's turns stay
on its instance, where its history's KV would live). Each instance is then an independent simulation, so the
cluster is a ``vmap`` over instances, nested in ``vmap``-s over loads and over (device, lever) configurations.

Common random numbers: the sessions (lengths, think times, unit-rate start times) are drawn once per workload
(:mod:`sweepkit.serving.requests`); a load rescales the start times, and the acceptance draws depend only on
(request, pass), so differences between loads and levers are theirs, not noise.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.catalogue import get_device, get_draft, get_format, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.memory import kv_capacity_tokens
from sweepkit.serving.cluster import Cluster
from sweepkit.serving.levers import Lever
from sweepkit.serving.requests import Sessions, sample_sessions, verify_passes
from sweepkit.serving.simulator import MISS_SHARE, simulate_batched
from sweepkit.serving.state import Hardware, Load, Requests, SimShape
from sweepkit.serving.workloads import Workload

LOG = logging.getLogger(__name__)

OFFLINE_RATE = 1e6
"""Arrival rate standing for 'every request at once' (seed-system.md sec. 1: offline start 1e6)."""
COARSE_MAX_SESSIONS = 1024
"""Sessions per run in the coarse capacity round (enough to overload the cluster at high loads)."""
WARMUP_FRACTION = 0.1
"""Share of requests (earliest arrivals) dropped from the measured window (seed SimConfig warmup_frac)."""
WORKLOAD_SEED = 1
"""Workload seed (seed-system.md sec. 1: 'Workload seed 1 everywhere')."""
SPEC_SEED = 0
"""Speculation seed of every lever (seed-system.md sec. 1: 'both spec seed 0')."""


@dataclasses.dataclass(frozen=True)
class Config:
    """One (device, lever) point of the cluster."""

    device: str
    lever: Lever


def hardware(cluster: Cluster, cfg: Config) -> Hardware:
    """The :class:`Hardware` pytree of one configuration (float64 scalars)."""
    dev = get_device(cfg.device)
    target = get_model(cluster.model)
    draft = get_draft(cfg.lever.draft, target)
    f64 = jnp.float64
    darr = dataclasses.replace(device_arrays(dev, f64), pass_overhead_s=jnp.asarray(cluster.step_overhead_s, f64))
    tarr, drarr = model_arrays(target, f64), model_arrays(draft, f64)
    wb = jnp.asarray(get_format(cluster.weight_format).bytes_per_value, f64)
    kb = jnp.asarray(get_format(cluster.kv_format).bytes_per_value, f64)
    tp = jnp.asarray(cluster.tp, f64)
    return Hardware(device=darr, target=tarr, draft=drarr, tp=tp, weight_bytes=wb, kv_bytes=kb,
                    compute_speedup=jnp.asarray(dev.speedup(cluster.compute_format), f64),
                    kv_capacity_tokens=kv_capacity_tokens(darr, tp, tarr, drarr, wb, kb),
                    gamma=jnp.asarray(cfg.lever.gamma, f64),
                    prefill_token_budget=jnp.asarray(cluster.prefill_token_budget, f64),
                    batch_cap=jnp.asarray(cluster.batch_cap, f64))


@lru_cache(maxsize=64)
def _sessions(w: Workload, n: int) -> Sessions:
    return sample_sessions(w, n, WORKLOAD_SEED)


def layout(w: Workload, n_sessions: int, instances: int):
    """Per-instance request layout: local id k x S0 + local session; returns arrays [I, N] and S0."""
    s0 = -(-n_sessions // instances)
    T = w.turns
    ses = _sessions(w, s0 * instances)
    s = np.arange(s0 * instances).reshape(s0, instances).T  # [I, S0] global session ids
    k = np.arange(T)
    prompt = ses.prompt[s].transpose(0, 2, 1).reshape(instances, T * s0)
    output = ses.output[s].transpose(0, 2, 1).reshape(instances, T * s0)
    think = ses.think_s[s].transpose(0, 2, 1).reshape(instances, T * s0)
    think = np.where(np.repeat(k, s0)[None, :] == 0, 0.0, think)
    local = np.arange(T * s0)
    nxt = np.where(local + s0 < T * s0, local + s0, -1)
    nxt = np.broadcast_to(nxt, (instances, T * s0))
    gid = (s[:, None, :] * T + k[None, :, None]).reshape(instances, T * s0)
    return dict(prompt=prompt, output=output, think=think, next_id=nxt, gid=gid, session=s, s0=s0, ses=ses)


def shape_for(w: Workload, cluster: Cluster, gamma_max: int, sessions: int) -> SimShape:
    """Static sizes for a workload (admits per prefill step bounded by the budget over the shortest prompt)."""
    shortest = (w.system_prompt_tokens if w.system_prompts > 0 else 0) + 1
    admits = int(min(64, cluster.batch_cap, cluster.prefill_token_budget // shortest + 1))
    return SimShape(slots=cluster.batch_cap, sessions=sessions, admits=admits, steps=64, gamma_max=gamma_max,
                    multi_turn=w.turns > 1)


def load_arrays(w: Workload, lay: dict, rate: float, instances: int, early_stop: bool,
                pad: int = SimShape().scan, n_sessions: int | None = None) -> dict[str, np.ndarray]:
    """Per-instance :class:`Load` fields at ``rate`` (sessions/s or requests/s)."""
    rate_eff = OFFLINE_RATE if w.offline else rate
    if rate <= 0:  # an idle lane (a configuration whose search has converged): no arrivals, done at once
        rate_eff, n_sessions = 1.0, 0
    n_ses = w.sessions_at(rate) if n_sessions is None else n_sessions
    s = lay["session"]
    start = lay["ses"].start_unit[s] / rate_eff
    arr0 = np.where(s < n_ses, start, np.inf)
    arr0 = np.concatenate([arr0, np.full((instances, pad), np.inf)], axis=1)
    starts = lay["ses"].start_unit[:max(n_ses, 1)] / rate_eff
    nominal = (starts[:, None] + np.arange(w.turns)[None, :] * w.think_mean_s).ravel()
    n_total = n_ses * w.turns
    n_drop = int(WARMUP_FRACTION * n_total)
    itl_from = np.sort(nominal)[n_drop]
    last_start = starts[-1]
    limit = n_drop + MISS_SHARE * (n_total - n_drop) if early_stop else 1e18
    ones = np.ones(instances)
    return dict(arrival0_s=arr0, itl_from_s=itl_from * ones, itl_to_s=last_start * ones,
                eligible_to_s=last_start * ones, ttft_slo_s=w.ttft_slo_s * ones, tpot_slo_s=w.tpot_slo_s * ones,
                miss_limit=limit * ones, drop_n=(n_drop if early_stop else 1e18) * ones,
                first_turns=(s < n_ses).sum(axis=1).astype(np.float64))


def _nest(f, with_state=False):
    """vmap over instances, then loads, then configurations (the state has all three axes)."""
    st = (0,) if with_state else ()
    inst = jax.vmap(f, in_axes=(None, 0, 0) + st)
    rates = jax.vmap(inst, in_axes=(None, None, 0) + st)
    return jax.vmap(rates, in_axes=(0, Requests(None, None, 0, None, None), 0) + st)


@partial(jax.jit, static_argnames="shape")
def _run(hw: Hardware, req: Requests, load: Load, shape: SimShape):
    return simulate_batched(_nest, hw, req, load, shape)


def run_configs(w: Workload, cluster: Cluster, configs: list[Config], rates: np.ndarray, early_stop=True,
                cap_sessions: bool = False):
    """Simulate every configuration at its row of ``rates`` ([C, R]) in one compiled call.

    Args:
      early_stop: bool or [C, R] bools: stop a lane once it has surely failed its SLOs.
      cap_sessions: at most COARSE_MAX_SESSIONS sessions per run (coarse capacity brackets).

    Returns:
      (final states as numpy arrays with leading axes [C, R, I], the layout dict with ``passes``, ``rates``
      and per-lane ``loads``).
    """
    rates = np.asarray(rates, dtype=np.float64).reshape(len(configs), -1)
    stop = np.broadcast_to(np.asarray(early_stop, bool), rates.shape)
    if cap_sessions:
        w = dataclasses.replace(w, min_sessions=w.min_sessions, offline=w.offline)
    I = cluster.instances
    sessions = (lambda r: min(w.sessions_at(r), COARSE_MAX_SESSIONS)) if cap_sessions else w.sessions_at
    n_ses = max(sessions(float(r)) for r in rates.ravel() if r > 0) if np.any(rates > 0) else w.min_sessions
    n_ses = 64 * 2 ** math.ceil(math.log2(max(n_ses, 64) / 64.0))  # power-of-2 buckets: fewer compiled shapes
    lay = layout(w, n_ses, I)
    hws = [hardware(cluster, c) for c in configs]
    hw = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *hws)
    passes = np.stack([
        np.stack([verify_passes(lay["gid"][i], lay["output"][i], c.lever.alpha, c.lever.gamma, SPEC_SEED)
                  for i in range(I)]) for c in configs])
    req = Requests(prompt_tokens=jnp.asarray(lay["prompt"], jnp.int32),
                   output_tokens=jnp.asarray(lay["output"], jnp.int32),
                   passes=jnp.asarray(passes, jnp.int32), next_id=jnp.asarray(lay["next_id"], jnp.int32),
                   think_s=jnp.asarray(lay["think"], jnp.float64))
    loads = [[load_arrays(w, lay, float(r), I, bool(stop[c, k]), n_sessions=sessions(float(r)) if r > 0 else 0)
              for k, r in enumerate(row)] for c, row in enumerate(rates)]
    load = Load(**{k: jnp.asarray(np.array([[l[k] for l in row] for row in loads]), jnp.float64)
                   for k in loads[0][0]})
    gamma_max = max((c.lever.gamma for c in configs if c.lever.speculative), default=0)
    t0 = time.perf_counter()
    state = _run(hw, req, load, shape_for(w, cluster, gamma_max, lay["s0"]))
    out = jax.tree_util.tree_map(np.asarray, state)
    LOG.debug("%s: %d configs x %d loads x %d instances, %d requests/instance, %d iterations max, %.2f s",
              w.name, rates.shape[0], rates.shape[1], I, req.prompt_tokens.shape[1], int(out.iters.max()),
              time.perf_counter() - t0)
    return out, dict(lay, passes=passes, rates=rates, loads=loads)
