"""One kernel-time field of the shipped TensorRT-LLM profile, fitted on one framework key's train rows.

The shared body of ``fit_triton_profile.py`` (t_k, TensorRT-LLM behind Triton) and
``fit_gptsession_profile.py`` (t_k,ctx, TensorRT-LLM's gptSessionBenchmark): every other field of the shipped
TensorRT-LLM profile is held, the field is fitted on a grid by
:func:`sweepkit.validation.kernel_fit.refit_kernel` (median |ln error| of the packaged train rows whose
framework maps to ``key``; test rows held out), the loss per grid point is printed and the profile written.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt

import numpy as np


def fit_kernel_profile(argv: list[str] | None, *, key: str, framework: str, field: str, symbol: str, script: str,
                       max_us: float, rows_label: str, header: str) -> int:
    """Parse ``--out``, ``--step-us``, ``--max-us``; fit ``field`` on ``key``'s train rows; write the profile.

    Args:
      key: the framework key of the rows and the profile's name.  framework: the profile's framework label.
      field: the fitted field (:data:`sweepkit.catalogue.efficiency.KERNEL_FIELD` or ``CONTEXT_KERNEL_FIELD``).
      symbol: its notation, for messages.  script: the calling script's path, for the profile's source.
      max_us: the grid's default end (microseconds).  rows_label: what the rows are, for the source.
      header: the profile file's second header line.

    Returns:
      the process exit status (0).
    """
    ap = argparse.ArgumentParser(description=f"Fit {symbol} of the {key} profile")
    ap.add_argument("--out", default=f"sweepkit/catalogue/profile-{key}.toml")
    ap.add_argument("--step-us", type=float, default=0.25, help="grid step, microseconds")
    ap.add_argument("--max-us", type=float, default=max_us, help="grid end, microseconds")
    args = ap.parse_args(argv)

    from sweepkit.catalogue.efficiency import framework_key, packaged_profile, profile_toml
    from sweepkit.validation import MODELLED, evaluate_points, load_measurements, status
    from sweepkit.validation.kernel_fit import refit_kernel, with_kernel

    points, name, sha = load_measurements(None)
    rows = [m for m in points if framework_key(m.framework) == key and m.split == "train" and status(m) == MODELLED]
    base = dataclasses.replace(packaged_profile("profile-tensorrt-llm.toml"), name=key, framework=framework)
    grid = np.round(np.arange(0.0, args.max_us + 1e-9, args.step_us), 6) / 1e6
    fit = refit_kernel(rows, base, grid, lambda r, p: evaluate_points(r, profile=p), field=field)
    for g, loss in zip(fit.grid_s, fit.loss):
        print(f"{symbol} {g * 1e6:5.2f} us  median |ln error| {loss:.4f}{'  <- best' if g == fit.kernel_s else ''}")
    source = (f"fitted by {script} on {dt.date.today().isoformat()}: {field} alone, {fit.rows} train rows of "
              f"{rows_label} ({name}, sha256 {sha}), median |ln error| {fit.loss[0]:.4f} at {symbol} = 0 -> "
              f"{min(fit.loss):.4f}; every other field the shipped TensorRT-LLM profile's")
    profile = dataclasses.replace(with_kernel(base, fit.kernel_s, source, field), source=source)
    lines = f"Written by: python {script} --step-us {args.step_us:g} --max-us {args.max_us:g}\n{header}"
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(profile_toml(profile, lines))
    print(f"{symbol} = {fit.kernel_s * 1e6:.2f} us on {fit.rows} rows -> {args.out}")
    return 0
