"""The throughput bound under the SLOs and the capacity search it starts and caps (rule "bracket").

The reference figures are the reference simulator's published H100 baseline capacities
(benchmarks/data/reference-baseline-h100.csv, from github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim).
"""

import dataclasses
import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.costmodel.passes import Work, chunk_work
from sweepkit.costmodel.steps import step_cost
from sweepkit.serving.bound import (BATCHES, CEILING_MARGIN, START_SHARE, bracket_sessions, search_bracket,
                                    throughput_bound)
from sweepkit.serving.capacity import Bracket, opening, search
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config, policy
from sweepkit.serving.levers import load_levers
from sweepkit.serving.workloads import load_workloads

# reference-baseline-h100.csv: the reference's H100 baseline capacities (sessions or requests per second)
REFERENCE_H100 = {"chat": 3.875, "coding-agent": 0.09961, "long-context-rag": 1.225, "realtime-voice": 0.4395}


@pytest.fixture(scope="module")
def setting():
    return load_workloads(), load_cluster(), load_levers()


@pytest.mark.parametrize("name", sorted(REFERENCE_H100))
def test_bound_is_above_the_references_capacity(setting, name):
    """The bound leaves queueing out, so it lies above the capacity under the SLOs (and within 10x of it)."""
    wls, cl, lvs = setting
    w = wls[name]
    b = throughput_bound(w, cl, Config("H100", lvs["baseline"]), bracket_sessions(w))
    assert REFERENCE_H100[name] < b < 10 * REFERENCE_H100[name]


def _prefill_decode_s(cl, cfg, w, ses, budget_tokens):
    """(p, d): one mean prompt's share of a prefill step holding floor(budget / P) prompts, and a mean
    request's O decode steps' share at 256 rows, both priced by step_cost directly (float64)."""
    with jax.enable_x64(True):
        inst = policy(cl, cfg, None, w.name).inst
        P, O = float(np.mean(ses.prompt)), float(np.mean(ses.output))
        none = Work(*(np.zeros(()),) * 3)
        t_dec = float(step_cost(inst, 256 * (P + O / 2), 256.0, none, 0)[0])
        n = math.floor(budget_tokens / P)
        c = chunk_work(0.0, P)
        t_pre = float(step_cost(inst, 0.0, 0.0, Work(c.tokens * n, c.attn_pairs * n, c.kv_tokens * n), 0)[0])
    return t_pre / n, O * t_dec / 256


def test_bound_is_the_closed_form_of_the_step_costs(setting):
    """Colocated chat on H100: I / (p + d) / turns with p and d priced by step_cost directly (the TPOT SLO
    loosened so that b* is the batch cap, every row of it: 256)."""
    wls, cl, lvs = setting
    w = dataclasses.replace(wls["chat"], tpot_slo_s=10.0)
    cfg, ses = Config("H100", lvs["baseline"]), bracket_sessions(w)
    p, d = _prefill_decode_s(cl, cfg, w, ses, cl.prefill_token_budget)
    want = 2 / (p + d) / w.turns
    assert 256 in BATCHES
    assert throughput_bound(w, cl, cfg, ses) == pytest.approx(want, rel=1e-9)


@settings(max_examples=12, deadline=None)
@given(tpot=st.floats(0.005, 0.2), ttft=st.floats(0.05, 5.0), shrink=st.floats(0.3, 1.0))
def test_tighter_slos_never_raise_the_bound(setting, tpot, ttft, shrink):
    wls, cl, lvs = setting
    w = dataclasses.replace(wls["chat"], tpot_slo_s=tpot, ttft_slo_s=ttft)
    tight = dataclasses.replace(w, tpot_slo_s=tpot * shrink, ttft_slo_s=ttft * shrink)
    cfg, ses = Config("H100", lvs["baseline"]), bracket_sessions(w)
    assert throughput_bound(w, cl, cfg, ses) >= throughput_bound(tight, cl, cfg, ses) >= 0.0


def test_a_ttft_slo_no_prompt_can_meet_is_capacity_zero_without_a_simulation(setting):
    wls, cl, lvs = setting
    w = dataclasses.replace(wls["realtime-voice"], ttft_slo_s=1e-4)
    cfg = Config("H100", lvs["baseline"])
    starts, ceilings = search_bracket(w, cl, [cfg], bracket_sessions(w))
    assert starts.tolist() == [0.0] and ceilings.tolist() == [0.0]
    sims = []
    for rule in ("bracket", "bisect"):
        caps, best, rows = search(w, cl, [cfg], [3.0], [100.0], start=0.39, rule=rule, ceiling=ceilings,
                                  progress=sims.append)
        assert caps == [0.0] and best == [None] and rows == []
    assert sum(sims) == 0


def test_bracket_starts_anchored_on_the_reference_baseline(setting):
    """With an anchor a configuration starts at the anchor's load x its bound / the anchor's bound (the
    anchor itself at its load); without one at START_SHARE x its bound; the ceiling is CEILING_MARGIN x it."""
    wls, cl, lvs = setting
    w = wls["chat"]
    base, fp8 = Config("H100", lvs["baseline"]), Config("H100", lvs["w8a8-fp8"])
    ses = bracket_sessions(w)
    b = np.array([throughput_bound(w, cl, c, ses) for c in (base, fp8)])
    s, c = search_bracket(w, cl, [base, fp8], ses, (base, 3.875))
    np.testing.assert_allclose(s, 3.875 * b / b[0], rtol=1e-12)
    np.testing.assert_allclose(c, CEILING_MARGIN * b, rtol=1e-12)
    s, _ = search_bracket(w, cl, [base, fp8], ses)
    np.testing.assert_allclose(s, START_SHARE * b, rtol=1e-12)


def test_opening_probes_stay_under_a_ceiling():
    assert opening(2.0, Bracket(), 3).tolist() == [2.0, 4.0, 8.0]
    assert np.allclose(opening(2.0, Bracket(hi=5.0), 3), [2.0, np.sqrt(2.0 * 4.75), 4.75])   # up to the ceiling
    assert opening(9.0, Bracket(hi=5.0), 2).tolist() == [4.75, 4.75]


def test_bisection_under_a_right_ceiling_keeps_the_references_capacity_in_fewer_simulations(setting):
    """The voice H100 baseline by bisection from twice the reference load (the reference's 0.439453125 in 7
    runs: tests/test_serving_capacity.py) with a ceiling just above its capacity: the probes at 0.78125 and
    0.5859375 fail unsimulated, the capacity and every simulated probe are the same."""
    wls, cl, lvs = setting
    w, cfg = wls["realtime-voice"], Config("H100", lvs["baseline"])
    sims = []
    caps, _, rows = search(w, cl, [cfg], [3.0], [100.0], start=2 * 0.1953125, rule="bisect",
                           ceiling=np.array([0.5]), progress=sims.append)
    assert caps[0] == 0.439453125 and sum(sims) == len(rows) == 5
    assert [r for _, r, _, _ in rows][:2] == [0.390625, 0.48828125] and all(r < 0.5 for _, r, _, _ in rows)


def test_bracket_search_keeps_the_guarantee_in_fewer_simulations(setting):
    """From its bound-anchored start, under its ceiling: a passing capacity within the tolerance of a failing
    probe (or of the ceiling), in fewer simulations than bisection's 7."""
    wls, cl, lvs = setting
    w, cfg = wls["realtime-voice"], Config("H100", lvs["baseline"])
    start, ceiling = search_bracket(w, cl, [cfg], bracket_sessions(w), (cfg, 2 * 0.1953125))
    caps, best, rows = search(w, cl, [cfg], [3.0], [100.0], start=start, rule="bracket", ceiling=ceiling)
    fails = [r for _, r, _, m in rows if m["attainment"] < 0.9 or m["stopped_early"]]
    hi = min([r for r in fails if r > caps[0]] + [float(ceiling[0])])
    assert best[0]["attainment"] >= 0.9 and not best[0]["stopped_early"]
    assert (hi - caps[0]) / hi <= 0.05 and len(rows) < 7
    assert 0.439453125 * 0.95 <= caps[0] <= 0.439453125 / 0.95


def test_chunked_batching_overlaps_prefill_and_decode_in_the_bound(setting):
    """Under chunked batching a mixed step streams the weights once for its prompt chunks and decode rows, so
    the bound is I / max(p, d) (not I / (p + d)): p and d priced by step_cost directly, as above."""
    wls, cl, lvs = setting
    w = dataclasses.replace(wls["chat"], tpot_slo_s=10.0)
    lever = lvs["chunked-2048"]
    cfg, ses = Config("H100", lever), bracket_sessions(w)
    p, d = _prefill_decode_s(cl, cfg, w, ses, lever.token_budget)
    assert throughput_bound(w, cl, cfg, ses) == pytest.approx(2 / max(p, d) / w.turns, rel=1e-9)
    prio = Config("H100", dataclasses.replace(lever, batching="prefill-priority"))
    assert throughput_bound(w, cl, cfg, ses) > throughput_bound(w, cl, prio, ses)


def test_a_ceiling_below_the_capacity_is_dropped_and_the_search_goes_on(setting):
    """A ceiling under the capacity (the bound wrong there) must not decide it: once a passing load comes within
    the tolerance of the unsimulated ceiling, the search drops it and ends on a simulated failing probe."""
    wls, cl, lvs = setting
    w, cfg = wls["realtime-voice"], Config("H100", lvs["baseline"])
    for rule in ("bracket", "bisect"):
        caps, best, rows = search(w, cl, [cfg], [3.0], [100.0], start=0.25, rule=rule, ceiling=np.array([0.3]))
        fails = [r for _, r, _, m in rows if m["attainment"] < 0.9 or m["stopped_early"]]
        hi = min(r for r in fails if r > caps[0])
        assert caps[0] > 0.3 / 0.95 and best[0]["attainment"] >= 0.9 and (hi - caps[0]) / hi <= 0.05
        assert hi in [r for _, r, _, _ in rows]                         # the failing end was simulated


def test_only_a_bracket_closed_by_its_unsimulated_ceiling_is_reopened():
    from sweepkit.serving.capacity import lifted, unverified
    assert unverified(Bracket(4.0, 4.2), 4.2, True)
    assert not unverified(Bracket(4.0, 4.2), 5.0, True)          # its failing end was simulated
    assert not unverified(Bracket(0.0, 4.2), 4.2, True)          # nothing passed: the floor decides
    assert not unverified(Bracket(4.0, 4.2), 4.2, False)         # still open
    assert not unverified(Bracket(4.0, 4.2), math.inf, True)     # no ceiling
    b = lifted(Bracket(4.0, 4.2, {"attainment": 0.95}, 0.95, 0.0, "hi", 0.5, 1.0))
    assert (b.lo, b.hi, b.best, b.attain_lo, b.moved, b.weight_lo) == (4.0, math.inf, {"attainment": 0.95}, 0.95, "", 1.0)
