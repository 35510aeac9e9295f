"""Power-aware roofline: the time and energy of one forward pass from its FLOPs and HBM bytes.

Maths (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim; notation in docs/notation.md). On n devices with achievable fractions
mfu, mbu and a native compute speed-up k of the compute format:

    t_c = F / (peak * mfu * n * k)          t_m = Bytes / (hbm * mbu * n)
    E_c = F * e_flop / k                    E_m = Bytes * e_byte
    budget = (TDP - P_idle) * n             (dynamic power the devices may draw)

At compute clock fraction s (0.4 <= s <= 1) the pass takes t(s) = max(t_c / s, t_m) and draws dynamic power
P(s) = (E_c s^2 + E_m) / t(s), which increases monotonically in s. If P(1) <= budget the pass runs at full
clock (bound ``compute`` if t_c >= t_m else ``memory``); otherwise it is ``power`` bound and s solves
P(s) = budget: on the memory side s^2 = (budget t_m - E_m) / E_c, on the compute side the depressed cubic
E_c s^3 + E_m s - budget t_c = 0 (one real root; Cardano's formula in closed form, solved here by
six Newton steps from s = 1, which converge monotonically on this convex, increasing cubic to < 1e-6
relative on [s_min, 1] and avoid the slow cube root). Below the clock floor s_min = 0.4 the pass is
stretched until its energy fits the budget: t = (E_c s_min^2 + E_m) / budget.

Pass time adds a fixed overhead (target passes only); energy = dynamic + P_idle * n * time.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from sweepkit.costmodel.arrays import DeviceArrays

BOUNDS = ("memory", "compute", "power")
"""Bound codes: index 0 memory, 1 compute, 2 power."""

CLOCK_FLOOR = 0.4
"""Lowest compute clock fraction under the power cap (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim: s_min 0.4)."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PassCost:
    """Cost of one forward pass (or the sum of several): seconds, joules, bound code, raw work."""

    t_s: jax.Array
    energy_j: jax.Array
    bound: jax.Array
    flops: jax.Array
    bytes: jax.Array

    def __add__(self, other: PassCost) -> PassCost:
        """Sequential composition: times and energies add; the bound of the longer part is kept."""
        bound = jnp.where(self.t_s >= other.t_s, self.bound, other.bound)
        return PassCost(self.t_s + other.t_s, self.energy_j + other.energy_j, bound,
                        self.flops + other.flops, self.bytes + other.bytes)


def _cardano_root(p: jax.Array, q: jax.Array) -> jax.Array:
    """The real root of s^3 + p s + q = 0 for p >= 0 (one real root), without cancellation.

    s = u - p / (3u), u = cbrt(-q/2 + sqrt(q^2/4 + p^3/27)).
    """
    disc = jnp.sqrt(q * q / 4.0 + p * p * p / 27.0)
    u = jnp.cbrt(-q / 2.0 + disc)
    safe_u = jnp.where(u == 0, 1.0, u)
    return jnp.where(u == 0, 0.0, u - p / (3.0 * safe_u))


NEWTON_STEPS = 6


def cubic_root_newton(p: jax.Array, q: jax.Array) -> jax.Array:
    """Root of s^3 + p s + q = 0 (p >= 0, root in [CLOCK_FLOOR, 1]) by Newton from s = 1; else CLOCK_FLOOR.

    Where f(CLOCK_FLOOR) >= 0 the root lies at or below the floor, and the floor is returned.
    """
    s = jax.lax.fori_loop(0, NEWTON_STEPS, lambda _, s: s - (s * s * s + p * s + q) / (3.0 * s * s + p),
                          jnp.ones_like(p))
    floor = CLOCK_FLOOR
    return jnp.where(floor ** 3 + p * floor + q >= 0, floor, s)


def roofline(flops: jax.Array, bytes_: jax.Array, dev: DeviceArrays, n_devices: jax.Array,
             compute_speedup: jax.Array, overhead_s: jax.Array) -> PassCost:
    """Time and energy of one pass under the roofline and the power cap.

    Args:
      flops: F, FLOPs of the pass (all devices together), >= 0.
      bytes_: HBM bytes moved (all devices together), >= 0.
      dev: the device (per chip).
      n_devices: n >= 1, devices sharing the pass (tensor parallel).
      compute_speedup: k >= 1, native multiple of the compute format over bf16.
      overhead_s: fixed seconds added to the pass (0.5 ms for target passes, 0 for drafts).

    Returns:
      :class:`PassCost` (t_s includes the overhead; energy static + dynamic).

    Example:
      H100, Llama-3-8B decode at batch 1, context 512: bytes 15.0766e9 -> 5.626 ms + 0.5 ms = 6.126 ms,
      bound memory (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim, hand check).

    References:
      Williams, Waterman, Patterson, "Roofline", CACM 2009; github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim (power model).
    """
    peak = dev.peak_flops_per_s * dev.flops_efficiency * n_devices * compute_speedup
    bw = dev.hbm_bytes_per_s * dev.bandwidth_efficiency * n_devices
    t_c = flops / peak
    t_m = bytes_ / bw
    e_c = flops * dev.energy_per_flop_j / compute_speedup
    e_m = bytes_ * dev.energy_per_hbm_byte_j
    budget = (dev.tdp_w - dev.idle_w) * n_devices
    t_full = jnp.maximum(t_c, t_m)
    over = (e_c + e_m) > budget * t_full

    safe_ec = jnp.where(e_c > 0, e_c, 1.0)
    s_mem = jnp.sqrt(jnp.clip((budget * t_m - e_m) / safe_ec, 0.0, 1.0))
    s_cmp = cubic_root_newton(e_m / safe_ec, -budget * t_c / safe_ec)
    s_power = jnp.where(s_mem * t_m >= t_c, s_mem, s_cmp)
    s = jnp.where(over, jnp.clip(s_power, CLOCK_FLOOR, 1.0), 1.0)
    safe_s = jnp.where(s > 0, s, 1.0)
    e_dyn = e_c * s * s + e_m
    t_busy = jnp.maximum(jnp.maximum(t_c / safe_s, t_m), jnp.where(over, e_dyn / budget, 0.0))
    bound = jnp.where(over, 2, jnp.where(t_c >= t_m, 1, 0)).astype(jnp.int32)
    t = t_busy + overhead_s
    energy = e_dyn + dev.idle_w * n_devices * t
    return PassCost(t_s=t, energy_j=energy, bound=bound, flops=flops, bytes=bytes_)
