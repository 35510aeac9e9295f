"""What a lever's serving layout is, in words: the mode and pools the what-if page shows for each preset.

A colocated lever runs ``instances`` copies of the model, each on ``tp`` (x ``pp``) GPUs; a disaggregated one a
prefill pool of ``prefill_instances`` x TP ``prefill_tp`` and a decode pool of ``instances`` x TP ``tp``, the KV
handed from one to the other (:mod:`sweepkit.serving.levers`). A field the lever leaves out keeps the cluster's
value.
"""

from __future__ import annotations

from sweepkit.serving.cluster import Cluster
from sweepkit.serving.levers import Lever


def _pool(instances: int, tp: int, pp: int = 1, microbatches: int | None = None) -> str:
    if pp == 1:
        return f"{instances} x TP{tp}"
    mb = pp if microbatches is None else microbatches
    return f"{instances} x (TP{tp}, PP{pp}), {mb} micro-batch{'' if mb == 1 else 'es'}"


def layout_label(lever: Lever, cluster: Cluster) -> str:
    """The lever's serving mode and layout on ``cluster``, e.g. ``colocated, 2 x TP4`` or
    ``disaggregated 1P:1D (prefill 1 x TP4, decode 1 x TP4, push hand-off)``.

    Args:
      lever: a lever (a preset of the levers file or a custom one).  cluster: the baseline cluster.

    Returns:
      One line: the mode, then the pool(s) with instances, tensor- and pipeline-parallel degrees.

    Example:
      >>> from sweepkit.serving.cluster import load_cluster
      >>> layout_label(Lever("tp8", instances=1, tp=8), load_cluster())
      'colocated, 1 x TP8'
    """
    instances = lever.instances if lever.instances is not None else cluster.instances
    tp = lever.tp if lever.tp is not None else cluster.tp
    pp = lever.pp if lever.pp is not None else cluster.pp
    decode = _pool(instances, tp, pp, lever.microbatches)
    if lever.mode != "disagg":
        return f"colocated, {decode}"
    prefill_n = lever.prefill_instances if lever.prefill_instances is not None else 1
    prefill_tp = lever.prefill_tp if lever.prefill_tp is not None else tp
    return (f"disaggregated {prefill_n}P:{instances}D (prefill {_pool(prefill_n, prefill_tp)}, decode {decode}, "
            f"{lever.handoff or 'pull'} hand-off)")
