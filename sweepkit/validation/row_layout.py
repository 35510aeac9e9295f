"""The parallel layout of a measured row: its tp, pp, ep and dp as a serving cluster's replica.

Serving engines state their degrees in two conventions; a row's (gpus G, tp, pp, ep, dp) is read as:

* SGLang DP attention (``--tp-size n --dp-size d --enable-dp-attention``: tp counts every GPU of the
  replica, each attention rank has tp / d of them): dp > 1 and tp x dp x pp > G, with dp dividing tp, gives
  attention tp' = tp / dp and n = tp GPUs per stage;
* otherwise tp' = tp and n = tp x dp GPUs per stage (vLLM ``--data-parallel-size`` with
  ``--enable-expert-parallel``: ep = tp x dp).

Then, for a mixture-of-experts model (:func:`sweepkit.costmodel.layout.check_layout` for the rules):

    dp > 1, ep = 1         the experts tensor-parallel over the n GPUs of the stage on every rank's gathered
                           tokens (SGLang ``--enable-dp-attention`` without an all-to-all backend: "DP for
                           attention, TP for FFN"; vLLM's DP x TP group without ``--enable-expert-parallel``),
                           priced by :func:`sweepkit.costmodel.moe_comm.moe_gather`; where the row's ``flags:``
                           name an all-to-all backend (:data:`ALL_TO_ALL_FLAGS`: ``--moe-a2a-backend deepep``,
                           ``--enable-deepep-moe``, ``--enable-expert-parallel``), ep = n (DEP)
    dp = 1, ep > tp'       dp = ep / tp' (wide EP: each GPU beyond the attention-TP group is an attention
                           data-parallel rank, the DEP layout of DeepSeek-V3 and LMSYS's 96-H100 deployment)
    dp = 1, ep | tp'       experts inside the tensor-parallel group

and for a dense model dp > 1 is plain data parallelism (more instances). An SGLang row whose ``flags:`` name
``--enable-dp-attention`` but no ``--dp-size`` (``--dp``) runs attention tensor-parallel over its tp GPUs
(:func:`sglang_dp_unset`: dp = 1): the DP degree defaults to 1 and SGLang turns DP attention off at dp 1. An EP degree that does not divide the
E routed experts is read as EPLB with the fewest redundant experts R = (-E) mod ep that make it divide the
E + R slots: LMSYS's EP72 decode of DeepSeek-V3 holds 256 + 32 = 288 slots, as deployed, and its GB200
EP48 decode the same 288. The cluster holds
G / (n x pp) instances; one spanning more GPUs than the device's scale-up domain sits on
ceil(n x pp / domain) nodes joined by the device's scale-out network. A row that fits none of these raises
InputError saying why (reported as "not modelled: <why>").

References:
  SGLang server arguments (docs.sglang.ai, --enable-dp-attention: dp-size attention ranks within tp-size GPUs;
  docs.sglang.io cookbook "server arguments": enable_dp_attention "DP for attention, TP for FFN (hybrid)").
  vLLM expert-parallel deployment (docs.vllm.ai, serving/expert_parallel_deployment: EP = DP x TP).
  LMSYS, "Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs",
  lmsys.org/blog/2025-05-05-large-scale-ep (DP attention with EP72 decode over 9 nodes).
  SGLang pull 4390 (github.com/sgl-project/sglang, "Improve DP attention", 2025-03: "you need to explicitly
  specify --dp and --tp"); python/sglang/srt/server_args.py (``dp_size = 1`` by default;
  ``_handle_data_parallelism``: dp_size == 1 sets enable_dp_attention = False).
"""

from __future__ import annotations

import dataclasses
import re

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import framework_key
from sweepkit.costmodel.layout import check_layout, scale_up_domain
from sweepkit.errors import InputError
from sweepkit.validation.levers import flags
from sweepkit.validation.measurements import Measurement

ALL_TO_ALL_FLAGS = re.compile(r"--moe-a2a-backend[ =](?!none\b)\w+|--enable-deepep-moe|--enable-expert-parallel\b")
"""Serving flags that route a DP-attention replica's tokens to their experts by all-to-alls (ep = n)."""


TRTLLM_ALL_TO_ALL = re.compile(r"\bWIDEEP\b|\bMNNVL\b|alltoall|all-to-all", re.I)
"""What names an all-to-all MoE exchange in a TensorRT-LLM row's framework or notes (the wide-EP backend, the
MNNVL all-to-all); without it TensorRT-LLM's attention-DP MoE all-gathers and reduce-scatters."""


def moe_exchange(m: Measurement) -> str:
    """How the row's DEP layout moves tokens to their experts (:data:`sweepkit.costmodel.layout.EXCHANGES`):
    ``gather`` for a TensorRT-LLM row that names no all-to-all (its attention-DP MoE all-gathers every rank's
    quantized tokens and reduce-scatters the output: tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py,
    ``use_dp and parallel_size > 1``), else ``all-to-all``.

    Example:
      The DeepSeek-R1 guide's B200 DEP8 rows (CUTLASS MoE, ``enable_attention_dp: true``): ``gather``; an SGLang
      row with ``--moe-a2a-backend deepep``: ``all-to-all`` (tests/validation/test_row_layout.py).
    """
    text = f"{m.framework or ''} {m.notes or ''}"
    trtllm = framework_key(m.framework) == "tensorrt-llm"
    return "gather" if trtllm and TRTLLM_ALL_TO_ALL.search(text) is None else "all-to-all"


DP_SIZE_FLAG = re.compile(r"--(?:dp-size|dp|data-parallel-size)[ =]\d+")
"""SGLang's flags that set the DP degree (``--dp-size N``, its alias ``--dp N``)."""


def sglang_dp_unset(m: Measurement) -> bool:
    """Whether ``m`` is an SGLang row whose ``flags:`` name ``--enable-dp-attention`` and no DP degree: SGLang
    then runs dp = 1, attention tensor-parallel over the tp GPUs (module docstring), whatever ``dp`` the row
    states.

    Args:
      m: one measured row; its ``framework`` and the ``flags:`` of its notes are read.

    Returns:
      True where SGLang runs the row at dp = 1 despite ``--enable-dp-attention`` (no ``--dp-size`` / ``--dp``).

    Example:
      GPUStack's DeepSeek-R1 on 8 H200, SGLang v0.5.3 ``--tp 8 --enable-dp-attention`` (its 7.6 % gain over
      ``--tp 8`` on ShareGPT is that of the same layout): True; ``--tp-size 8 --dp-size 8
      --enable-dp-attention``: False (tests/validation/test_row_layout.py).

    References:
      SGLang pull 4390 (github.com/sgl-project/sglang) and python/sglang/srt/server_args.py
      (``_handle_data_parallelism``).
    """
    named = flags(m).replace("_", "-")
    return (framework_key(m.framework) == "sglang" and "--enable-dp-attention" in named
            and DP_SIZE_FLAG.search(named) is None)


@dataclasses.dataclass(frozen=True)
class RowLayout:
    """Degrees of one measured row's replicas.

    Attributes:
      instances: replicas.  tp: attention tensor-parallel GPUs.  dp: attention data-parallel ranks.
      ep: expert-parallel ranks.  pp: pipeline stages.  nodes: scale-up domains of the cluster (0: within one
        domain per replica, the device's).  redundant_experts: R, EPLB replicas beyond the routed experts.
    """

    instances: int
    tp: int
    dp: int
    ep: int
    pp: int
    nodes: int
    redundant_experts: int = 0


def row_layout(m: Measurement) -> RowLayout:
    """The :class:`RowLayout` of ``m`` (module docstring); InputError names what cannot be expressed.

    Example:
      >>> from sweepkit.validation import parse_measurements
      >>> csv = ("source,device,model,metric,value,unit,gpus,tp,dp,input_tokens,output_tokens,request_rate,notes\\n"
      ...        "demo,H200,deepseek-v3,total_throughput,1,tok/s,8,8,8,128,4,inf,flags: --tp 8 --dp 8 --enable-dp-attention\\n")
      >>> row_layout(parse_measurements(csv, "demo.csv")[0])
      RowLayout(instances=1, tp=1, dp=8, ep=1, pp=1, nodes=0, redundant_experts=0)
    """
    model, device = get_model(m.model), get_device(m.device)
    where = f"{m.source} row {m.row}"
    tp, dp, ep, pp = m.tp, (1 if sglang_dp_unset(m) else m.dp), m.ep, m.pp
    if dp > 1 and tp * dp * pp > m.gpus and tp % dp == 0:
        tp = tp // dp
    if not model.is_moe:
        if ep > 1:
            raise InputError(f"{where}: ep = {ep} is not allowed; {model.name} is dense (no routed experts): expected ep = 1")
        per = tp * pp
        if m.gpus % per:
            raise InputError(f"{where}: gpus = {m.gpus} is not a multiple of tp x pp = {per}")
        dp = 1
    else:
        if dp > 1 and ep == 1 and ALL_TO_ALL_FLAGS.search(flags(m).replace("_", "-")):
            ep = tp * dp
        elif dp == 1 and ep > tp:
            if ep % tp:
                raise InputError(f"{where}: ep = {ep} is not a multiple of tp = {tp} (wide EP needs whole "
                                 f"attention ranks)")
            dp = ep // tp
        per = tp * dp * pp
        if m.gpus % per:
            raise InputError(f"{where}: gpus = {m.gpus} is not a multiple of tp x dp x pp = {per}")
    domain = scale_up_domain(device)
    replica = tp * dp * pp
    instances = m.gpus // replica
    nodes = 0
    if replica > domain:
        per_replica = -(-replica // domain)
        if replica % per_replica:
            raise InputError(f"{where}: {replica} GPUs per replica do not split evenly over {per_replica} nodes of "
                             f"{device.name}'s scale-up domain of {domain}")
        nodes = instances * per_replica
    redundant = -model.n_experts % ep if model.is_moe and ep > 1 else 0
    check_layout(model, device, tp, dp, ep, where, m.gpus // nodes if nodes else None, redundant)
    return RowLayout(instances=instances, tp=tp, dp=dp, ep=ep, pp=pp, nodes=nodes, redundant_experts=redundant)
