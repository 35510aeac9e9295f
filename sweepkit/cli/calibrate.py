"""``sweepkit calibrate``: fit a device's efficiencies to measured points, write a devices file."""

from __future__ import annotations

import click

from sweepkit.cli.common import emit, format_option, note
from sweepkit.errors import InputError, bad_value


def _median_abs(values) -> float:
    import numpy as np

    return float(np.median(np.abs(values))) if len(values) else float("nan")


@click.command(context_settings={"max_content_width": 100})
@click.argument("measurements", required=False, type=click.Path(dir_okay=False))
@click.option("--device", default=None, help="Catalogue device to calibrate (rows naming it are used).")
@click.option("--framework", default=None,
              help="Fit this framework's efficiency profile on its max_output_throughput and loaded rows instead "
                   "(TensorRT-LLM, vLLM, SGLang, ...); --out is then a profile TOML.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="Devices TOML (or, with --framework, profile TOML) to write.")
@click.option("--name", default=None, help="Name of the calibrated device (default: DEVICE-calibrated).")
@click.option("--all-rows", is_flag=True, help="Fit on every modelled row, not only split = train.")
@click.option("--source", "sources", multiple=True,
              help="With --framework: fit only rows whose source starts with this (repeatable).")
@click.option("--loss", type=click.Choice(["l2", "cauchy"]), default="l2", show_default=True,
              help="With --framework: the fit's data loss on log errors; cauchy is robust, so a few rows the model "
                   "cannot express (a benchmark's front end setting the pace) do not pull every field toward them.")
@click.option("--hold", "held", multiple=True, metavar="DEVICE:FORMAT:FIELD=VALUE",
              help="With --framework: hold a field at a value instead of fitting it (a measured kernel table's, "
                   "e.g. H100:bf16:gemm_eff_max=0.79); repeatable.")
@format_option
def calibrate(measurements: str | None, device: str | None, framework: str | None, out: str, name: str | None,
              all_rows: bool, sources: tuple[str, ...], loss: str, held: tuple[str, ...], fmt: str) -> None:
    """Fit DEVICE's compute fraction, HBM fraction and per-pass overhead to MEASUREMENTS, or with
    --framework a framework's efficiency profile.

    MEASUREMENTS is a measurement CSV (docs/validation.md); without it, the packaged public set. The fit
    uses the modelled rows (step_time, decode_tok_s) that name DEVICE and have split = train (all of them
    with --all-rows), by Levenberg-Marquardt on log errors through the JAX cost model, each parameter
    bounded to its physical range. Prints the fitted values with standard errors (a parameter the rows
    do not constrain is kept and marked), the median |error| before and after on the train and test rows,
    and writes the calibrated device, its lineage in `source`, to --out.

    With --framework, the fit is of the efficiency profile (per device x compute format: GEMM, MoE,
    attention, bandwidth and link efficiencies; per framework: host overheads) on the framework's
    max_output_throughput rows through the analytic steady state (docs/costmodel.md "Measured
    profile"); it prints the median |error| per slice (device x dense/MoE x format) and split before
    and after, and writes the profile that `validate --profile` reads. `--loss cauchy` fits it under
    Cauchy's robust loss instead of least squares; `--hold` keeps a field at a given value (a measured
    kernel table's) instead of fitting it.

    \b
    Example: sweepkit calibrate --device H100 --name H100-vllm --out /tmp/h100-vllm.toml
    """
    _check_out(out)
    if framework is not None:
        return _calibrate_framework(measurements, framework, out, all_rows, sources, loss, held, fmt)
    if loss != "l2":
        raise InputError(f"--loss {loss} applies to a framework's profile (--framework NAME); a device's fit "
                         "(--device) is least squares")
    if held:
        raise InputError("--hold applies to a framework's profile (--framework NAME)")
    if device is None:
        raise InputError("calibrate needs --device DEVICE (a device's efficiencies) or --framework NAME "
                         "(a framework's efficiency profile)")
    import numpy as np
    import pyarrow as pa

    from sweepkit.catalogue import get_device
    from sweepkit.validation import MODELLED, load_measurements, status
    from sweepkit.validation.measurements import PER_PASS
    from sweepkit.validation.fit import NAMES, fit_points
    from sweepkit.validation.framework_fit import fittable
    from sweepkit.validation.profile import calibrated_device, write_devices_file

    base = get_device(device, "--device")
    points, file, sha = load_measurements(measurements)
    usable = [m for m in points if m.device == device and m.metric in PER_PASS and status(m) == MODELLED]
    train = [m for m in usable if (all_rows or m.split == "train") and fittable(m)]
    if len(train) < 2:
        raise InputError(f"{file}: {len(train)} modelled rows with device = {device!r}"
                         f"{'' if all_rows else ' and split = train'}; a fit needs at least 2 "
                         f"(step_time or decode_tok_s rows{'' if all_rows else '; --all-rows uses every split'})")
    start = tuple(getattr(base, k) for k in NAMES)
    result = fit_points(train, start)
    before_pct, after_pct = (100 * _median_abs(np.expm1(r)) for r in (result.residuals_before,
                                                                       result.residuals_after))
    dev = calibrated_device(base, name or f"{device}-calibrated", result.values, file=file, sha256=sha,
                            rows=[m.row for m in train], error_before_pct=before_pct, error_after_pct=after_pct)
    write_devices_file(out, dev, comment=f"sweepkit calibrate: {dev.name}")
    emit(pa.table({
        "parameter": list(NAMES), "start": list(start), "fitted": list(result.values),
        "std_error": [s for s in result.sigmas],
        "identified": ["yes" if i else "no (kept at start)" for i in result.identified]}),
        fmt, title=f"calibration of {device} on {len(train)} rows")
    residuals = _report_errors(usable, base, dev)
    if fmt in ("table", "markdown"):
        click.echo("")
        emit(residuals, fmt, title="residuals: error % before and after, every modelled row of the device")
    note(f"wrote {out}: device {dev.name!r} ({result.iterations} iterations)")


def _report_errors(usable, base, dev):
    """Median |error| before and after per source and split (stderr); returns the per-row residual table."""
    import pyarrow as pa

    from sweepkit.validation import evaluate_points

    before = evaluate_points(usable)
    after = evaluate_points(usable, {base.name: dev})
    pct = [(100 * (b / m.value_si - 1), 100 * (a / m.value_si - 1)) for m, b, a in zip(usable, before, after)]
    groups: dict[tuple[str, str], list[int]] = {}
    for i, m in enumerate(usable):
        groups.setdefault((m.source, m.split), []).append(i)
    for (source, split), idx in groups.items():
        note(f"{source} [{split}, {len(idx)} rows]: median |error| {_median_abs([pct[i][0] for i in idx]):.1f}% "
             f"before, {_median_abs([pct[i][1] for i in idx]):.1f}% after")
    return pa.table({"file_row": [m.row for m in usable], "setup": [m.setup for m in usable],
                     "split": [m.split for m in usable], "measured": [m.value for m in usable],
                     "unit": [m.unit for m in usable], "error_before_pct": [round(b, 2) + 0.0 for b, _ in pct],
                     "error_after_pct": [round(a, 2) + 0.0 for _, a in pct]})


def _calibrate_framework(measurements: str | None, framework: str, out: str, all_rows: bool,
                         sources: tuple[str, ...], loss: str, held: tuple[str, ...], fmt: str) -> None:
    """Fit and write a framework profile; print the per-slice errors before and after."""
    import numpy as np
    import pyarrow as pa

    from sweepkit.validation import load_measurements
    from sweepkit.validation.framework_fit import calibrate_framework, slice_table
    from sweepkit.validation.profile_fit import parse_held
    from sweepkit.validation.profiles import write_profile

    points, file, sha = load_measurements(measurements)
    result = calibrate_framework(points, framework, file=file, sha256=sha, all_rows=all_rows, sources=sources,
                                 loss=loss, held=parse_held(held))
    command = " ".join(["sweepkit calibrate", *([measurements] if measurements else []), "--framework", framework,
                        *[f"--source {s}" for s in sources], *(["--all-rows"] if all_rows else []),
                        *([f"--loss {loss}"] if loss != "l2" else []), *[f"--hold {h}" for h in held],
                        "--out", out])
    write_profile(out, result.profile, comment=f"Written by: {command}")
    table = slice_table(result)
    emit(pa.table({k: [r[k] for r in table] for k in table[0]}), fmt,
         title=f"profile of {framework}: median error % per slice, start (seed) -> fitted")
    before, after = (100 * _median_abs(np.expm1(r)) for r in (result.fit.residuals_before,
                                                               result.fit.residuals_after))
    note(f"fitted on {len(result.train)} rows: median |error| {before:.1f}% -> {after:.1f}% "
         f"({result.fit.iterations} iterations)")
    note(f"wrote {out}: profile {result.profile.name!r}")


def _check_out(out: str) -> None:
    """Refuse an ``--out`` that cannot be written before any fitting starts: its folder must exist and be
    writable (the file is written to a temporary name beside it, then renamed into place)."""
    import os
    from pathlib import Path

    folder = Path(out).parent
    if not folder.is_dir():
        raise bad_value("--out", out, "a file in an existing folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise bad_value("--out", out, "a file in a folder you can write to")
