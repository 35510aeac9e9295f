"""Serving workloads as data: lengths, sessions, arrivals and SLOs, loaded from TOML.

The packaged ``data/workloads.toml`` holds the seed's five workloads (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim), each number
with its source. A user adds a workload by writing another TOML file with a ``[workloads.<name>]`` table
(the same fields) and passing its path; a workload may name a ``trace`` CSV (columns ``input_tokens``,
``output_tokens``) whose lengths are resampled instead of the lognormal fits, or a ``replay`` trace whose
arrival times, sessions, think times and prefix blocks are replayed as they are (:mod:`sweepkit.serving.traces`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

import numpy as np

from sweepkit.errors import InputError, bad_value
from sweepkit.inputs import MAX_TRACE_BYTES, read_text
from sweepkit.serving._toml import check_keys, number, read_toml, string, table
from sweepkit.serving.trace_read import FORMATS
from sweepkit.serving.traces import MAX_TURNS, Replay, load_replay

_FIELDS = {
    "description", "source", "prompt_mean_tokens", "prompt_cv", "prompt_max_tokens", "output_mean_tokens",
    "output_cv", "output_max_tokens", "turns", "think_mean_s", "system_prompts", "system_prompt_tokens",
    "ttft_slo_s", "tpot_slo_s", "offline", "min_sessions", "trace", "replay", "replay_format", "block_tokens",
    "max_turns", "horizon",
}
_REQUIRED = {"source", "ttft_slo_s", "tpot_slo_s"}
_LENGTHS = {"prompt_mean_tokens", "prompt_cv", "prompt_max_tokens", "output_mean_tokens", "output_cv",
            "output_max_tokens"}


@dataclasses.dataclass(frozen=True)
class Workload:
    """One serving workload (base units in every name).

    Attributes:
      name, description, source: key, one line, where the numbers come from.
      prompt_mean_tokens, prompt_cv, prompt_max_tokens: new input per turn, lognormal, clipped [1, max].
      output_mean_tokens, output_cv, output_max_tokens: output per turn, lognormal, clipped [1, max].
      turns: requests per session; later turns arrive closed-loop after think_mean_s x Exp(1).
      system_prompts, system_prompt_tokens: shared system prompts prepended to every turn's prompt.
      ttft_slo_s, tpot_slo_s: the SLOs (a request attains when it meets both; TPOT ignored below 2 tokens).
      offline: every request arrives at once; capacity is the saturated throughput.
      min_sessions: sessions per run are max(min_sessions, ceil(rate x horizon x session_s)) (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim).
      horizon: arrivals span horizon x session_s (4, the reference's, by default).
      trace_inputs, trace_outputs: resampled lengths when a trace file is named (else empty).
      replay: the :class:`sweepkit.serving.traces.Replay` of a ``replay`` trace (else None): every session of
        it is simulated at any load, a load rescaling its session starts.
    """

    name: str
    description: str
    source: str
    prompt_mean_tokens: float
    prompt_cv: float
    prompt_max_tokens: int
    output_mean_tokens: float
    output_cv: float
    output_max_tokens: int
    turns: int
    think_mean_s: float
    system_prompts: int
    system_prompt_tokens: int
    ttft_slo_s: float
    tpot_slo_s: float
    offline: bool
    min_sessions: int
    trace: str = ""
    trace_inputs: tuple = ()
    trace_outputs: tuple = ()
    replay: Replay | None = None
    horizon: float = 4.0

    @property
    def session_s(self) -> float:
        """Nominal session length: turns x (think + TTFT SLO + mean output x TPOT SLO) (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim)."""
        return self.turns * (self.think_mean_s + self.ttft_slo_s + self.output_mean_tokens * self.tpot_slo_s)

    @property
    def load_unit(self) -> str:
        return "sessions/s" if self.turns > 1 else "requests/s"

    def sessions_at(self, rate: float) -> int:
        """Sessions simulated at ``rate`` (offline: min_sessions; a replayed trace: all of its sessions)."""
        if self.replay is not None:
            return self.replay.sessions
        if self.offline:
            return self.min_sessions
        return max(self.min_sessions, int(np.ceil(rate * self.horizon * self.session_s - 1e-9)))


def _read_trace(path: Path, where: str) -> tuple[tuple, tuple]:
    """A trace CSV's lengths; every length must be an integer in [1, the field's maximum]."""
    text = read_text(path, "trace CSV", MAX_TRACE_BYTES, where=f"{where}: trace {str(path)!r}")
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise InputError(f"{where}: trace {str(path)!r} is not valid CSV ({exc}); expected columns "
                         f"input_tokens, output_tokens") from None
    if not rows or "input_tokens" not in rows[0] or "output_tokens" not in rows[0]:
        raise InputError(f"{where}: trace {str(path)!r} needs columns input_tokens, output_tokens")
    columns = {"input_tokens": 1_000_000, "output_tokens": 65_536}
    out = []
    for column, most in columns.items():
        values = []
        for line, row in enumerate(rows, start=2):
            value = _length(row.get(column))
            if value is None or not 1 <= value <= most:
                raise InputError(f"{where}: trace {str(path)!r} line {line}: {column} = {row.get(column)!r} "
                                 f"is not allowed; expected an integer in [1, {most:,}]")
            values.append(value)
        out.append(tuple(values))
    return out[0], out[1]


def _length(text) -> int | None:
    """A token count from CSV text (``512`` or ``512.0``), or None when it is not an integer."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return int(value) if value.is_integer() else None


def _check_means(w: Workload, where: str) -> Workload:
    """A mean length must not exceed its maximum (the clipped lognormal could not reach the mean)."""
    for kind in ("prompt", "output"):
        mean, most = getattr(w, f"{kind}_mean_tokens"), getattr(w, f"{kind}_max_tokens")
        if mean > most:
            raise bad_value(f"{kind}_mean_tokens", mean, f"a number <= {kind}_max_tokens = {most:,}", where=where)
    return w


def _workload(name: str, raw: dict, where: str, base: Path | None) -> Workload:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a table of workload fields")
    trace = raw.get("trace", "")
    if "replay" in raw:
        return _replayed(name, raw, where, base)
    check_keys(raw, _FIELDS - _REPLAY_ONLY, _REQUIRED | (set() if trace else _LENGTHS), where)
    num = lambda k, **kw: number(raw, k, where, **kw)  # noqa: E731
    ins = outs = ()
    if trace:
        tpath = Path(string(raw, "trace", where))
        if not tpath.is_absolute() and base is not None:
            tpath = base / tpath
        ins, outs = _read_trace(tpath, where)
    dflt = dict(default=1.0)
    offline = raw.get("offline", False)
    if not isinstance(offline, bool):
        raise InputError(f"{where}: offline = {offline!r} is not allowed; expected true or false")
    turns = num("turns", lo=1, hi=64, integer=True, default=1)
    return _check_means(Workload(
        name=name, description=str(raw.get("description", name)), source=string(raw, "source", where),
        prompt_mean_tokens=num("prompt_mean_tokens", lo=0, lo_open=True, **dflt),
        prompt_cv=num("prompt_cv", lo=0, hi=10, default=0.0),
        prompt_max_tokens=num("prompt_max_tokens", lo=1, hi=1_000_000, integer=True, default=1_000_000),
        output_mean_tokens=num("output_mean_tokens", lo=0, lo_open=True, **dflt),
        output_cv=num("output_cv", lo=0, hi=10, default=0.0),
        output_max_tokens=num("output_max_tokens", lo=1, hi=65_536, integer=True, default=65_536),
        turns=turns, think_mean_s=num("think_mean_s", lo=0, hi=1e6, default=0.0),
        system_prompts=num("system_prompts", lo=0, hi=1e6, integer=True, default=0),
        system_prompt_tokens=num("system_prompt_tokens", lo=0, hi=1_000_000, integer=True, default=0),
        ttft_slo_s=num("ttft_slo_s", lo=0, lo_open=True), tpot_slo_s=num("tpot_slo_s", lo=0, lo_open=True),
        offline=offline, min_sessions=num("min_sessions", lo=2, hi=1_000_000, integer=True, default=200),
        trace=str(trace), trace_inputs=ins, trace_outputs=outs, horizon=num("horizon", lo=1, hi=64, default=4.0),
    ), where)


_REPLAY_ONLY = {"replay", "replay_format", "block_tokens", "max_turns"}
_REPLAY_FIELDS = {"description", "source", "ttft_slo_s", "tpot_slo_s", "offline"} | _REPLAY_ONLY


def _replayed(name: str, raw: dict, where: str, base: Path | None) -> Workload:
    """A workload that replays a trace: its lengths, sessions and times are the trace's (the descriptive
    length and think fields are its new input per turn (prompt less its chain), output and gaps between
    turns: means, coefficients of variation and maxima, as :mod:`sweepkit.serving.trace_fit` fits them)."""
    check_keys(raw, _REPLAY_FIELDS, {"source", "ttft_slo_s", "tpot_slo_s", "replay"}, where)
    path = Path(string(raw, "replay", where))
    if not path.is_absolute() and base is not None:
        path = base / path
    fmt = raw.get("replay_format")
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"{where}: replay_format = {fmt!r} is not allowed; expected one of {', '.join(FORMATS)}")
    num = lambda k, **kw: number(raw, k, where, **kw)  # noqa: E731
    bt = num("block_tokens", lo=1, hi=1_000_000, integer=True) if "block_tokens" in raw else None
    rp = load_replay(path, fmt, bt, num("max_turns", lo=1, hi=64, integer=True, default=MAX_TURNS))
    offline = raw.get("offline", False)
    if not isinstance(offline, bool):
        raise InputError(f"{where}: offline = {offline!r} is not allowed; expected true or false")
    if not offline and not rp.span_s > 0:
        raise InputError(f"{where}: replay {str(path)!r} has every request at one instant; expected arrivals "
                         f"spread in time (or offline = true)")
    has = np.arange(rp.prompt.shape[1])[None, :] < rp.turns[:, None]
    x, y, think = np.maximum(rp.prompt - rp.chain, 1)[has], rp.output[has], rp.think_s[:, 1:][has[:, 1:]]
    cv = lambda v: float(np.std(v) / np.mean(v)) if np.mean(v) > 0 else 0.0  # noqa: E731
    return Workload(
        name=name, description=str(raw.get("description", name)), source=string(raw, "source", where),
        prompt_mean_tokens=float(x.mean()), prompt_cv=cv(x), prompt_max_tokens=int(x.max()),
        output_mean_tokens=float(y.mean()), output_cv=cv(y), output_max_tokens=int(y.max()),
        turns=int(rp.prompt.shape[1]), think_mean_s=float(think.mean()) if think.size else 0.0,
        system_prompts=int(rp.system_tokens.shape[0]), system_prompt_tokens=int(rp.system_tokens.max()),
        ttft_slo_s=num("ttft_slo_s", lo=0, lo_open=True), tpot_slo_s=num("tpot_slo_s", lo=0, lo_open=True),
        offline=offline, min_sessions=max(rp.sessions, 2), replay=rp)


def load_workloads(path: str | Path | None = None) -> dict[str, Workload]:
    """All workloads of a TOML file (default: the packaged five), validated.

    Raises:
      InputError: one line naming the file, the workload, the field, the bad value and what is allowed.
    """
    raw, where = read_toml(path, "workloads.toml")
    base = Path(path).parent if path is not None else None
    entries = table(raw, "workloads", where)
    return {k: _workload(k, v, f"{where} [workloads.{k}]", base) for k, v in entries.items()}


def get_workload(name: str, path: str | Path | None = None) -> Workload:
    """One workload by name (from ``path`` if given, else the packaged file)."""
    found = load_workloads(path)
    if name not in found:
        where = str(path) if path else "sweepkit/serving/data/workloads.toml"
        raise InputError(f"{where}: workload = {name!r} is not allowed; expected one of {', '.join(found)}")
    return found[name]


def fixed_workload(name: str, input_tokens: int, output_tokens: int, requests: int, *, offline: bool,
                   source: str, where: str = "workload") -> Workload:
    """A single-turn workload of fixed lengths, checked like a file's (for measured benchmark points).

    Every request has ``input_tokens`` of prompt and ``output_tokens`` of output (cv = 0, no system prompt);
    ``requests`` is the number simulated at any load (``min_sessions``; the SLO fields are set so small that
    ``sessions_at`` never asks for more, so judge such a run by its latency percentiles, not its attainment).

    Args:
      input_tokens, output_tokens: tokens per request.  requests: requests per run (>= 2).
      offline: every request arrives at t = 0 (a throughput benchmark with all requests queued at once).

    Example:
      >>> w = fixed_workload("trt-128-128", 128, 128, 64, offline=True, source="perf-overview.md")
      >>> (w.prompt_mean_tokens, w.output_cv, w.sessions_at(1e6))
      (128.0, 0.0, 64)
    """
    raw = dict(source=source, description=f"{input_tokens} in / {output_tokens} out, fixed lengths",
               prompt_mean_tokens=float(input_tokens), prompt_max_tokens=int(input_tokens),
               prompt_cv=0.0, output_mean_tokens=float(output_tokens), output_max_tokens=int(output_tokens),
               output_cv=0.0,
               ttft_slo_s=1e-12, tpot_slo_s=1e-12, offline=bool(offline), min_sessions=int(requests))
    return _workload(name, raw, where, None)
