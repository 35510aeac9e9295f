"""Uncertainty bands: a grid's ``[bands]`` table, and its seeded low-discrepancy design of draws (no JAX).

A grid file can say how uncertain its inputs are::

    [bands]
    draws = 256                                        # N draws per grid point (2..4096)
    seed = 0                                           # the design's seed (integer >= 0)
    alpha = { low = -0.05, high = 0.05 }               # added to every alpha_i, clipped to [0, 1]
    bandwidth_efficiency = { low = 0.9, high = 1.05 }  # multiplies the device's value
    flops_efficiency = { dist = "normal", sd = 0.05 }  # factor 1 + N(0, sd^2)

Every grid point is then evaluated at its own values (the ordinary columns) and at N perturbed copies, in
the same vmapped program; the decode table stores p10 / p50 / p90 of the speed-up, time and energy per
token and E, and the share of draws in which speculation is faster than plain decoding. A zero-width
range (low = high = 0, or 1 for a factor) gives bands equal to the point result.

``alpha`` is an offset (it applies to every acceptance model of the grid); every other parameter is a
factor on the device's catalogue value (:data:`FACTORS`). ``{ low, high }`` is uniform; ``{ dist =
"normal", sd }`` has mean 0 (offset) or 1 (factor).

The design: the R_d Kronecker sequence x_n = frac(s + n g), g_j = phi_d^-j with phi_d the root of
x^(d+1) = x + 1 (Roberts 2018, "The unreasonable effectiveness of quasirandom sequences"), shifted by a
seeded uniform s (Cranley & Patterson 1976), one dimension per parameter, mapped through each inverse CDF.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from sweepkit.errors import InputError, bad_value

OFFSETS = ("alpha",)
"""Parameters drawn as an offset added to the point's value."""
FACTORS = ("flops_efficiency", "bandwidth_efficiency", "pass_overhead_s", "tdp_w", "idle_w", "energy_per_flop_j",
           "energy_per_hbm_byte_j", "link_bytes_per_s", "link_latency_s")
"""Parameters drawn as a factor on the device's catalogue value (``sweepkit devices``)."""
PARAMS = OFFSETS + FACTORS
MAX_DRAWS = 4096
QUANTILES = (("p10", 0.1), ("p50", 0.5), ("p90", 0.9))
BANDED = ("tokens_per_pass", "s_per_token_spec", "speedup", "energy_per_token_spec_j")
"""Decode outputs that get p10 / p50 / p90 columns."""
BAND_COLUMNS = tuple(f"{m}_{q}" for m in BANDED for q, _ in QUANTILES) + ("share_spec_faster",)


@dataclass(frozen=True)
class Bands:
    """A validated ``[bands]`` table: ``draws`` N, ``seed``, and parameter -> (dist, a, b) with dist
    ``uniform`` (a = low, b = high) or ``normal`` (a = mean, b = sd)."""

    draws: int
    seed: int
    params: dict[str, tuple[str, float, float]]

    def samples(self) -> dict[str, np.ndarray]:
        """Parameter -> [N] float64 draws (offsets for :data:`OFFSETS`, factors otherwise)."""
        u = design(self.draws, len(self.params), self.seed)
        out = {}
        for j, (name, (dist, a, b)) in enumerate(sorted(self.params.items())):
            if dist == "uniform":
                out[name] = a + (b - a) * u[:, j]
            else:
                inv = NormalDist().inv_cdf
                out[name] = a + b * np.array([inv(x) for x in np.clip(u[:, j], 1e-12, 1 - 1e-12)])
        return out


def design(n: int, d: int, seed: int) -> np.ndarray:
    """[n, d] points in [0, 1)^d: the R_d sequence with a seeded Cranley-Patterson shift."""
    phi = 2.0
    for _ in range(64):                                   # x^(d+1) = x + 1, by fixed-point iteration
        phi = (1.0 + phi) ** (1.0 / (d + 1))
    g = phi ** -np.arange(1, d + 1, dtype=np.float64)
    shift = np.random.default_rng(seed).random(d)
    return np.mod(shift[None, :] + np.arange(1, n + 1, dtype=np.float64)[:, None] * g[None, :], 1.0)


def parse_bands(raw: Any, where: str, table: str = "bands", factors: tuple[str, ...] = FACTORS) -> Bands | None:
    """Validate a ``[bands]`` table (None when absent); one-line InputErrors otherwise.

    ``table`` names it in messages (``serving.bands`` for a serving grid) and ``factors`` lists the factor
    parameters it may give (a serving grid adds ``price``)."""
    if raw is None:
        return None
    params_known = OFFSETS + tuple(factors)
    if not isinstance(raw, dict):
        raise bad_value(table, raw, f"a table [{table}] of draws, seed and parameter = {{ low, high }}", where=where)
    draws, seed = raw.get("draws", 256), raw.get("seed", 0)
    if not (_is_int(draws) and 2 <= draws <= MAX_DRAWS):
        raise bad_value(f"{table}.draws", draws, f"an integer in [2, {MAX_DRAWS}]", where=where)
    if not (_is_int(seed) and seed >= 0):
        raise bad_value(f"{table}.seed", seed, "an integer >= 0", where=where)
    params = {}
    for name, spec in raw.items():
        if name in ("draws", "seed"):
            continue
        if name not in params_known:
            raise bad_value(f"{table}.{name}", spec, "a parameter among " + ", ".join(params_known), where=where)
        params[name] = _param(name, spec, where, f"{table}.{name}")
    if not params:
        raise InputError(f"{where}: {table} has no parameter; give at least one of " + ", ".join(params_known))
    return Bands(draws=int(draws), seed=int(seed), params=params)


def _param(name: str, spec: Any, where: str, field: str) -> tuple[str, float, float]:
    centre = 0.0 if name in OFFSETS else 1.0
    if not isinstance(spec, dict):
        raise bad_value(field, spec, "a table { low, high } or { dist = \"normal\", sd }", where=where)
    dist = spec.get("dist", "uniform")
    keys = {"uniform": ("low", "high"), "normal": ("sd",)}
    if dist not in keys:
        raise bad_value(f"{field}.dist", dist, tuple(keys), where=where)
    for key in spec:
        if key != "dist" and key not in keys[dist]:
            raise bad_value(f"{field}.{key}", spec[key], f"a key of a {dist} band: " + ", ".join(keys[dist]),
                            where=where)
    for key in keys[dist]:
        if key not in spec or not _is_real(spec[key]):
            raise bad_value(f"{field}.{key}", spec.get(key), "a finite number", where=where)
    if dist == "normal":
        if spec["sd"] < 0:
            raise bad_value(f"{field}.sd", spec["sd"], "a number >= 0", where=where)
        return "normal", centre, float(spec["sd"])
    low, high = float(spec["low"]), float(spec["high"])
    if low > high or (name not in OFFSETS and low < 0):
        allowed = "low <= high" + (" and low >= 0 (a factor)" if name not in OFFSETS else "")
        raise bad_value(f"{field}.low", low, allowed, where=where)
    return "uniform", low, high


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any) -> bool:
    return _is_real(v) and float(v).is_integer()
