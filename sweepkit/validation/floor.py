"""The physical floor of a decode step: a measured per-token latency below it cannot be the stated setup's.

Every decode step streams at least the weights one token multiplies from HBM (a batch of one row touches
only its experts; a larger batch touches more), so with the row's GPUs all reading at their datasheet peak

    t_floor = P_mm x min(w, w_e) / (n_gpus x B_hbm)

P_mm is the model's matmul parameters (:attr:`sweepkit.catalogue.models.Model.matmul_params`: dense layers,
k routed + shared experts, the LM head), w the bytes per value of the row's weight format, w_e its experts'
where the model keeps them in another format, n_gpus the row's GPUs and B_hbm the device's peak HBM bytes/s.
Without speculative decoding a request gains one token per step, so its TPOT, each inter-token gap and a
step time are >= t_floor. A row below it (tokens streamed in bursts, a mislabelled unit) measures something
other than what it states; it is listed as not modelled, with both figures, and stays out of every median.
Rows with a draft are priced through their acceptance (:mod:`sweepkit.validation.points`) and not checked.

A per-token latency above the floor can still time something else: a harness that timestamps the chunks a
stream arrives in (its median inter-token latency 0.00 ms) reports a TPOT that is not a decode step's. Rows
whose notes say so (:data:`CHUNK_TIMED`) are listed as not modelled too (:func:`chunk_timed`).
"""

from __future__ import annotations

from sweepkit.catalogue import get_device, get_format, get_model
from sweepkit.validation.measurements import Measurement

PER_TOKEN = ("tpot", "itl", "step_time")
"""Metrics bounded below by one decode step (a request's time per output token, a gap, a pass)."""


def step_floor_s(m: Measurement) -> float:
    """Shortest decode step of ``m``'s model, weight format, device and GPU count, s (module docstring).

    Args:
      m: a measurement naming a catalogue model and device.

    Returns:
      t_floor, seconds.

    Example:
      >>> from sweepkit.validation import parse_measurements
      >>> m = parse_measurements("source,device,model,metric,value,unit\\n"
      ...                        "s,H100,llama-3.1-8b,tpot,5,ms\\n", "demo.csv")[0]
      >>> round(step_floor_s(m) * 1e3, 2)          # 7.50 B params x 2 B / 3.35 TB/s
      4.48

    References:
      Williams, Waterman & Patterson, "Roofline", CACM 52(4), 2009 (a pass is at least its bytes over the
      memory bandwidth); NVIDIA H100 datasheet (3.35 TB/s HBM3, SXM).
    """
    model, dev = get_model(m.model), get_device(m.device)
    w = get_format(m.weight_format, "weight_format").bytes_per_value
    if model.expert_weight_format:
        w = min(w, get_format(model.expert_weight_format).bytes_per_value)
    return model.matmul_params * w / (max(m.gpus, 1) * dev.hbm_bytes_per_s)


CHUNK_TIMED = "tokens timed as they arrive in chunks"
"""The phrase a row's notes carry when its harness timestamps streamed chunks, not tokens: its benchmark output
shows a median inter-token latency of 0.00 ms, so its TPOT and ITL do not time decode steps
(benchmarks/data/build_measured.py ``CHUNK_TIMED_PAGES``)."""


def chunk_timed(m: Measurement) -> str:
    """Why ``m`` is not modelled when its per-token latency was timed per streamed chunk, else ''.

    Example:
      >>> from sweepkit.validation import parse_measurements
      >>> m = parse_measurements("source,device,model,metric,value,unit,notes\\n"
      ...                        "s,H100,llama-3.1-8b,tpot,10,ms,harness: guidellm; " + CHUNK_TIMED + "\\n",
      ...                        "demo.csv")[0]
      >>> chunk_timed(m).split(" (")[0]
      "not modelled: the source's harness timed tokens as they arrived in chunks"
    """
    if m.metric not in ("tpot", "itl") or CHUNK_TIMED not in m.notes:
        return ""
    return (f"not modelled: the source's harness timed tokens as they arrived in chunks (its median ITL is "
            f"0.00 ms), so its {m.metric} does not time decode steps")


def below_floor(m: Measurement) -> str:
    """Why ``m`` is not modelled when its per-token latency is below :func:`step_floor_s`, else ''.

    Example:
      >>> from sweepkit.validation import parse_measurements
      >>> m = parse_measurements("source,device,model,metric,value,unit\\n"
      ...                        "s,H100,llama-3.1-8b,tpot,0.3,ms\\n", "demo.csv")[0]
      >>> below_floor(m).split(" (")[0]
      'not modelled: the measured tpot, 0.30 ms, is below the physical floor of a decode step, 4.48 ms'
    """
    if m.metric not in PER_TOKEN or m.draft != "none" or m.unknown:
        return ""
    floor_s = step_floor_s(m)
    if m.value_si >= floor_s:
        return ""
    return (f"not modelled: the measured {m.metric}, {m.value_si * 1e3:.2f} ms, is below the physical floor of a "
            f"decode step, {floor_s * 1e3:.2f} ms (the active weights read once at peak HBM bandwidth on "
            f"{m.gpus} GPU{'s' if m.gpus > 1 else ''})")
