"""``sweepkit trace``: the speculative-decoding mechanism pass by pass, stored as ``trace_steps``."""

from __future__ import annotations

import click

from sweepkit.cli.common import emit, format_option, note, open_warehouse, warehouse_option
from sweepkit.errors import bad_value


def _lengths(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise bad_value(option, text, "comma-separated integers >= 1, e.g. 512,384") from None
    if not values or any(v < 1 for v in values):
        raise bad_value(option, text, "comma-separated integers >= 1, e.g. 512,384")
    return values


@click.command(context_settings={"max_content_width": 100})
@click.option("--device", default="H100", show_default=True, help="Accelerator (sweepkit devices).")
@click.option("--model", default="llama-3-8b", show_default=True, help="Target model (sweepkit models).")
@click.option("--draft", default="mtp", show_default=True, help="Draft: mtp or a model sharing the vocab.")
@click.option("--gamma", type=int, default=3, show_default=True, help="Drafted tokens per verify pass.")
@click.option("--alpha", type=float, default=0.7, show_default=True, help="Acceptance per drafted token.")
@click.option("--prompts", default="512,384", show_default=True, help="Prompt tokens, one per request.")
@click.option("--outputs", default="40", show_default=True,
              help="Output tokens: one for every request, or one per request.")
@click.option("--seed", type=int, default=0, show_default=True, help="PRNG seed of the acceptance draws.")
@warehouse_option
@format_option
def trace(device: str, model: str, draft: str, gamma: int, alpha: float, prompts: str, outputs: str,
          seed: int, warehouse: str | None, fmt: str) -> None:
    """Run a few requests pass by pass, plain and speculative, with random acceptance.

    Every pass goes into the warehouse's trace_steps table (pass, request, drafted / accepted tokens,
    the target's correction or bonus token, start and end times, bound); the summary (tokens per pass,
    TTFT and TPOT p99 without and with speculation) goes to stdout. Defaults: the seed chapter's
    scenario, Llama-3-8B on one H100, prompts 512 and 384, 40 output tokens each, MTP gamma 3 alpha 0.7.

    \b
    Example: sweepkit trace --warehouse /tmp/wh --seed 1 --format markdown
    """
    from sweepkit.trace.scheduler import Scenario
    from sweepkit.store.trace_steps import write_trace
    from sweepkit.store import run_query

    p = _lengths(prompts, "--prompts")
    o = _lengths(outputs, "--outputs")
    if len(o) == 1:
        o = o * len(p)
    sc = Scenario(device=device, model=model, draft=draft, gamma=gamma, alpha=alpha, prompt_tokens=p,
                  output_tokens=o, seed=seed)
    wh = open_warehouse(warehouse)
    run_id = write_trace(wh, sc)
    note(f"trace run {run_id}: {len(p)} requests, see the trace_steps view")
    emit(run_query(wh, "trace_summary", {"run_id": run_id}), fmt, title="trace: plain against speculative")
