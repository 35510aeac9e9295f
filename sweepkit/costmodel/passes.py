"""FLOPs and HBM bytes of forward passes (their seconds and joules: :mod:`sweepkit.costmodel.steps`).

Work of a pass on a network (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim), with P_mm matmul params, L layers, q = H d_h,
w = bytes per weight, kv = bytes of KV per token (2 L H_kv d_h x bytes per KV value):

    F     = 2 P_mm T + 2 L q A
    Bytes = P_mm w + T D w + K kv

T new token positions (each gets logits), A "attention pairs" (2 x the positions each new token attends, summed),
K KV tokens read. Per kind of pass:

    decode (b rows, total cached ctx)   T = b,    A = 2 (ctx + b),              K = ctx + b
    verify (c = gamma + 1 positions)    T = b c,  A = c (2 ctx + b (c + 1)),    K = ctx + b c
    prefill chunk (p0 cached, c new)    T = c,    A = c (2 p0 + c + 1),         K = p0 + c

A mixed step adds the T, A, K of its parts and reads the weights once. verify with c = 1 equals decode.

Windowed attention (sliding window or attention chunk of W positions on L_w of the L layers): those layers
read at most min(K, T (W + 1)) KV positions and do at most min(A, 2 T (W + 1)) attention pairs
(:func:`kv_values_read`, :func:`attention_flops`); L_w = 0 gives the formulas above exactly.

DeepSeek Sparse Attention (DSA: a lightning indexer of H_I heads of d_I on L_I layers, then attention over the
k positions it picks, on every layer): attention as above over at most k positions per new token, plus the
indexer scoring every position,

    F_attn = 2 L q min(A, 2 T k) + 2 L_I H_I d_I A / 2,    KV bytes = min(K, T k) (kv + o_8) + K kv_I

(kv_I: indexer-key bytes per token, FP8 with FP32 scales whatever the KV format; o_8: what FlashMLA's FP8
sparse layout adds to the latents in a 1-byte KV format, FP32 scales and a bf16 RoPE key, 0 otherwise:
:func:`kv_bytes_read`, :func:`index_flops`); k = 0 gives the formulas above exactly. Per new token at ctx
cached positions and per layer: main attention as MLA over min(ctx, k) positions, indexer 2 H_I d_I ctx FLOPs
and ctx (d_I + 4) bytes.

Hybrid linear attention (Qwen3-Next, Qwen3.5: L_lin Gated DeltaNet layers beside L_a = L - L_lin full-attention
layers): only the L_a layers attend and cache KV, so 2 L q A and K kv above count L_a layers (kv = 2 L_a H_kv d_h
x bytes), and each linear layer adds F_lin FLOPs per new token and reads and writes a state of s_lin bytes per
sequence R of the pass (R = b decode or verify rows, one per prompt chunk):

    F_attn += T F_lin L_lin,    KV bytes += 2 R s_lin L_lin

(:mod:`sweepkit.catalogue.linear`; :func:`attention_flops`, :func:`kv_bytes_read`): linear in the context,
where the full layers' work grows with it. L_lin = 0 gives the formulas above exactly.

MLA prompt chunks (multi-head latent attention, without DSA) run in MHA form: the engines up-project the
cached latents to per-head keys and values and run ordinary attention on the chunk (vLLM's MLA backend
``_forward_prefill``, SGLang's MHA and chunked-prefix-cache paths), while decode and verify rows attend over
the latent with the up-projections absorbed (FlashMLA). Per pair a prompt chunk costs 4 q_p FLOPs,
q_p = H (d_nope + d_r + d_v) / 2, against 4 q, q = H (d_c + d_r / 2); a chunk after p0 cached positions also
up-projects those p0 latents, 2 L d_c H (d_nope + d_v) FLOPs each. With A_p the prompt chunks' pairs and P
their cached prefix positions (both 0 for decode and verify rows),

    F_attn += 2 L (q_p - q) A_p' + 2 L d_c H (d_nope + d_v) P,    A_p' = min(A_p, 2 T k) with DSA, A_p otherwise

(:func:`attention_flops`). For GQA q_p = q and the up-projection is 0: the formulas above exactly. DeepSeek-V3:
81,920 FLOPs per prompt pair against 278,528 per decode pair.

Mixture of experts: P_mm counts the k active experts per MoE layer (FLOPs), but a pass of T tokens reads
every expert some token routes to. With uniform routing (k distinct experts of E per token, tokens
independent) the expected number of distinct experts a MoE layer reads is

    E_read(T) = E (1 - (1 - k / E)^T),   so   weights read = P_mm + P_e (E_read(T) - k)

(P_e: one routed expert over all MoE layers). E_read(1) = k, and E_read grows with T up to E: a decode
step reads more expert weights as the batch grows, until every expert is read (resident = total).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sweepkit.costmodel.arrays import ModelArrays
from sweepkit.costmodel.kept import kept_bytes_added
from sweepkit.costmodel.work import Work as Work, as_prefill as as_prefill, chunk_work as chunk_work  # re-exported
from sweepkit.costmodel.work import combine as combine, decode_work as decode_work, verify_work as verify_work

ACTIVATION_BYTES = 2.0
"""All-reduced activations are bf16 (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim: S = tokens x D x 2 B)."""


def experts_read(tokens: jax.Array, model: ModelArrays) -> jax.Array:
    """E_read(T) = E (1 - (1 - k/E)^T): expected distinct routed experts per MoE layer (0 for dense).

    Example:
      Mixtral-8x7B (E 8, k 2): 2 at T = 1, 3.5 at T = 2, 7.2 at T = 8.

    References:
      Fedus, Zoph, Shazeer, "Switch Transformers", JMLR 2022 (uniform routing as the balanced limit);
      DeepSeek-V3 Technical Report, arXiv 2412.19437, sec. 2.1.2.
    """
    e = jnp.maximum(model.n_experts, 1.0)
    return model.n_experts * (1.0 - jnp.power(1.0 - model.experts_per_token / e, tokens))


def streamed_params(tokens: jax.Array, model: ModelArrays) -> jax.Array:
    """Weights a pass of ``tokens`` positions reads: P_mm + P_e (E_read(T) - k); P_mm for a dense model."""
    return model.matmul_params + model.routed_expert_params * (experts_read(tokens, model)
                                                               - model.experts_per_token)


def expert_bytes_saved(params: jax.Array, model: ModelArrays, weight_bytes: jax.Array) -> jax.Array:
    """Bytes that ``params`` routed-expert weights save (<= 0) when the model keeps its experts in their own
    format: params x (min(w, w_e) - w); exactly 0 where w_e = 0 (experts in the weight format).

    Example:
      gpt-oss-120b in bf16 (MXFP4 experts, w_e = 0.53125): a decode step of one token reads 4 experts per
      layer, 4 x 36 x 3 x 2,880^2 params at 0.53125 B instead of 2 B.
    """
    mixed = params * (jnp.minimum(weight_bytes, model.expert_weight_bytes) - weight_bytes)
    return jnp.where(model.expert_weight_bytes > 0, mixed, 0.0)


def expert_params_read(tokens: jax.Array, model: ModelArrays) -> jax.Array:
    """Routed-expert weights a pass of ``tokens`` positions reads: P_e E_read(T)."""
    return model.routed_expert_params * experts_read(tokens, model)


def sparse_positions(total: jax.Array, work: Work, model: ModelArrays) -> jax.Array:
    """Positions (or pairs) a pass's DSA layers attend to: min(total, T k) on a DSA model, ``total`` otherwise.

    Each new token attends to at most k positions; T >= rows bounds the rows, so the cap is exact for decode
    (every row at least k deep, or none) and an upper bound for prefill chunks, whose first tokens have
    fewer than k positions behind them (a chunk after p0 < k cached positions: by fewer than (k - p0)^2 / 2
    positions).

    Args:
      total: the dense count the cap applies to, K KV positions (tokens).
      work: the pass; T = ``work.tokens`` new tokens.
      model: the network; k = ``topk_tokens`` (tokens, 0 for dense attention).

    Returns:
      min(total, T k) where k > 0, ``total`` exactly where k = 0 (tokens).

    Example:
      DeepSeek-V3.2 (k = 2,048), one decode row at 32,000 cached: min(32,001, 2,048) = 2,048; 64 rows at
      1,000 each: min(64,064, 131,072) = 64,064, dense.

    References:
      DeepSeek-AI, "DeepSeek-V3.2-Exp" tech report (github.com/deepseek-ai/DeepSeek-V3.2-Exp), sec. 2.1.
    """
    return jnp.where(model.topk_tokens > 0, jnp.minimum(total, work.tokens * model.topk_tokens), total)


def kv_values_read(work: Work, model: ModelArrays) -> jax.Array:
    """KV values a pass reads: K' (kv - kv_w) + min(K, T (W + 1)) kv_w, kv_w the windowed layers' share;
    K' = min(K, T k) on a DSA model (:func:`sparse_positions`), K otherwise.

    A windowed layer reads at most W + 1 positions per row; T >= rows bounds the rows, so the cap is exact
    for decode (T = b: every row at least W deep, or none) and an upper bound for verify and prefill.
    Without windows (kv_w = 0) this is K kv.

    Example:
      gpt-oss-120b, W = 128, decode of 8 rows at 4,096 cached each: full layers read 32,776 positions,
      windowed layers min(32,776, 8 x 129) = 1,032.
    """
    window = jnp.minimum(work.kv_tokens, work.tokens * (model.window_tokens + 1.0))
    return (sparse_positions(work.kv_tokens, work, model) * (model.kv_values_per_token - model.window_kv_values_per_token)
            + window * model.window_kv_values_per_token)


def kv_bytes_read(work: Work, model: ModelArrays, kv_bytes: jax.Array) -> jax.Array:
    """KV bytes a pass reads: :func:`kv_values_read` x kv + K kv_I, the indexer scanning every cached key, + the
    FP8 latent layout's scales and bf16 RoPE key on the min(K, T k) latents read where kv = 1 byte:

        KV_read = V_read kv + K kv_I + min(K, T k) o_8 [kv = 1 B],   V_read = :func:`kv_values_read`

    Without DSA (kv_I = 0, no FP8 layout) this is K kv (less the windowed layers' skipped positions).

    Args:
      work: the pass (T new tokens, K KV positions read).
      model: the network: KV values per token, ``index_bytes_per_token`` kv_I (B), ``fp8_latent_bytes`` o_8
        (B), ``topk_tokens`` k (tokens).
      kv_bytes: bytes per KV value of the KV format (B; 1.0 selects the FP8 latent layout).

    Returns:
      Bytes of KV cache the pass reads (B).

    Example:
      DeepSeek-V3.2 in FP8, one row at 32,000 cached: 61 x 656 x 2,048 B of latents + 61 x 132 x 32,001 B of
      indexer keys = 81.95 MB + 257.7 MB (DeepSeek-V3's dense MLA: 61 x 576 x 32,001 = 1,124 MB).

    References:
      DeepSeek-V3.2-Exp tech report and inference/model.py (github.com/deepseek-ai/DeepSeek-V3.2-Exp); FlashMLA
      README, FP8 sparse KV cache (github.com/deepseek-ai/FlashMLA: 656 B per token).
    """
    fp8_layout = jnp.where(kv_bytes == 1.0, model.fp8_latent_bytes, 0.0)
    return (kv_values_read(work, model) * kv_bytes + work.kv_tokens * model.index_bytes_per_token
            + sparse_positions(work.kv_tokens, work, model) * fp8_layout + linear_state_traffic(work, model))


def linear_state_traffic(work: Work, model: ModelArrays) -> jax.Array:
    """Bytes a pass moves of its sequences' linear-attention state: 2 R s_lin L_lin (each of the R sequences'
    state read once and written once, whatever the KV format; 0 without Gated DeltaNet layers).

    A decode step runs the recurrent kernel (state in HBM, updated in place); a prompt chunk the chunked
    kernel, which starts from the stored state and writes the final one back.

    Args:
      work: the pass; R = ``work.rows`` sequences.
      model: the network; ``linear_state_bytes`` s_lin L_lin (B per sequence).

    Returns:
      State bytes the pass reads and writes (B).

    Example:
      Qwen3.5-35B-A3B (30 linear layers, float32 state: 64,389,120 B per sequence), a decode step of 64 rows:
      2 x 64 x 64,389,120 = 8.24 GB, against 64 x 4,096 x 10,240 x 2 = 5.37 GB of bf16 KV at 4,096 cached each.

    References:
      Yang et al., arXiv 2412.06464, sec. 3 (recurrent and chunked forms); vLLM pull 34489 (state dtypes).
    """
    return 2.0 * work.rows * model.linear_state_bytes


def index_flops(work: Work, model: ModelArrays) -> jax.Array:
    """Lightning-indexer FLOPs of a pass: 2 L_I H_I d_I x A / 2, each new token scoring every position it may
    attend (A / 2 positions summed over the new tokens). 0 without DSA.

    The ReLU, the per-head weights and the top-k selection (O(H_I) per position) are left out (< 1 % of the
    dot products at d_I = 128). The public kernels run the dot products in FP8 (DeepGEMM ``fp8_mqa_logits``);
    sweepkit prices them with the other attention FLOPs.

    Args:
      work: the pass (A attention pairs, 2 per (new token, position)).
      model: the network; ``index_flops_per_position`` 2 L_I H_I d_I (FLOP, 0 without DSA).

    Returns:
      Indexer FLOPs of the pass (FLOP).

    Example:
      DeepSeek-V3.2, one decode token at 32,000 cached (A = 2 x 32,001): 2 x 61 x 64 x 128 x 32,001 = 32.0 GFLOP.

    References:
      DeepSeek-V3.2-Exp tech report, sec. 2.1 (lightning indexer), and inference/model.py ``Indexer``
      (github.com/deepseek-ai/DeepSeek-V3.2-Exp).
    """
    return model.index_flops_per_position * work.attn_pairs / 2.0


def attention_flops(work: Work, model: ModelArrays) -> jax.Array:
    """2 L_a q A', less what windowed layers skip: 2 L_w q (A - min(A, 2 T (W + 1))), plus :func:`index_flops`,
    plus the MHA form of MLA prompt chunks: 2 L (q_p - q) A_p' + 2 L d_c H (d_nope + d_v) P, plus the Gated
    DeltaNet layers' T F_lin L_lin (module docstring; L_a = L without linear layers).

    A' = min(A, 2 T k) on a DSA model (every layer attends to at most k positions per new token), A otherwise;
    A_p' likewise from A_p. q_p = q and no up-projection for GQA and DSA models, so the prompt term is 0 there
    (the catalogue's MLA models have no windowed layers, so the term is on all L layers).

    A token attends to at most W + 1 positions on a windowed layer, so those layers do at most 2 T (W + 1)
    attention pairs (exact once every new token has W positions behind it). Without windows (L_w = 0): 2 L q A.

    Example:
      gpt-oss-120b prefill chunk of 2,048 tokens after 30,720 cached: A = 2,048 x 63,489; the 18 windowed
      layers do 2 x 2,048 x 129 pairs each.
      DeepSeek-V3, a 4,096-token prompt (A = A_p = 4,096 x 4,097): 4 x 20,480 x 4,096 x 4,097 / 2 = 687.4
      GFLOP per layer in MHA form, 2.34 TFLOP absorbed; a 2,048-token chunk after 2,048 cached adds
      2 x 512 x 128 x 256 x 2,048 = 68.7 GFLOP per layer of up-projection.

    References:
      vLLM, vllm/v1/attention/backends/mla/common.py (MHA prefill, ``_compute_prefill_context``);
      SGLang, python/sglang/srt/models/deepseek_common/attention_backend_handler.py (MHA for prefill);
      DeepSeek-AI, FlashMLA README, github.com/deepseek-ai/FlashMLA (decode and sparse kernels).
    """
    capped = jnp.minimum(work.attn_pairs, 2.0 * work.tokens * (model.window_tokens + 1.0))
    sparse = jnp.where(model.topk_tokens > 0, jnp.minimum(work.attn_pairs, 2.0 * work.tokens * model.topk_tokens),
                       work.attn_pairs)
    prompt = jnp.where(model.topk_tokens > 0,
                       jnp.minimum(work.prefill_pairs, 2.0 * work.tokens * model.topk_tokens), work.prefill_pairs)
    return (2.0 * model.attention_layers * model.q_dim * sparse
            - 2.0 * model.window_layers * model.q_dim * (work.attn_pairs - capped) + index_flops(work, model)
            + 2.0 * model.attention_layers * (model.prefill_q_dim - model.q_dim) * prompt
            + model.prefix_flops_per_token * work.prefix_tokens + model.linear_flops_per_token * work.tokens)


def flops_and_bytes(work: Work, model: ModelArrays, weight_bytes: jax.Array, kv_bytes: jax.Array):
    """F = 2 P_mm T + F_attn; Bytes = P_read w + T D w + KV_read kv (zero where the network is absent), with
    routed experts at min(w, w_e) and the kept attention / head weights at max(w, w_a) where the checkpoint
    keeps them in their own format (:func:`expert_bytes_saved`, :func:`kept_bytes_added`).

    P_read = :func:`streamed_params` (P_mm for a dense network); F_attn = :func:`attention_flops` and
    KV_read kv = :func:`kv_bytes_read` (2 L q A and K kv without windowed layers or DSA)."""
    flops = 2.0 * model.matmul_params * work.tokens + attention_flops(work, model)
    bytes_ = (streamed_params(work.tokens, model) * weight_bytes + work.tokens * model.d_model * weight_bytes
              + kv_bytes_read(work, model, kv_bytes)
              + expert_bytes_saved(expert_params_read(work.tokens, model), model, weight_bytes)
              + kept_bytes_added(model.kept_params, model, weight_bytes))
    return flops * model.present, bytes_ * model.present
