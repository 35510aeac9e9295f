"""``sweepkit workload``: workloads from a user's own traffic (``workload fit TRACE``: a synthetic fit of a trace)."""

from __future__ import annotations

import re

import click


@click.group(context_settings={"max_content_width": 100})
def workload() -> None:
    """Workloads from your own traffic: summarise a request trace as a synthetic workload.

    A trace (Mooncake JSONL, Azure CSV or the generic format of docs/serving.md) can also be replayed as it is:
    name it as ``replay`` in a workloads TOML (grids/traces/workloads.toml).

    \b
    Example: sweepkit workload fit grids/traces/mooncake_fast25_conversation_trace.jsonl.gz
    """


@workload.command(context_settings={"max_content_width": 100})
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("--name", default=None, help="Workload name (default: the trace's file name).")
@click.option("--format", "fmt", type=click.Choice(["mooncake", "azure", "generic"]), default=None,
              help="Trace format (default: detected from its first line).")
@click.option("--block-tokens", type=click.IntRange(1, 1_000_000), default=None,
              help="Tokens per hash_ids block (default 512, the Mooncake traces').")
@click.option("--max-turns", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Most turns of a replayed session (a longer one continues as a new session).")
@click.option("--ttft-slo-s", type=click.FloatRange(0, min_open=True), default=5.0, show_default=True,
              help="TTFT SLO of the entry, seconds.")
@click.option("--tpot-slo-s", type=click.FloatRange(0, min_open=True), default=0.05, show_default=True,
              help="TPOT SLO of the entry, seconds.")
def fit(trace: str, name: str | None, fmt: str | None, block_tokens: int | None, max_turns: int,
        ttft_slo_s: float, tpot_slo_s: float) -> None:
    """Print a workloads TOML entry fitted to TRACE: lognormal lengths per turn, turns per session, think
    time and shared system prompts, with the trace's rate, burstiness (CV of session-start gaps) and prefix
    reuse as comments, so that the fit and the replay can be compared at the same load.

    \b
    Example: sweepkit workload fit grids/traces/mooncake_fast25_conversation_trace.jsonl.gz --name kimi
    """
    from pathlib import Path

    from sweepkit.serving.trace_fit import fit as fit_trace, toml_entry
    from sweepkit.serving.traces import load_replay

    rp = load_replay(trace, fmt, block_tokens, max_turns)
    stem = Path(trace).name.split(".")[0]
    key = name or (re.sub(r"[^A-Za-z0-9_-]+", "-", stem).strip("-") or "trace")
    click.echo(toml_entry(fit_trace(rp), key, Path(trace).name, ttft_slo_s, tpot_slo_s), nl=False)
