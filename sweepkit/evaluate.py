"""``sweepkit.evaluate``: one decode point by name, validated, in float64."""

from __future__ import annotations

import math
import numbers
import os
from typing import Any

from sweepkit.acceptance import get_table, parametric
from sweepkit.catalogue import devices_file as devices_file_scope
from sweepkit.catalogue import get_device, get_draft, get_format, get_model, load_models_file
from sweepkit.checks import check_alpha, check_int, check_tp, gamma_bucket
from sweepkit.errors import bad_value
from sweepkit.sweep.grid import INT_MAX


def evaluate(*, device: str, model: str, draft: str = "none", batch: int = 1, context: int = 512,
             gamma: int = 3, alpha: float = 0.7, tp: int = 1, weight_format: str = "bf16",
             kv_format: str = "bf16", compute_format: str = "bf16", decay: float = 1.0,
             acceptance: str | None = None, models_file: str | None = None,
             devices_file: str | None = None) -> dict[str, Any]:
    """Evaluate one decode point: plain against speculative decoding.

    Args:
      device: catalogue device (``sweepkit devices``).
      model: catalogue model (``sweepkit models``) or the path of a HF ``config.json``.
      draft: ``none``, ``mtp`` or a catalogue model sharing the target's vocabulary.
      batch: B rows >= 1.  context: S tokens per row >= 1.  gamma: draft length, integer >= 0.
      alpha: acceptance per drafted token in [0, 1] (alpha_1 with a decay).  tp: tensor-parallel degree >= 1.
      weight_format, kv_format, compute_format: ``bf16``, ``fp8``, ``int8``, ``int4``, ``fp4``.
      decay: r >= 0, per-position acceptance alpha_i = alpha r^(i-1) (1: i.i.d.).
      acceptance: a named per-position table (``sweepkit/catalogue/acceptance.toml``) instead of alpha, decay.
      models_file: a TOML file of ``[models.<name>]`` tables (HF config fields) whose names ``model`` and
        ``draft`` may then use.
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
    names = dict(device=device, model=model, draft=draft, weight_format=weight_format, kv_format=kv_format,
                 compute_format=compute_format)
    for arg, value in names.items():
        if not isinstance(value, str):
            raise bad_value(arg, value, "one name as a string (evaluate takes one point; a grid file sweeps "
                                        "several: sweepkit run)")
    for arg, value in dict(acceptance=acceptance, models_file=models_file, devices_file=devices_file).items():
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise bad_value(arg, value, "a string (a name or a file path) or None")
    if models_file is not None:
        load_models_file(models_file)
    with devices_file_scope(devices_file):
        dev = get_device(device)
    target = get_model(model)
    drf = get_draft(draft, target)
    wfmt = get_format(weight_format, "weight_format")
    kfmt = get_format(kv_format, "kv_format")
    get_format(compute_format, "compute_format")
    batch = check_int("batch", batch, 1, INT_MAX["batch"])
    context = check_int("context", context, 1, INT_MAX["context"])
    gamma = check_int("gamma", gamma, 0, INT_MAX["gamma"])
    tp = check_tp(check_int("tp", tp, 1, INT_MAX["tp"]), target)
    alpha = check_alpha(alpha)
    if not (isinstance(decay, numbers.Real) and not isinstance(decay, bool) and math.isfinite(decay) and decay >= 0):
        raise bad_value("decay", decay, "a number >= 0 (alpha_i = alpha r^(i-1))")
    model = parametric(alpha, float(decay)) if acceptance is None else get_table(acceptance)
    alphas = model.alphas_for(gamma_bucket(gamma))
    return _point(dev, target, drf, wfmt, kfmt, compute_format, batch, context, gamma, alphas, tp)


def _point(dev, target, drf, wfmt, kfmt, compute_format: str, batch: int, context: int, gamma: int,
           alphas, tp: int) -> dict[str, Any]:
    """The validated point through the float64 cost model (JAX is imported here, on first use:
    importing sweepkit does not import JAX)."""
    import jax
    import jax.numpy as jnp

    from sweepkit.costmodel.decode import DecodeInputs, decode_point_jit
    from sweepkit.costmodel.roofline import BOUNDS
    from sweepkit.costmodel.steps import instance

    with jax.enable_x64(True):
        f64 = jnp.float64
        p = DecodeInputs(inst=instance(dev, target, drf, tp, wfmt, kfmt, compute_format, gamma, f64,
                                       pipelined=False),
                         batch=jnp.asarray(batch, f64), context=jnp.asarray(context, f64),
                         alphas=jnp.asarray(alphas, f64))
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
