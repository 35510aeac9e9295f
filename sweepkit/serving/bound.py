"""A configuration's throughput bound under the SLOs, from the cost model the engine prices its steps with.

The capacity search (:mod:`sweepkit.serving.capacity`, rule ``"bracket"``) starts near this bound instead of
at twice the reference load. Per instance, with the workload's mean prompt P (the new tokens only with the
prefix cache), mean output O and the acceptance survivals s_j of the lever's draft:

    tokens a decode step emits per row      tau = 1 + sum_j s_j
    decode rows the TPOT SLO allows         b* = max { b <= min(batch cap, KV tokens / (P + O)) :
                                                       t_step(b rows, b (P + O / 2) cached) / tau <= TPOT SLO }
    decode seconds per request              d = O t_step(b*) / (b* tau)
    prefill seconds per request             p = t_step(n prompts of P) / n,  n = max(1, floor(budget / P))

and the bound in requests per second is I / (p + d) for I colocated instances, I / max(p, d) under chunked
batching (a mixed step streams the weights once for its prompt chunks and its decode rows, so prefill and
decode overlap at best: a mixed step costs at least what either part alone costs), min(I_pre / p, I_dec / d)
for disaggregated pools, 0 where one prompt alone (the prompt at the :data:`ZERO_QUANTILE`) exceeds the TTFT SLO; per
session a multi-turn workload's bound is that over its turns. ``t_step`` is
:func:`sweepkit.costmodel.steps.step_cost` of the configuration's replica, as the engine prices a step.

It ignores queueing, the prefill steps' stalls of decoding rows, preemption and the spread of lengths, so
it is an estimate from above of the throughput, not of the SLO capacity; the search only starts from it
and finds the capacity by simulation (the guarantee of its final bracket does not depend on the estimate).
"""

from __future__ import annotations

import math
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from sweepkit.costmodel.passes import Work, chunk_work
from sweepkit.costmodel.steps import step_cost
from sweepkit.serving.cluster import Cluster
from sweepkit.serving.config import Config, policy, resolve
from sweepkit.serving.lanes import WORKLOAD_SEED
from sweepkit.serving.requests import Sessions, sample_sessions
from sweepkit.serving.workloads import Workload

BATCHES = np.unique(np.round(np.geomspace(1, 4096, 97))).astype(np.float64)
"""Decode batch sizes tried for b* (geometric, 1..4,096 rows; capped at the cluster's batch cap)."""


ZERO_QUANTILE = 0.8
"""Where the prompt at this quantile alone (its prefill step, nothing queued) misses the TTFT SLO, a fifth of
the requests miss it at any load, so no load reaches the 90% attainment: the bound is 0."""
CEILING_MARGIN = 1.25
"""A load of CEILING_MARGIN x the bound is taken as failing (the search's ceiling). Against the reference
simulator's capacities on its H100 matrix (84 online cells with a capacity) the bound is above every one
(capacity / bound 0.02-1.009, median 0.56)."""
START_SHARE = 0.5
"""Share of the bound a search starts at where no reference configuration anchors it (the median capacity /
bound over those 84 cells is 0.56)."""
GAMMA_MAX = 8
"""Draft passes priced (masked to the lever's gamma), one bound for every lever so that they share a program."""


@partial(jax.jit, static_argnames="gamma_max")
def _steps_s(inst, pre_inst, ctx_per_row, rows, prompt, n, gamma_max: int):
    """t_step of decode steps (``rows`` rows of ``ctx_per_row`` cached tokens each; vectors) on ``inst``, and of
    prefill steps of ``n`` whole prompts of ``prompt`` tokens each (vectors) on ``pre_inst``."""
    none = Work(jnp.zeros(()), jnp.zeros(()), jnp.zeros(()))
    zero = jnp.zeros(())

    def prefill(p, k):
        w = chunk_work(zero, p)
        return step_cost(pre_inst, zero, zero, jax.tree_util.tree_map(lambda x: x * k, w), gamma_max)[0]
    return (jax.vmap(lambda c, b: step_cost(inst, c * b, b, none, gamma_max)[0])(ctx_per_row, rows),
            jax.vmap(prefill)(prompt, n))


def throughput_bound(w: Workload, cluster: Cluster, cfg: Config, ses: Sessions) -> float:
    """The throughput bound of ``cfg`` under ``w``'s SLOs, in the workload's load unit (sessions or requests
    per second; see the module docstring for the maths).

    Args:
      w: an online workload (its TTFT and TPOT SLOs, seconds).  cluster: the cluster.  cfg: (device, lever).
      ses: the workload's sampled sessions (their mean prompt, new input and output tokens per turn).

    Returns:
      Load per second (>= 0; 0 where one prompt alone misses the TTFT SLO).

    Example:
      >>> from sweepkit.serving.levers import load_levers
      >>> from sweepkit.serving.cluster import load_cluster
      >>> from sweepkit.serving.requests import sample_sessions
      >>> from sweepkit.serving.workloads import get_workload
      >>> w = get_workload("chat")
      >>> b = throughput_bound(w, load_cluster(), Config("H100", load_levers()["baseline"]), sample_sessions(w, 256, 1))
      >>> bool(3.0 < b < 30.0)
      True

    References:
      Yu et al., "Orca", OSDI 2022 (iteration-level batching: a decode step serves every running row);
      Zhong et al., "DistServe", OSDI 2024, arXiv:2401.09670 (goodput under TTFT and TPOT SLOs; the prefill
      and decode pools' throughputs bound a disaggregated cluster's).
    """
    with jax.enable_x64(True):
        return _bound(w, cluster, cfg, ses)


def _bound(w: Workload, cluster: Cluster, cfg: Config, ses: Sessions) -> float:
    res = resolve(cluster, cfg.lever)
    pol = policy(cluster, cfg, res, w.name)
    g = int(cfg.lever.gamma)
    prompt, out = float(np.mean(ses.prompt)), float(np.mean(ses.output))
    new = float(np.mean(ses.new_input)) if res.prefix_caching else prompt
    tau = 1.0 + float(np.sum(np.asarray(pol.accept_survival)[:g]))
    # decode pool: the most rows a step may hold under the TPOT SLO
    block = float(pol.block_tokens)
    kv_rows = float(pol.kv_units) * block / max(prompt + out + float(pol.state_units) * block, 1.0)
    cap = min(float(cluster.batch_cap), max(kv_rows, 1.0))
    b = BATCHES
    ctx = np.full_like(b, prompt + out / 2.0)
    pre_inst = pol.prefill_inst if res.mode == "disagg" else pol.inst
    n = max(1.0, math.floor(float(res.token_budget) / max(new, 1.0)))
    lengths = ses.new_input if res.prefix_caching else ses.prompt
    alone = float(np.quantile(lengths, ZERO_QUANTILE))
    t_dec, t_pre = _steps_s(pol.inst, pre_inst, jnp.asarray(ctx), jnp.asarray(b), jnp.asarray([alone, new]),
                            jnp.asarray([1.0, n]), gamma_max=max(GAMMA_MAX, g))
    t_dec, t_pre = np.asarray(t_dec), np.asarray(t_pre)
    ok = (t_dec / tau <= w.tpot_slo_s) & (b <= cap)
    k = int(np.nonzero(ok)[0].max()) if ok.any() else 0
    d = out * t_dec[k] / (b[k] * tau)
    if t_pre[0] > w.ttft_slo_s:                  # the ZERO_QUANTILE prompt alone misses the TTFT SLO
        return 0.0
    p = t_pre[1] / n
    if res.mode == "disagg":
        per_s = min(res.prefill_instances / p, res.instances / d)
    elif res.batching == "chunked":              # prompt chunks ride in the decode rows' steps: at best overlapped
        per_s = res.instances / max(p, d)
    else:
        per_s = res.instances / (p + d)
    return per_s / max(w.turns, 1)


def search_bracket(w: Workload, cluster: Cluster, configs: list[Config], ses: Sessions,
                   anchor: tuple[Config, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each configuration's first probe and ceiling for the capacity search (rule ``"bracket"``).

    With an ``anchor`` (a configuration and a load near its capacity: the reference device's baseline at
    twice the reference load) a configuration starts at that load times the ratio of the two bounds, so the
    queueing the bound leaves out cancels between them; without one (or where the anchor's bound is 0) at
    :data:`START_SHARE` x its bound. The ceiling is :data:`CEILING_MARGIN` x the bound.

    Args:
      w: an online workload.  cluster: the cluster.  configs: the (device, lever) points.
      ses: the workload's sampled sessions.  anchor: optional (configuration, load per second).

    Returns:
      (starts [C], ceilings [C]), loads per second (a ceiling of 0: capacity 0).

    Example:
      >>> from sweepkit.serving.levers import load_levers
      >>> from sweepkit.serving.cluster import load_cluster
      >>> from sweepkit.serving.requests import sample_sessions
      >>> from sweepkit.serving.workloads import get_workload
      >>> w, base = get_workload("chat"), Config("H100", load_levers()["baseline"])
      >>> s, c = search_bracket(w, load_cluster(), [base], sample_sessions(w, 256, 1), (base, 3.875))
      >>> bool(s.tolist() == [3.875] and c[0] > s[0])
      True
    """
    bounds = np.array([throughput_bound(w, cluster, cfg, ses) for cfg in configs])
    anchored = throughput_bound(w, cluster, anchor[0], ses) if anchor is not None else 0.0
    starts = anchor[1] * bounds / anchored if anchored > 0 else START_SHARE * bounds
    return starts, CEILING_MARGIN * bounds


SESSIONS = 256
"""Sessions whose mean lengths the bound takes (the workload's seed, as every run's)."""


def bracket_sessions(w: Workload) -> Sessions:
    """The sessions :func:`search_bracket` takes a workload's lengths from (:data:`SESSIONS` of them)."""
    return _sample(w, max(SESSIONS, w.min_sessions), WORKLOAD_SEED)


@lru_cache(maxsize=32)
def _sample(w: Workload, n: int, seed: int) -> Sessions:
    return sample_sessions(w, n, seed)
