"""The decode-attention kernel of a measured row's framework release, carried by the profile that prices it.

A row's profile (:func:`sweepkit.validation.serving_points.engine_profile`,
:func:`sweepkit.validation.profiles.row_profile`) prices every pass of the row in the serving engine or the
steady state; :func:`with_decode_kernel` gives it ``vector_decode_eff`` = e_vec of the CUDA-core decode kernel
the row's release runs for the model's attention shape (:func:`sweepkit.catalogue.decode_kernels.vector_decode_eff`),
so decode attention is priced as that kernel runs (:func:`sweepkit.costmodel.efficiency.step_time_by_class`).
Rows of releases that run a tensor-core kernel keep their profile unchanged.
"""

from __future__ import annotations

import dataclasses

from sweepkit.catalogue import get_model
from sweepkit.catalogue.decode_kernels import vector_decode_eff
from sweepkit.catalogue.efficiency import VECTOR_FIELD, Profile
from sweepkit.errors import InputError
from sweepkit.validation.measurements import Measurement

_DERIVED: dict[tuple[int, float], tuple[Profile, Profile]] = {}
"""(id of a profile, e_vec) -> (that profile, it with e_vec): rows of one setup share one profile object (the
serving engine groups rows by it)."""


def row_vector_eff(m: Measurement) -> float:
    """e_vec of the decode kernel ``m``'s framework release runs for ``m``'s model (0.0: tensor cores, or a
    model the catalogue cannot resolve).

    Example:
      >>> from sweepkit.validation import parse_measurements
      >>> m = parse_measurements("source,device,model,metric,value,unit,framework,kv_format\\n"
      ...                        "s,H100,mistral-7b,ttft,1,s,TensorRT-LLM v0.9.0,fp8\\n", "demo.csv")[0]
      >>> row_vector_eff(m), row_vector_eff(dataclasses.replace(m, framework="TensorRT-LLM v0.17"))
      (0.1, 0.0)
    """
    try:
        model = get_model(m.model)
    except (InputError, KeyError):
        return 0.0
    return vector_decode_eff(m.framework, model.n_heads, model.n_kv_heads, model.head_dim, m.kv_format)


def with_decode_kernel(profile: Profile | None, m: Measurement) -> Profile | None:
    """``profile`` with ``vector_decode_eff`` = :func:`row_vector_eff` of ``m`` among its framework overheads
    (``profile`` itself where that is 0 or there is no profile: the reference constants stay as they are)."""
    eff = row_vector_eff(m) if profile is not None else 0.0
    if eff <= 0.0:
        return profile
    key = (id(profile), eff)
    if key not in _DERIVED:
        _DERIVED[key] = (profile, dataclasses.replace(profile, overheads={**profile.overheads, VECTOR_FIELD: eff}))
    return _DERIVED[key][1]
