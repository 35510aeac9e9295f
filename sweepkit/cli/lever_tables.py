"""The lever matrix for people: per lever, a small table of workloads x metrics, one device at a time.

Each cell is the lever's change from the baseline with its caveat marks, as the chapter prints it
(``+27% α``), marked ✓ better / ✗ worse / = same (beyond ±2 %) and, on a terminal, coloured by that verdict. A cell
without a change says why (``n/a: no capacity``: no load meets the SLOs, so cost and energy per token are
undefined). The long form (one row per device x lever x workload x metric) is ``sweepkit matrix --long`` and
every machine format (csv, json, markdown).
"""

from __future__ import annotations

import sys
import tomllib

import pyarrow as pa

from sweepkit.catalogue.metrics import MATRIX

HEADERS = {"goodput": "goodput", "cost_per_mtok": "$/M tok", "energy_per_token": "J/tok", "ttft_p99": "TTFT p99",
           "tpot_p99": "TPOT p99", "itl_p99": "ITL p99"}
"""Column headers of the six matrix metrics, as the chapter heads them."""

MARKS = {"better": "✓", "worse": "✗", "same": "="}
STYLES = {"better": "green", "worse": "red", "same": "", None: "dim"}

LEGEND = ("✓ better, ✗ worse than the baseline by more than ±2%, = within. Caveats: E capacity at least doubles "
          "(the baseline sits at a latency cliff); $ illustrative prices; α speculative acceptance assumed, "
          "not measured. Goodput, cost and energy at each configuration's capacity; latencies at the reference "
          "load.")
"""The one-line legend printed under the tables."""


def cell_text(change_pct: float | None, caveats: str | None, verdict: str | None, missing: str | None = None,
              share: float | None = None) -> str:
    """One cell as printed: mark, rounded change, caveat marks and, with bands, the share of draws agreeing.

    >>> cell_text(27.4, "α", "better")
    '✓ +27% α'
    >>> cell_text(-0.4, "", "same")
    '= -0%'
    >>> cell_text(None, "$", None, "no capacity")
    'n/a: no capacity'
    >>> cell_text(12.0, "", "better", share=0.94)
    '✓ +12% (94%)'
    """
    if change_pct is None:
        return f"n/a: {missing or 'no value'}"
    sign = "+" if change_pct >= 0 else "-"
    text = f"{MARKS.get(verdict, '')} {sign}{abs(change_pct):.0f}%".lstrip()
    if caveats:
        text += f" {caveats}"
    if share is not None:
        text += f" ({100 * share:.0f}%)"
    return text


def _share(row: dict) -> float | None:
    return {"better": row.get("share_better"), "worse": row.get("share_worse"),
            "same": row.get("share_same")}.get(row.get("verdict"))


def lever_cells(table: pa.Table, device: str) -> dict[str, dict[str, dict[str, tuple[str, str | None]]]]:
    """The long matrix's rows of one device as lever -> workload -> metric -> (cell text, verdict).

    Levers and workloads keep the matrix's order (queries/matrix.sql); metrics are the six.
    """
    out: dict[str, dict[str, dict[str, tuple[str, str | None]]]] = {}
    for row in table.to_pylist():
        if row["device"] != device:
            continue
        change = row["change_pct"]
        if change is not None and change != change:      # NaN: no value
            change = None
        text = cell_text(change, row.get("caveats"), row.get("verdict") if change is not None else None,
                         row.get("missing"), _share(row) if change is not None else None)
        out.setdefault(row["lever"], {}).setdefault(row["workload"], {})[row["metric"]] = (
            text, row.get("verdict") if change is not None else None)
    return out


def lever_titles() -> dict[str, str]:
    """Lever name -> its one-line description from the packaged lever catalogue (empty where unreadable)."""
    from sweepkit.errors import InputError
    from sweepkit.serving.levers import load_levers

    try:
        return {name: lever.description for name, lever in load_levers().items()}
    except (InputError, OSError):       # a title is a courtesy: the tables print without it
        return {}


def render(table: pa.Table, device: str, lever: str | None = None, console=None) -> int:
    """Print one rich table per lever (or the one ``lever``) for ``device``, then the legend; returns the count.

    Args:
      table: the long matrix (queries/matrix.sql's columns).  device: the device shown.
      lever: only this lever (None: every lever).  console: a rich Console (default: stdout).
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    if console is None:
        console = Console() if _isatty() else Console(width=160)
    cells = lever_cells(table, device)
    titles = lever_titles()
    metrics = [m.name for m in MATRIX]
    shown = 0
    for name, workloads in cells.items():
        if lever is not None and name != lever:
            continue
        heading = Text(name, style="bold")
        if titles.get(name) and titles[name] != name:
            heading.append(f"  {titles[name]}")
        heading.append(f"  (change from the baseline on {device})", style="dim")
        console.print(heading, soft_wrap=True)
        t = Table(header_style="bold")
        t.add_column("workload")
        for m in metrics:
            t.add_column(HEADERS.get(m, m), justify="right")
        for workload, by_metric in workloads.items():
            shown_cells = [by_metric.get(m, ("", None)) for m in metrics]
            t.add_row(workload, *(Text(text, style=STYLES.get(verdict, "")) for text, verdict in shown_cells))
        console.print(t)
        console.print()
        shown += 1
    if shown:
        console.print(Text(LEGEND, style="dim"), soft_wrap=True)
    return shown


def _isatty() -> bool:
    return sys.stdout.isatty()


def reference_device(grid_toml: str | None, devices: list[str]) -> str | None:
    """The device a run's tables show by default: its grid's reference device, else H100, else the first.

    >>> reference_device('[serving]\\nreference_device = "B200"', ["B200", "H100"])
    'B200'
    >>> reference_device(None, ["A100", "H100"])
    'H100'
    """
    try:
        ref = tomllib.loads(grid_toml or "").get("serving", {}).get("reference_device")
    except tomllib.TOMLDecodeError:
        ref = None
    for choice in (ref, "H100"):
        if choice in devices:
            return choice
    return devices[0] if devices else None


def render_best(best: pa.Table, device: str, console=None) -> None:
    """The best lever per workload on ``device`` (queries/best_lever.sql), in a few columns."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    if console is None:
        console = Console() if _isatty() else Console(width=160)
    t = Table(header_style="bold")
    for name, justify in (("workload", "left"), ("best lever", "left"), ("goodput vs baseline", "right"),
                          ("goodput/GPU (req/s)", "right"), ("$/M tok", "right"), ("J/tok", "right")):
        t.add_column(name, justify=justify)
    for r in best.to_pylist():
        if r["device"] != device:
            continue
        t.add_row(r["workload"], r["lever"], _g(r["gain_x"], "x"), _g(r["goodput_per_gpu_per_s"]),
                  _g(r["cost_per_mtok_usd"]), _g(r["energy_per_token_j"]))
    console.print()
    console.print(Text(f"Best lever per workload on {device} (most goodput per GPU at capacity)", style="bold"))
    console.print(t)


def _g(value, suffix: str = "") -> str:
    """A figure to 3 significant digits, or n/a.

    >>> _g(2.39204, "x"), _g(None), _g(float("nan"))
    ('2.39x', 'n/a', 'n/a')
    """
    if value is None or value != value:
        return "n/a"
    return f"{value:.3g}{suffix}"
