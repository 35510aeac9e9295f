"""``sweepkit validate``: every measured point against the cost model, into the ``validation`` table."""

from __future__ import annotations

import click

from sweepkit.cli.common import emit, format_option, note, open_warehouse, warehouse_option

COLUMNS = ("source", "setup", "metric", "unit", "measured", "modelled", "error_pct", "split", "status")


def measurements_option(f):
    return click.option("--measurements", "measurements", type=click.Path(dir_okay=False), default=None,
                        help="Measurement CSV (docs/validation.md); default: the packaged public set.")(f)


def devices_file_option(f):
    return click.option("--devices-file", "devices_file", type=click.Path(dir_okay=False), default=None,
                        help="Devices TOML (sweepkit calibrate --out) whose devices the file may name.")(f)


def profile_option(f):
    return click.option("--profile", "profile", default=None, metavar="FILE|reference",
                        help="Efficiency profile (sweepkit calibrate --framework --out) pricing max-throughput "
                             "rows; default: each row's framework's shipped profile where there is one; "
                             "'reference': every row on the serving engine with the reference constants.")(f)


def resolve_profile(profile: str | None):
    """None (each row's framework's shipped profile), "reference", or the parsed profile file."""
    from sweepkit.catalogue.efficiency import load_profile
    from sweepkit.validation.profiles import REFERENCE

    return profile if profile in (None, REFERENCE) else load_profile(profile)


SKIPPED = "not simulated (--no-serving)"


def validation_table(measurements: str | None, devices_file: str | None, serving: bool = True,
                     profile: str | None = None):
    """(rows for the warehouse, file label, file digest): load, price and compare every point (max-throughput
    rows under an efficiency profile where one applies, other throughput and latency points with the
    serving engine unless ``serving`` is False)."""
    from sweepkit.catalogue import devices_file as devices_scope
    from sweepkit.validation import evaluate_points, load_measurements
    from sweepkit.validation.store import rows

    chosen = resolve_profile(profile)
    with devices_scope(devices_file) as extra:
        points, name, sha = load_measurements(measurements)
        values = evaluate_points(points, extra, serving=serving, profile=chosen)
        table = rows(points, values, name, sha, devices_file or "")
    for r in table:
        if r["status"] == "modelled" and r["modelled"] is None:
            r["status"] = SKIPPED
    return table, name, sha


def summary_lines(table: list[dict]) -> list[str]:
    """Median |error| per source and the points not modelled, grouped by reason."""
    from sweepkit.validation.store import median_abs_error

    lines = []
    for src, (med, n_ok, n_not) in median_abs_error(table).items():
        text = "no modelled point" if med is None else \
            f"median |error| {med:.1f}% over {n_ok} point{'s' if n_ok != 1 else ''}"
        lines.append(f"{src}: {text}" + (f"; {n_not} not modelled" if n_not else ""))
    reasons: dict[str, int] = {}
    for r in table:
        if r["status"] != "modelled":
            reasons[r["status"]] = reasons.get(r["status"], 0) + 1
    lines += [f"{count} points {reason}" for reason, count in reasons.items()]
    return lines


@click.command(context_settings={"max_content_width": 100})
@measurements_option
@devices_file_option
@profile_option
@click.option("--serving/--no-serving", default=True,
              help="Simulate throughput and latency points with the serving engine (default; minutes on a "
                   "CPU for the public set) or list them as not simulated.")
@warehouse_option
@format_option
def validate(measurements: str | None, devices_file: str | None, profile: str | None, serving: bool,
             warehouse: str | None, fmt: str) -> None:
    """Compare measured points (step times, decode rates, throughputs, latencies) with the model.

    Per-pass points (step_time, decode_tok_s) are priced by the cost model at the measured batch and
    context; max-throughput rows of a framework with an efficiency profile (shipped, or --profile) are
    priced by the analytic steady state under it (docs/costmodel.md "Measured profile"); other
    throughput and latency points are simulated by the serving engine at the measured load (fixed
    lengths; Poisson at request_rate, a concurrency through Little's law, all requests queued at once
    for max_output_throughput; docs/validation.md). Prints source, setup, measured, modelled and
    error % per point and the median absolute error per source (on stderr with --format csv or json),
    and commits the table to the warehouse as the validation view.

    \b
    Example: sweepkit validate --no-serving --warehouse /tmp/wh --format markdown
    """
    import pyarrow as pa

    table, name, _ = validation_table(measurements, devices_file, serving, profile)
    run_id = write_validation_run(warehouse, table, name, devices_file)
    out = pa.table({c: [r[c] for r in table] for c in COLUMNS})
    out = out.set_column(out.schema.get_field_index("error_pct"), "error_pct",
                         pa.array([None if v is None else round(v, 2) + 0.0 for v in out["error_pct"].to_pylist()]))
    emit(out, fmt, title=f"validation: {name}")
    lines = summary_lines(table)
    if fmt in ("table", "markdown"):
        click.echo("")
        for line in lines:
            click.echo(("- " if fmt == "markdown" else "") + line)
    else:
        for line in lines:
            note(line)
    note(f"validation run {run_id}: {len(table)} points, see the validation view")


def write_validation_run(warehouse: str | None, table: list[dict], name: str, devices_file: str | None) -> str:
    from sweepkit.validation.store import write_validation

    return write_validation(open_warehouse(warehouse), table, name, table[0]["measurements_sha256"],
                            devices_file or "")
