"""``sweepkit report``: the warehouse as one self-contained HTML file plus a PNG of each chart."""

from __future__ import annotations

import click
import pyarrow as pa

from sweepkit.cli.common import emit, format_option, note, open_warehouse, warehouse_option
from sweepkit.cli.progress import Progress


@click.command(context_settings={"max_content_width": 100})
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="report", show_default=True,
              help="Folder for report.html and the charts' PNGs (created).")
@click.option("--no-png", is_flag=True, help="Skip the PNGs (faster; the HTML is the same).")
@warehouse_option
@format_option
def report(out_dir: str, no_png: bool, warehouse: str | None, fmt: str) -> None:
    """Build report.html (opens with no network: scripts and data inlined) and one PNG per chart.

    Charts: speed-up against batch with break-even and the verify bound; the bound regime map and the
    speed-up map over alpha x gamma; the lever matrix; an explorer of any two metrics; the mechanism
    trace. Each is a query in queries/report_*.sql; a chart without data (no serving run, no
    trace) is a panel naming the command that fills it. Prints the files written.

    \b
    Example: sweepkit run grids/seed.toml --warehouse /tmp/wh && sweepkit trace --warehouse /tmp/wh && sweepkit report --warehouse /tmp/wh --out /tmp/report
    """
    from sweepkit.report.build import SECTIONS, build_report

    wh = open_warehouse(warehouse, reading=True)
    with Progress("building the report", len(SECTIONS), "sections") as bar:
        result = build_report(wh, out_dir, png=not no_png, progress=bar.advance)
    for section in result["empty"]:
        note(f"{section}: no data yet (the report shows a panel instead)")
    for section, message in result["damaged"].items():
        note(f"{section}: skipped: {message}")
    note(f"report built in {result['seconds']:.1f} s: {result['html']}")
    files = [("html", "", result["html"])] + [("png", p.rsplit("/", 1)[-1][:-4], p) for p in result["pngs"]]
    emit(pa.table({"kind": [f[0] for f in files], "chart": [f[1] for f in files], "path": [f[2] for f in files]}),
         fmt, title="report files")
