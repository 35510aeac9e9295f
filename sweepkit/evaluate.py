"""``sweepkit.evaluate``: one decode point by name, validated, in float64."""

from __future__ import annotations

import math
import numbers
from typing import Any

import jax
import jax.numpy as jnp

from sweepkit.catalogue import devices_file as devices_file_scope
from sweepkit.catalogue import get_device, get_draft, get_format, get_model
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.decode import DecodeInputs, decode_point_jit
from sweepkit.costmodel.roofline import BOUNDS
from sweepkit.errors import bad_value


def check_int(name: str, value: Any, minimum: int) -> int:
    """An integer (or integer-valued number) >= minimum, else a clear InputError."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
        and float(value).is_integer() and value >= minimum
    if not ok:
        raise bad_value(name, value, f"an integer >= {minimum}")
    return int(value)


def check_alpha(value: Any, name: str = "alpha") -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
        and 0.0 <= value <= 1.0
    if not ok:
        raise bad_value(name, value, "a number in [0, 1]")
    return float(value)


def gamma_bucket(gamma: int) -> int:
    """Static draft-loop length: the next power of two >= gamma (limits recompiles)."""
    return 1 << max(0, (max(gamma, 1) - 1).bit_length())


def evaluate(*, device: str, model: str, draft: str = "none", batch: int = 1, context: int = 512,
             gamma: int = 3, alpha: float = 0.7, tp: int = 1, weight_format: str = "bf16",
             kv_format: str = "bf16", compute_format: str = "bf16",
             devices_file: str | None = None) -> dict[str, Any]:
    """Evaluate one decode point: plain against speculative decoding.

    Args:
      device: catalogue device (``sweepkit devices``).  model: catalogue model (``sweepkit models``).
      draft: ``none``, ``mtp`` or a catalogue model sharing the target's vocabulary.
      batch: B rows >= 1.  context: S tokens per row >= 1.  gamma: draft length, integer >= 0.
      alpha: acceptance per drafted token in [0, 1].  tp: tensor-parallel degree >= 1.
      weight_format, kv_format, compute_format: ``bf16``, ``fp8``, ``int8``, ``int4``, ``fp4``.
      devices_file: a devices TOML (``sweepkit calibrate --out``) whose devices ``device`` may name.

    Returns:
      dict with tokens_per_pass, t_plain_pass_s, t_draft_s, t_verify_pass_s, s_per_token_plain,
      s_per_token_spec, speedup, plain_bound, verify_bound, energy_per_token_plain_j,
      energy_per_token_spec_j, draft_cost_ratio, kv_capacity_tokens, weight_bytes_per_device, fits_in_memory.

    Example:
      >>> r = evaluate(device="H100", model="llama-3-8b", draft="mtp", batch=1, context=512, gamma=3, alpha=0.7)
      >>> round(r["s_per_token_plain"] * 1e3, 3), round(r["s_per_token_spec"] * 1e3, 3), r["verify_bound"]
      (6.126, 3.076, 'memory')
    """
    with devices_file_scope(devices_file):
        dev = get_device(device)
    target = get_model(model)
    drf = get_draft(draft, target)
    wfmt = get_format(weight_format, "weight_format")
    kfmt = get_format(kv_format, "kv_format")
    get_format(compute_format, "compute_format")
    batch = check_int("batch", batch, 1)
    context = check_int("context", context, 1)
    gamma = check_int("gamma", gamma, 0)
    tp = check_int("tp", tp, 1)
    alpha = check_alpha(alpha)
    with jax.enable_x64(True):
        f64 = jnp.float64
        p = DecodeInputs(
            device=device_arrays(dev, f64), target=model_arrays(target, f64), draft=model_arrays(drf, f64),
            tp=jnp.asarray(tp, f64), batch=jnp.asarray(batch, f64), context=jnp.asarray(context, f64),
            gamma=jnp.asarray(gamma, f64), alpha=jnp.asarray(alpha, f64),
            weight_bytes=jnp.asarray(wfmt.bytes_per_value, f64), kv_bytes=jnp.asarray(kfmt.bytes_per_value, f64),
            compute_speedup=jnp.asarray(dev.speedup(compute_format), f64))
        out = jax.device_get(decode_point_jit(p, gamma_bucket(gamma)))
    result: dict[str, Any] = {}
    for key, value in out.items():
        if key.endswith("_bound"):
            result[key] = BOUNDS[int(value)]
        elif key == "fits_in_memory":
            result[key] = bool(value)
        else:
            result[key] = float(value)
    return result
