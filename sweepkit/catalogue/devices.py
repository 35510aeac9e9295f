"""Accelerator catalogue: frozen dataclasses loaded from ``devices.toml`` (base SI units in every name)."""

from __future__ import annotations

import contextlib
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Iterator, Mapping

from sweepkit.catalogue._toml import read_packaged
from sweepkit.catalogue.aliases import resolve, unknown
from sweepkit.catalogue.formats import get_format
from sweepkit.errors import InputError

_NUMERIC = (
    "peak_flops_per_s", "hbm_bytes_per_s", "hbm_capacity_bytes", "tdp_w", "idle_w",
    "energy_per_flop_j", "energy_per_hbm_byte_j", "flops_efficiency", "bandwidth_efficiency",
    "pass_overhead_s", "link_bytes_per_s", "link_latency_s", "link_energy_per_bit_j",
    "price_usd_per_gpu_hour",
)


@dataclass(frozen=True)
class Device:
    """One accelerator (one chip). Dense bf16 peak; achievable fractions applied by the cost model.

    Attributes (units in the names): peak_flops_per_s (dense bf16), hbm_bytes_per_s, hbm_capacity_bytes,
    tdp_w, idle_w, energy_per_flop_j (bf16; a format with speed-up k costs 1/k of it), energy_per_hbm_byte_j,
    flops_efficiency (MFU, seed 0.55), bandwidth_efficiency (MBU, seed 0.80), pass_overhead_s (fixed per
    target pass, seed 0.5 ms), link_* (scale-up link, one direction), price_usd_per_gpu_hour (illustrative),
    compute_speedup (format -> native multiple of the bf16 rate), token_overhead_s (fixed seconds per token
    position of a target pass beyond the roofline: sampling, scheduling; 0 unless calibrated),
    scaleup_domain_gpus (GPUs one NVLink/xGMI/PCIe switch domain joins at link_bytes_per_s: 8 for an HGX or
    OAM board, 72 for an NVL72 rack), scaleout_bytes_per_s (network bandwidth per GPU between domains, one
    direction: 400 Gb/s InfiniBand/RoCE NDR = 50e9 B/s, 800 Gb/s ConnectX-8 = 100e9 B/s),
    vector_flops_per_s (FP32 non-tensor CUDA-core peak, the rate of a CUDA-core decode-attention kernel:
    :mod:`sweepkit.catalogue.decode_kernels`; 0 where the catalogue does not give it), link_topology
    ("ring", the default: the all-reduce is a ring; "full-mesh": each GPU of the domain links directly to
    every other, AMD Instinct's Infinity Fabric, :mod:`sweepkit.costmodel.allreduce`).
    """

    name: str
    description: str
    source: str
    peak_flops_per_s: float
    hbm_bytes_per_s: float
    hbm_capacity_bytes: float
    tdp_w: float
    idle_w: float
    energy_per_flop_j: float
    energy_per_hbm_byte_j: float
    flops_efficiency: float
    bandwidth_efficiency: float
    pass_overhead_s: float
    link: str
    link_bytes_per_s: float
    link_latency_s: float
    link_energy_per_bit_j: float
    price_usd_per_gpu_hour: float
    price_illustrative: bool = True
    compute_speedup: Mapping[str, float] = field(default_factory=dict)
    token_overhead_s: float = 0.0
    scaleup_domain_gpus: int = 8
    scaleout_bytes_per_s: float = 50e9
    vector_flops_per_s: float = 0.0
    link_topology: str = "ring"

    @property
    def full_mesh(self) -> float:
        """1.0 where every GPU of the scale-up domain has its own link to every other (``link_topology =
        "full-mesh"``: the all-reduce is priced as the frameworks' one- and two-shot kernels,
        :mod:`sweepkit.costmodel.allreduce`), else 0.0 (a ring)."""
        return 1.0 if self.link_topology == "full-mesh" else 0.0

    def speedup(self, compute_format: str) -> float:
        """Native compute multiple of ``compute_format`` over bf16 (1.0 where the format is not native)."""
        get_format(compute_format, "compute_format")
        return float(self.compute_speedup.get(compute_format, 1.0))

    @property
    def ridge_flop_per_byte(self) -> float:
        """Achievable ridge point: peak x MFU / (HBM x MBU). H100: 989e12 x 0.55 / (3.35e12 x 0.8) = 203."""
        return self.peak_flops_per_s * self.flops_efficiency / (self.hbm_bytes_per_s * self.bandwidth_efficiency)


def _domain(raw: dict) -> int:
    value = raw.get("scaleup_domain_gpus", 8)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1 << 20:
        raise ValueError(f"scaleup_domain_gpus = {value!r} is not allowed; expected an integer in [1, 1,048,576]")
    return value


TOPOLOGIES = ("ring", "full-mesh")
"""Allowed ``link_topology`` values."""


def _topology(raw: dict) -> str:
    value = raw.get("link_topology", "ring")
    if value not in TOPOLOGIES:
        raise ValueError(f"link_topology = {value!r} is not allowed; expected one of {', '.join(TOPOLOGIES)}")
    return value


def _device(name: str, raw: dict) -> Device:
    kw = {k: float(raw[k]) for k in _NUMERIC}
    return Device(name=name, description=raw["description"], source=raw["source"], link=raw["link"],
                  price_illustrative=bool(raw.get("price_illustrative", True)),
                  token_overhead_s=float(raw.get("token_overhead_s", 0.0)),
                  scaleup_domain_gpus=_domain(raw), scaleout_bytes_per_s=float(raw.get("scaleout_bytes_per_s", 50e9)),
                  vector_flops_per_s=float(raw.get("vector_flops_per_s", 0.0)), link_topology=_topology(raw),
                  compute_speedup=MappingProxyType({k: float(v) for k, v in raw.get("compute_speedup", {}).items()}),
                  **kw)


@cache
def load_devices() -> dict[str, Device]:
    raw = read_packaged("devices.toml")["devices"]
    return {k: _device(k, v) for k, v in raw.items()}


_OVERLAY: dict[str, Device] = {}
"""Devices of a user's devices file, in force inside :func:`devices_file` (they shadow catalogue names)."""


def load_devices_file(path: str | Path) -> dict[str, Device]:
    """Read a devices TOML file in the ``devices.toml`` format (``sweepkit calibrate`` writes one).

    Raises:
      InputError: a missing or unreadable file, bad TOML, or an entry without a field the catalogue needs.
    """
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such devices file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a valid TOML devices file ({exc})") from None
    entries = raw.get("devices")
    if not isinstance(entries, dict) or not entries:
        raise InputError(f"{path}: expected [devices.NAME] tables in the devices.toml format")
    out = {}
    for name, entry in entries.items():
        needed = [k for k in (*_NUMERIC, "description", "source", "link") if k not in entry]
        if needed:
            raise InputError(f"{path}: [devices.{name}] is missing {', '.join(needed)}")
        try:
            out[name] = _device(name, entry)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{path}: [devices.{name}]: {exc}") from None
    return out


@contextlib.contextmanager
def devices_file(path: str | Path | None) -> Iterator[dict[str, Device]]:
    """Within the block, :func:`get_device` and :func:`device_names` also know the devices of ``path``
    (None: the catalogue alone). Yields the file's devices."""
    extra = load_devices_file(path) if path is not None else {}
    saved = dict(_OVERLAY)
    _OVERLAY.update(extra)
    try:
        yield extra
    finally:
        _OVERLAY.clear()
        _OVERLAY.update(saved)


def device_names() -> list[str]:
    return list({**load_devices(), **_OVERLAY})


def device_key(name: str) -> str | None:
    """The device name a spelling stands for (``GB200 NVL72`` -> ``GB200``; a devices file's names too), or None."""
    return resolve(name, "devices", {**load_devices(), **_OVERLAY})


def get_device(name: str, field: str = "device") -> Device:
    """Look a device up by name; unknown names raise :class:`InputError` listing the known ones."""
    devices = {**load_devices(), **_OVERLAY}
    key = resolve(name, "devices", devices)
    if key is None:
        raise unknown(field, name, devices)
    return devices[key]
