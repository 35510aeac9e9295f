"""Calibrated device profiles: a devices TOML (the ``devices.toml`` format) with the fit's lineage.

The file holds one ``[devices."NAME"]`` table: every field of the base device, the fitted
flops_efficiency, bandwidth_efficiency and pass_overhead_s, and a ``source`` naming the base device, the
measurement file and its SHA-256, the rows used, the fit error before and after and the date. Grids,
``sweepkit.evaluate(..., devices_file=...)`` and ``sweepkit validate --devices-file`` read it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from pathlib import Path

from sweepkit.catalogue import Device
from sweepkit.validation.fit import NAMES
from sweepkit.validation.measurements import row_ranges

_SKIP = ("name", "compute_speedup")


def calibrated_device(base: Device, name: str, values: tuple[float, ...], *, file: str, sha256: str,
                      rows: list[int], error_before_pct: float, error_after_pct: float,
                      date: dt.date | None = None) -> Device:
    """``base`` with the fitted parameters (NAMES order), renamed, its ``source`` carrying the lineage."""
    date = date or dt.datetime.now(dt.UTC).date()
    lineage = (f"calibrated from {base.name} by sweepkit calibrate on {date.isoformat()}: {file} "
               f"(sha256 {sha256}), rows {row_ranges(rows)}; median |error| {error_before_pct:.1f}% -> "
               f"{error_after_pct:.1f}%; base source: {base.source}")
    return dataclasses.replace(base, name=name, source=lineage, description=f"{base.description}, calibrated",
                               **dict(zip(NAMES, values)))


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def device_toml(dev: Device, comment: str = "") -> str:
    """One ``[devices."NAME"]`` table in the devices.toml format."""
    lines = [f"# {line}" for line in comment.splitlines()] + [f"[devices.{json.dumps(dev.name)}]"]
    for f in dataclasses.fields(dev):
        if f.name not in _SKIP:
            lines.append(f"{f.name} = {_toml_value(getattr(dev, f.name))}")
    speedups = ", ".join(f"{k} = {v!r}" for k, v in dev.compute_speedup.items())
    lines.append(f"compute_speedup = {{ {speedups} }}")
    return "\n".join(lines) + "\n"


def write_devices_file(path: str | Path, dev: Device, comment: str = "") -> None:
    """Write ``dev`` as a devices file (to a temporary name, then renamed into place)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(device_toml(dev, comment), encoding="utf-8")
    os.replace(tmp, path)
