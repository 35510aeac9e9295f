"""A request trace as the engine's sessions: arrival times, sessions, think times and shared prefixes, as data.

The engine's prefix cache (:mod:`sweepkit.serving.engine.prefix`) knows two kinds of segment: shared system prompts
(chain position 0, shared by every session that names one) and the segment each turn adds to its session's
chain (cached when the turn finishes, reused by the session's later turns). A trace maps onto them so:

* **sessions** - rows with a ``session_id`` are that session's turns, in order. Rows without one (Mooncake)
  are chained by their prefix blocks: a row whose leading blocks extend the chain of the request that last
  held its deepest shared block, beyond the first block, is that request's session's next turn, if that
  request is still its session's latest turn. A row that fits no chain starts a session.
* **chains** - turn k of a session reuses c_k tokens: with block ids, c_k = min(d_k x block_tokens,
  prompt_k - 1) where d_k is the blocks it shares with turn k - 1; without them (sessions given), c_k =
  prompt_{k-1} + output_{k-1} (the turn carries its history). Turn k - 1's segment is c_k - c_{k-1} tokens,
  and turn 0's chain is the system prompt: the first block (``block_tokens``), one system prompt per distinct
  first block. A turn whose chain would shrink (c_k < c_{k-1}), or a session past ``max_turns``, starts a new
  session instead; so the engine never credits a hit the trace does not hold, and the reuse it can represent
  (:attr:`Reuse.chained_tokens`) is at most the trace's own.
* **times** - a session starts at its first row's time; turn k arrives closed-loop ``t_k - t_{k-1}`` (the
  trace's own gap, as think time) after turn k - 1 finishes. A load of r sessions/s replays the session starts
  r / (the trace's rate) times faster; think times are the trace's (each user keeps their pace).

On one instance (or with the session router) with an unbounded cache, every turn arrives after its
predecessor's segment is cached, so the engine's hit is the turn's chain where it leaves a prompt token to
compute (a system prompt's first use misses): :attr:`Reuse.chained_share` = sum of those hits / sum_k
prompt_k is the closed form of the simulated ``prefix_hit_rate`` (a finite cache gets less, and so does
least-loaded routing, which may send a later turn to an instance without its chain).

References:
  Qin et al., "Mooncake: A KVCache-centric Disaggregated Architecture for LLM Serving", FAST 2025 (trace:
  github.com/kvcache-ai/Mooncake FAST25-release/traces, Apache-2.0); Patel et al., "Splitwise", ISCA 2024
  (Azure LLM inference traces 2023, github.com/Azure/AzurePublicDataset, CC-BY-4.0).
"""

from __future__ import annotations

import dataclasses
from array import array
from pathlib import Path

import numpy as np

from sweepkit.errors import InputError
from sweepkit.serving.trace_read import MOONCAKE_BLOCK_TOKENS, read_rows, trace_format

MAX_TURNS = 8
"""Default turns per replayed session (a longer conversation continues as a new session; the prefix cache's
programs hold 8-turn chains, :data:`sweepkit.serving.sizes.PREFIX_TURNS`)."""


@dataclasses.dataclass(frozen=True)
class Reuse:
    """Prefix reuse of a trace counted in arrival order with an unbounded cache (closed forms).

    Attributes:
      blocks, repeated_blocks: prefix blocks, and those whose (prefix, block) appeared in an earlier row.
      prompt_tokens: every row's prompt.  trace_tokens: sum of min(repeated leading blocks x block_tokens,
        prompt - 1): the trace's own reusable tokens.  chained_tokens: the replay's hits on one instance with
        an unbounded cache: each turn's chain where it leaves a prompt token to compute, a system prompt
        counting once a later session reuses it (<= trace_tokens).
    """

    blocks: int
    repeated_blocks: int
    prompt_tokens: int
    trace_tokens: int
    chained_tokens: int

    @property
    def block_share(self) -> float:
        return self.repeated_blocks / max(self.blocks, 1)

    @property
    def trace_share(self) -> float:
        return self.trace_tokens / max(self.prompt_tokens, 1)

    @property
    def chained_share(self) -> float:
        return self.chained_tokens / max(self.prompt_tokens, 1)


@dataclasses.dataclass(frozen=True, eq=False)
class Replay:
    """A trace as ``S`` sessions x ``T`` turns (numpy; 0 and inf past a session's last turn).

    Attributes:
      path, fmt: the file and its format.  start_s: [S] first-turn arrivals, s since the first row.
      prompt, output: [S, T] tokens.  chain: [S, T] tokens of the turn's session chain (its system prompt and
      its predecessors' segments; a turn-0 prompt no longer than its system prompt has none to reuse).
      segment: [S, T] tokens the turn adds to the chain (reused by the next turn).  think_s: [S, T] trace gap
      before turn k (0 for k = 0, inf past the last turn).  system_id: [S].  system_tokens: [systems].
      turns: [S].  block_tokens: tokens per prefix block.  reuse: :class:`Reuse`.
    """

    path: str
    fmt: str
    start_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    chain: np.ndarray
    segment: np.ndarray
    think_s: np.ndarray
    system_id: np.ndarray
    system_tokens: np.ndarray
    turns: np.ndarray
    block_tokens: int
    reuse: Reuse

    @property
    def sessions(self) -> int:
        return int(self.start_s.shape[0])

    @property
    def requests(self) -> int:
        return int(self.turns.sum())

    @property
    def span_s(self) -> float:
        """Seconds from the first row to the last row's arrival."""
        k = np.arange(self.prompt.shape[1])[None, :] < self.turns[:, None]
        return float(np.max(np.where(k, self.start_s[:, None] + np.cumsum(np.where(k, self.think_s, 0), 1), 0)))

    @property
    def rate_per_s(self) -> float:
        """The trace's own load: sessions (requests when every session is one turn) per second of its span."""
        return self.sessions / self.span_s if self.span_s > 0 else float("inf")


class _Chains:
    """The streaming state of the session and chain mapping (one entry per distinct prefix block)."""

    def __init__(self, block_tokens: int, max_turns: int):
        self.bt, self.max_turns = block_tokens, max_turns
        self.trie: dict = {}                     # (parent node, block id) -> node
        self.owner = array("q")                  # node -> latest row holding it
        self.session = array("q")                # row -> session
        self.turn = array("q")
        self.chain = array("q")                  # row -> tokens its chain covers
        self.t_s, self.prompt, self.output = array("d"), array("q"), array("q")
        self.tail, self.last_chain, self.n_turns, self.sys = array("q"), array("q"), array("q"), array("q")
        self.systems = {None: 0}                 # first-block node -> system id (0: none)
        self.keys: dict = {}                     # session key -> (session, the row's blocks)
        self.blocks = self.repeated = self.trace_tokens = self.chained = 0

    def walk(self, hashes) -> tuple[int, list]:
        """Depth of the longest known prefix of ``hashes`` and the nodes of all of them (inserted)."""
        node, d, nodes = -1, 0, []
        for h in hashes:
            key = (node, h)
            nxt = self.trie.get(key)
            if nxt is None:
                nxt = self.trie[key] = len(self.owner)
                self.owner.append(-1)
            elif d == len(nodes):
                d += 1
            node = nxt
            nodes.append(node)
        return d, nodes

    def add(self, row) -> None:
        i, inp = len(self.session), row.input_tokens
        hs = row.hash_ids
        d, nodes = self.walk(hs) if hs else (0, [])
        self.blocks += len(nodes)
        self.repeated += d
        self.trace_tokens += max(min(d * self.bt, inp - 1), 0)
        s = -1
        if row.session is not None and row.session in self.keys:
            prev, prev_hs = self.keys[row.session]
            if hs is not None and prev_hs is not None:
                shared = next((k for k, (a, b) in enumerate(zip(hs, prev_hs)) if a != b), min(len(hs), len(prev_hs)))
                want = min(shared * self.bt, inp - 1)
            else:
                p = self.tail[prev]
                want = self.prompt[p] + self.output[p] if self.prompt[p] + self.output[p] <= inp - 1 else -1
            s = prev if self._extends(prev, want) else -1
        elif row.session is None and d >= 1:
            q = self.owner[nodes[d - 1]]
            want = min(d * self.bt, inp - 1)
            s = self.session[q] if self.tail[self.session[q]] == q and self._extends(self.session[q], want) else -1
        if s >= 0:
            c, k = want, self.n_turns[s]
            self.chained += c
            self.tail[s], self.last_chain[s], self.n_turns[s] = i, c, k + 1
        else:
            s, k = len(self.tail), 0
            seen = (nodes[0] if nodes else None) in self.systems
            sys = self.systems.setdefault(nodes[0] if nodes else None, len(self.systems))
            c = self.bt if sys else 0
            self.chained += c if seen and c <= inp - 1 else 0
            for a, v in ((self.tail, i), (self.last_chain, c), (self.n_turns, 1), (self.sys, sys)):
                a.append(v)
        if row.session is not None:
            self.keys[row.session] = (s, hs)
        for node in nodes:
            self.owner[node] = i
        for a, v in ((self.session, s), (self.turn, k), (self.chain, c), (self.t_s, row.t_s),
                     (self.prompt, inp), (self.output, row.output_tokens)):
            a.append(v)

    def _extends(self, s: int, want: int) -> bool:
        """Whether a row whose chain would cover ``want`` tokens continues session ``s``: the chain grows past
        the system prompt and the session has room for another turn."""
        floor = self.bt if self.sys[s] else 0
        return self.n_turns[s] < self.max_turns and want >= self.last_chain[s] and want > floor


def load_replay(path: str | Path, fmt: str | None = None, block_tokens: int | None = None,
                max_turns: int = MAX_TURNS) -> Replay:
    """Read a trace (:func:`sweepkit.serving.trace_read.read_rows`) into a :class:`Replay`.

    Args:
      path: the trace.  fmt: its format (None: detected).  block_tokens: tokens per ``hash_ids`` block
        (default 512, the Mooncake traces').  max_turns: most turns of a replayed session.

    Example:
      >>> import json, tempfile, os
      >>> rows = [dict(timestamp=0, input_length=1500, output_length=10, hash_ids=[0, 1, 2]),
      ...         dict(timestamp=2000, input_length=2100, output_length=5, hash_ids=[0, 1, 2, 3, 4])]
      >>> with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
      ...     f.write("\\n".join(json.dumps(r) for r in rows)) and None
      >>> r = load_replay(f.name); os.unlink(f.name)
      >>> r.sessions, r.turns.tolist(), r.chain[0].tolist(), float(r.think_s[0, 1]), r.reuse.repeated_blocks
      (1, [2], [512, 1536], 2.0, 3)
    """
    bt = int(block_tokens or MOONCAKE_BLOCK_TOKENS)
    st = _Chains(bt, int(max_turns))
    for row in read_rows(path, fmt):
        st.add(row)
    n = len(st.session)
    if n == 0:
        raise InputError(f"{path}: the trace holds no request; expected one request per line")
    return _replay(st, str(path), fmt or trace_format(path))


def _replay(st: _Chains, path: str, fmt: str) -> Replay:
    ses, turn = np.frombuffer(st.session, np.int64), np.frombuffer(st.turn, np.int64)
    S, T = len(st.tail), int(turn.max()) + 1
    grid = lambda fill, dtype: np.full((S, T), fill, dtype)  # noqa: E731
    prompt, output, chain, t_s = grid(0, np.int64), grid(0, np.int64), grid(0, np.int64), grid(np.inf, np.float64)
    prompt[ses, turn] = np.frombuffer(st.prompt, np.int64)
    output[ses, turn] = np.frombuffer(st.output, np.int64)
    chain[ses, turn] = np.frombuffer(st.chain, np.int64)
    t_s[ses, turn] = np.frombuffer(st.t_s, np.float64)
    turns = np.frombuffer(st.n_turns, np.int64).copy()
    has = np.arange(T)[None, :] < turns[:, None]
    think = np.zeros((S, T))
    think[:, 1:] = np.where(has[:, 1:], t_s[:, 1:] - np.where(has[:, :-1], t_s[:, :-1], 0.0), np.inf)
    nxt = chain.copy()                           # the next turn's chain (the last turn's own: no segment)
    nxt[:, :-1] = np.where(has[:, 1:], chain[:, 1:], chain[:, :-1])
    segment = np.where(has, nxt - chain, 0)
    sys_tokens = np.array([0] + [st.bt] * (len(st.systems) - 1), np.int64)
    sys_id = np.frombuffer(st.sys, np.int64).copy()
    reuse = Reuse(blocks=st.blocks, repeated_blocks=st.repeated, prompt_tokens=int(prompt.sum()),
                  trace_tokens=st.trace_tokens, chained_tokens=st.chained)
    return Replay(path=path, fmt=fmt, start_s=t_s[:, 0].copy(), prompt=prompt, output=output, chain=chain,
                  segment=segment, think_s=think, system_id=sys_id, system_tokens=sys_tokens, turns=turns,
                  block_tokens=st.bt, reuse=reuse)
