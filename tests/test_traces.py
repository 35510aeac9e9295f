"""Trace replay: formats read as a stream, bad lines refused, sessions and prefix chains as data, closed forms of
reuse, the synthetic fit, and a real simulation whose prefix hit rate equals the trace's closed form."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings, strategies as st

from sweepkit.cli import main
from sweepkit.errors import InputError
from sweepkit.serving.trace_fit import fit, toml_entry
from sweepkit.serving.trace_lru import lru_reuse
from sweepkit.serving.trace_read import read_rows
from sweepkit.serving.traces import load_replay
from sweepkit.serving.workloads import load_workloads

DATA = Path(__file__).parent / "data" / "traces"
ROOT = Path(__file__).resolve().parents[1]
MOONCAKE = ROOT / "grids" / "traces" / "mooncake_fast25_conversation_trace.jsonl.gz"


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _conversations(draw_sessions: list[list[tuple[int, int]]], gap_ms: int = 4000) -> list[dict]:
    """Mooncake rows of conversations: turn k extends turn k - 1's full blocks with new ones (prefix hashes),
    every session starting from block 0 (a shared system prompt); rows in arrival order."""
    rows, next_id = [], [1]
    for s, turns in enumerate(draw_sessions):
        t, blocks = s * gap_ms, [0]
        for k, (extra, out) in enumerate(turns):
            length = (len(blocks) - 1) * 512 + extra if k else 512 + extra
            need = -(-length // 512)
            while len(blocks) < need:
                blocks.append(next_id[0])
                next_id[0] += 1
            rows.append(dict(timestamp=t, input_length=length, output_length=out, hash_ids=blocks[:need]))
            blocks = blocks[:max(length // 512, 1)]
            t += 2000 + 500 * k
    return sorted(rows, key=lambda r: r["timestamp"])


# --- formats -------------------------------------------------------------------------------------------

def test_mooncake_rows_keep_times_lengths_and_blocks():
    rows = list(read_rows(DATA / "mooncake_tiny.jsonl"))
    assert [r.t_s for r in rows] == [0.0, 0.0, 3.0, 3.0, 6.0, 9.0, 9.0]        # ms -> s
    assert rows[2].input_tokens == 2100 and rows[2].output_tokens == 25 and rows[2].hash_ids == (0, 1, 4, 5, 6)


def test_azure_timestamps_become_seconds_from_the_first_row():
    rows = list(read_rows(DATA / "azure_tiny.csv"))
    # 18:15:50.9951690 - 18:15:46.6805900 = 4.314579 s (7 fractional digits cut to microseconds)
    assert rows[1].t_s == pytest.approx(4.314579, abs=1e-6)
    assert [(r.input_tokens, r.output_tokens) for r in rows] == [(374, 44), (396, 109), (879, 49), (91, 201)]
    rp = load_replay(DATA / "azure_tiny.csv")
    assert rp.sessions == 4 and rp.turns.tolist() == [1] * 4 and rp.reuse.chained_tokens == 0


def test_gzip_is_read_as_the_plain_file(tmp_path):
    plain = (DATA / "mooncake_tiny.jsonl").read_bytes()
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress(plain))
    assert list(read_rows(tmp_path / "t.jsonl.gz")) == list(read_rows(DATA / "mooncake_tiny.jsonl"))


def test_generic_sessions_carry_their_history():
    rp = load_replay(DATA / "generic_sessions.csv")
    assert rp.turns.tolist() == [3, 2, 1]
    # session a: 600 in / 100 out, then 900 (reuses 700), then 1,100 (reuses 900 + 50)
    assert rp.chain[0].tolist() == [0, 700, 950] and rp.segment[0].tolist() == [700, 250, 0]
    assert rp.think_s[0].tolist() == [0.0, 10.0, 20.0] and rp.think_s[1, 2] == np.inf
    assert rp.reuse.chained_tokens == 700 + 950 + 320


def test_mooncake_sessions_and_chains_follow_the_shared_blocks():
    rp = load_replay(DATA / "mooncake_tiny.jsonl")
    # rows 1, 3, 5, 6 extend one chain (6 branches from 3, but 5 is the session's latest turn and shares as
    # much); rows 2 and 7 share [0, 3]; row 4 shares only the first block (the system prompt)
    assert rp.turns.tolist() == [4, 2, 1]
    assert rp.chain[0].tolist() == [512, 1024, 2048, 2048] and rp.segment[0].tolist() == [512, 1024, 0, 0]
    assert rp.system_tokens.tolist() == [0, 512] and rp.system_id.tolist() == [1, 1, 1]
    # closed forms by counting: 14 of 27 blocks repeat; hits 1,024 + 2,048 + 2,048 + 1,024 + two system prompts
    assert (rp.reuse.blocks, rp.reuse.repeated_blocks) == (27, 14)
    assert rp.reuse.chained_tokens == rp.reuse.trace_tokens == 6144 + 1024


def test_shipped_mooncake_trace_reuse_by_counting():
    """The trace's own reuse, counted independently: 36.6% of blocks repeat in arrival order (target figure)."""
    seen, repeated, total = set(), 0, 0
    with gzip.open(MOONCAKE, "rt") as f:
        for line in f:
            for h in json.loads(line)["hash_ids"]:
                repeated += h in seen
                total += 1
                seen.add(h)
    rp = load_replay(MOONCAKE)
    assert (rp.requests, rp.reuse.blocks, rp.reuse.repeated_blocks) == (12_031, total, repeated)
    assert repeated / total == pytest.approx(0.3664, abs=5e-5)
    assert rp.reuse.chained_share <= rp.reuse.trace_share
    assert lru_reuse(MOONCAKE, float("inf")) == (rp.reuse.trace_tokens, rp.reuse.prompt_tokens)


# --- bad input -----------------------------------------------------------------------------------------

BAD = {
    "truncated.jsonl": ('{"timestamp": 0, "input_length": 9, "output_length": 2}\n{"timestamp": 5, "input_le',
                        "line 2: not a JSON object"),
    "length.jsonl": ('{"timestamp": 0, "input_length": 0, "output_length": 2}\n', "line 1: input_length = 0"),
    "missing.jsonl": ('{"timestamp": 0, "output_length": 2, "input_length": 3}\n{"timestamp": 1, "input_length": 3}\n',
                      "line 2: output_length is missing"),
    "backwards.csv": ("t_s,input_tokens,output_tokens\n5,10,2\n4,10,2\n", "line 3: time -1 s comes before"),
    "fields.csv": ("t_s,input_tokens,output_tokens\n0,10,2\n1,10\n", "line 3: 2 fields, expected 3"),
    "hashes.jsonl": ('{"t_s": 0, "input_tokens": 9, "output_tokens": 2, "hash_ids": [1, "x"]}\n',
                     "line 1: hash_ids"),
    "azure.csv": ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,3,4\n", "line 2: TIMESTAMP = 'yesterday'"),
    "empty.csv": ("\n\n", "the trace is empty"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_lines_are_refused_with_file_and_line(tmp_path, name):
    text, message = BAD[name]
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        load_replay(path)
    assert str(path) in str(exc.value) and message in str(exc.value) and "\n" not in str(exc.value)


def test_truncated_gzip_is_refused(tmp_path):
    data = gzip.compress((DATA / "mooncake_tiny.jsonl").read_bytes() * 50)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="gzip stream is truncated or corrupt after line"):
        load_replay(path)


def test_cli_fit_refuses_a_bad_trace_in_one_line_with_status_2(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 9, "output_length": 2}\n{"timestamp": 1}\n')
    res = CliRunner().invoke(main, ["workload", "fit", str(path)])
    assert res.exit_code == 2 and "line 2: input_length is missing" in res.output
    assert "Traceback" not in res.output


def test_workload_file_refuses_bad_replay_fields(tmp_path):
    base = 'source = "s"\nttft_slo_s = 1.0\ntpot_slo_s = 0.1\nreplay = "t.jsonl"\n'
    _write(tmp_path / "t.jsonl", [dict(timestamp=0, input_length=9, output_length=2),
                                  dict(timestamp=0, input_length=9, output_length=2)])
    for extra, message in [('turns = 3\n', "turns"), ('replay_format = "x"\n', "replay_format = 'x'"),
                           ("", "every request at one instant")]:
        (tmp_path / "w.toml").write_text("[workloads.t]\n" + base + extra)
        with pytest.raises(InputError, match=message):
            load_workloads(tmp_path / "w.toml")


# --- properties of the mapping -------------------------------------------------------------------------

turns_st = st.lists(st.tuples(st.integers(1, 1500), st.integers(1, 300)), min_size=1, max_size=5)


@settings(max_examples=40, deadline=None)
@given(sessions=st.lists(turns_st, min_size=1, max_size=8), max_turns=st.integers(1, 6))
@example(sessions=[[(512, 1), (1, 1)]], max_turns=2)        # a 513-token turn after a 1,024-token one
def test_chains_never_credit_more_than_the_trace_holds(tmp_path_factory, sessions, max_turns):
    path = _write(tmp_path_factory.mktemp("h") / "t.jsonl", _conversations(sessions))
    rp = load_replay(path, max_turns=max_turns)
    has = np.arange(rp.prompt.shape[1])[None, :] < rp.turns[:, None]
    sys = rp.system_tokens[rp.system_id]
    # a turn's chain is its system prompt plus its predecessors' segments, never past its prompt (k >= 1)
    chain_from_segments = sys[:, None] + np.cumsum(rp.segment, axis=1) - rp.segment
    assert np.array_equal(np.where(has, rp.chain, 0), np.where(has, chain_from_segments, 0))
    assert (rp.segment >= 0).all() and (rp.turns <= max_turns).all()
    assert (rp.chain[:, 1:] <= rp.prompt[:, 1:] - 1)[has[:, 1:]].all()
    assert rp.reuse.chained_tokens <= rp.reuse.trace_tokens
    assert rp.requests == sum(len(s) for s in sessions)
    assert np.all(np.diff(rp.start_s) >= 0)                    # sessions in start order (the engine's a0)
    # one conversation per session when each fits max_turns: the whole trace's reuse is chained
    # (a turn after one of fewer than two full blocks shares only the common block 0 with its own history,
    # and a turn of at most 513 tokens can reuse no more than that block: nothing links either to its
    # session, so it starts one of its own)
    lonely = any(prev["input_length"] < 2 * 512 or turn["input_length"] - 1 <= 512 for s in sessions
                 for prev, turn in zip(_conversations([s])[:-1], _conversations([s])[1:]))
    if all(len(s) <= max_turns for s in sessions) and not lonely:
        assert rp.sessions == len(sessions) or rp.reuse.chained_tokens < rp.reuse.trace_tokens


@settings(max_examples=25, deadline=None)
@given(sessions=st.lists(turns_st, min_size=1, max_size=6), small=st.integers(0, 40), big=st.integers(0, 40))
def test_lru_reuse_grows_with_the_cache_up_to_the_trace_reuse(tmp_path_factory, sessions, small, big):
    path = _write(tmp_path_factory.mktemp("l") / "t.jsonl", _conversations(sessions))
    lo, hi = sorted((small, big))
    h_lo, total = lru_reuse(path, lo * 512)
    h_hi, _ = lru_reuse(path, hi * 512)
    h_inf, _ = lru_reuse(path, float("inf"))
    assert h_lo <= h_hi <= h_inf == load_replay(path).reuse.trace_tokens
    assert lru_reuse(path, 0)[0] == 0


# --- fit -----------------------------------------------------------------------------------------------

def test_fit_round_trips_through_the_workload_parser(tmp_path):
    f = fit(load_replay(DATA / "generic_sessions.csv"))
    # new input per turn: 600, 200, 150 (a); 300, 80 (b); 200 (c); outputs 100, 50, 60, 20, 10, 5
    assert f.prompt_mean_tokens == pytest.approx(1530 / 6) and f.output_mean_tokens == pytest.approx(245 / 6)
    assert (f.turns, f.sessions, f.requests) == (2, 3, 6)
    assert f.think_mean_s == pytest.approx((10.0 + 20.0 + 10.5) / 3)
    assert f.rate_per_s == pytest.approx(3 / 31.0)                 # 3 sessions over the 31 s span
    (tmp_path / "w.toml").write_text(toml_entry(f, "fitted", "generic_sessions.csv", 2.0, 0.1))
    w = load_workloads(tmp_path / "w.toml")["fitted"]
    assert (w.turns, w.prompt_max_tokens, w.output_max_tokens, w.replay) == (2, 600, 100, None)
    assert w.prompt_mean_tokens == pytest.approx(f.prompt_mean_tokens, rel=1e-6)


def test_cli_fit_prints_a_loadable_entry(tmp_path):
    res = CliRunner().invoke(main, ["workload", "fit", str(DATA / "mooncake_tiny.jsonl"), "--name", "tiny"])
    assert res.exit_code == 0, res.output
    assert "# reuse: 0.5185 of prefix blocks repeat" in res.output           # 14 / 27
    (tmp_path / "w.toml").write_text(res.output)
    assert load_workloads(tmp_path / "w.toml")["tiny"].system_prompts == 1


# --- the engine ----------------------------------------------------------------------------------------

def test_replay_simulates_the_trace_times_and_its_closed_form_hit_rate(tmp_path):
    """One compiled program, two levers: with the session router every later turn finds its chain, so the
    simulated hit rate is the closed form less the system prompt's first use on the second instance; least-
    loaded routing may send a turn away from its chain. First turns arrive at the trace's own times."""
    from sweepkit.serving.cluster import load_cluster
    from sweepkit.serving.config import Config
    from sweepkit.serving.lanes import run_configs
    from sweepkit.serving.levers import load_levers
    from sweepkit.serving.metrics import lane_metrics

    rng = np.random.default_rng(3)
    sessions = [[(int(rng.integers(100, 1500)), int(rng.integers(5, 60))) for _ in range(3)] for _ in range(12)]
    _write(tmp_path / "t.jsonl", _conversations(sessions, gap_ms=1500))
    (tmp_path / "w.toml").write_text('[workloads.t]\nsource = "s"\nreplay = "t.jsonl"\nttft_slo_s = 5.0\n'
                                     'tpot_slo_s = 0.05\n')
    w = load_workloads(tmp_path / "w.toml")["t"]
    rp = w.replay
    levers = load_levers(ROOT / "grids" / "traces" / "levers.toml")
    cluster = load_cluster()
    lanes = run_configs(w, cluster, [Config("H100", levers[n]) for n in ("prefix-cache-session", "prefix-cache")],
                        [[rp.rate_per_s]] * 2, early_stop=False)
    session, least = (lane_metrics(lanes, c, 0, w, cluster.gpus, 0.0, 1.0) for c in (0, 1))
    assert session["completed"] == least["completed"] == rp.requests
    first_use = 512 / rp.reuse.prompt_tokens                          # the second instance's system prompt
    assert rp.reuse.chained_share - first_use - 1e-9 <= session["prefix_hit_rate"] <= rp.reuse.chained_share + 1e-9
    assert least["prefix_hit_rate"] <= session["prefix_hit_rate"] + 1e-9
    st0 = lanes.state(0, 0)
    B = lanes.n_sessions
    assert np.allclose(np.asarray(st0.arrival_s)[:rp.sessions], rp.start_s)     # turn 0 of each session
    assert not np.isfinite(np.asarray(st0.arrival_s)[rp.sessions:B]).any()      # padding never arrives


def test_the_replay_grid_parses_from_a_fresh_checkout():
    from sweepkit.serving.grid import load_serving_grid

    grid = load_serving_grid(ROOT / "grids" / "mooncake-replay.toml")
    (w,) = grid.workloads
    assert w.replay.requests == 12_031 and w.replay.rate_per_s == pytest.approx(2.1422, abs=1e-4)
    assert [lv.name for lv in grid.levers] == ["baseline", "paged", "prefix-cache", "prefix-cache-session"]


@pytest.mark.parametrize("name, fmt", [("mooncake_tiny.jsonl", "mooncake"), ("azure_tiny.csv", "azure"),
                                       ("generic_sessions.csv", "generic")])
def test_formats_are_detected_from_the_first_line(name, fmt):
    assert load_replay(DATA / name).fmt == fmt


def test_generic_sessions_with_blocks_reuse_what_they_share(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("t_s,input_tokens,output_tokens,session_id,hash_ids\n"
                    "12.5,2100,80,u17,0 41 42 43 44\n13.0,700,9,u18,0 50\n14.0,2600,20,u17,0 41 42 43 44 45\n"
                    "20.0,1000,5,u17,0 41 60\n")
    rp = load_replay(path)
    # u17's second turn shares 5 blocks (2,560 tokens); its third shares 2, less than its chain: a new session
    assert rp.turns.tolist() == [2, 1, 1] and rp.chain[0].tolist() == [512, 2560]
    assert rp.think_s[0, 1] == pytest.approx(1.5) and rp.start_s.tolist() == [0.0, 0.5, 7.5]
    # the trace holds min(2 x 512, 1,000 - 1) = 999 tokens of the last row; the replay credits its system prompt
    assert rp.reuse.chained_tokens == 512 + 2560 + 512 and rp.reuse.trace_tokens == 512 + 2560 + 999
