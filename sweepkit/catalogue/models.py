"""Model catalogue: the frozen :class:`Model` a HF ``config.json`` describes, and what it derives from its fields.

Loading configs, the catalogue's names and draft kinds: :mod:`sweepkit.catalogue.model_registry`.

Notation (docs/notation.md): L layers, D d_model (hidden_size), H query heads, H_kv KV heads, d_h head dim,
F FFN width (SwiGLU: gate, up, down), V vocab, n_mlp matrices of D x F per FFN (3 gated, 2 ungated).

Parameter count per layer (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim): attention q,o: 2 D (H d_h); k,v: 2 D (H_kv d_h);
SwiGLU MLP: 3 D F; an ungated GELU MLP (GPT-J, Falcon: up and down projections only) 2 D F. Matmul parameters
P_mm = L x per_layer + V D (LM head). Resident parameters add the input embedding V D unless it is tied to the LM
head, plus QKV biases where present.

Mixture of experts (sweepkit.catalogue.sparse): a MoE layer holds E routed experts, S shared ones (each a
SwiGLU of width F_e: 3 D F_e) and a router (E D); a token uses k routed experts. P_mm then counts the
ACTIVE parameters (k + S experts per MoE layer): the FLOPs of a token. Resident = every expert. Multi-head
latent attention caches d_c + d_r values per token per layer (the latent and the RoPE key).

DeepSeek Sparse Attention (sweepkit.catalogue.sparse): a lightning indexer of H_I heads of d_I scores every
cached position on L_I layers and attention reads the k best; each indexer layer adds r_q H_I d_I + D d_I + D H_I
parameters and caches d_I + 4 bytes of FP8 key and scale per token (whatever the KV format).

Hybrid linear attention (sweepkit.catalogue.linear): L_lin of the L layers are Gated DeltaNet layers (Qwen3-Next,
Qwen3.5), with H_k key heads of d_k, H_v value heads of d_v and a causal convolution of width K, P_lin weights
each in place of the attention block's, no KV cache and a fixed state of s_lin bytes per sequence; the
L_a = L - L_lin full-attention layers cache KV as above (their query projection also yields a sigmoid output
gate: D q more weights where ``attn_output_gate``).

Windowed attention (sweepkit.catalogue.attention): L_w of the L layers attend to at most the last W
positions (sliding window or attention chunk); a pass then reads at most W + 1 KV positions per row on those
layers. The cache is sized for every layer at the full context (a paged cache without per-layer eviction).
"""

from __future__ import annotations

from dataclasses import dataclass

from sweepkit.catalogue.formats import get_format
from sweepkit.catalogue.model_cache import CacheShape
from sweepkit.catalogue.sparse import indexer_params, mla_attention_params


@dataclass(frozen=True)
class Model(CacheShape):
    """A dense decoder-only transformer, described by its HF config fields.

    Attributes:
      name, source: catalogue key and where the numbers come from.
      n_layers (L), d_model (D), n_heads (H), n_kv_heads (H_kv), head_dim (d_h), d_ff (F), vocab (V).
      tied_embeddings: input embedding shares the LM head's matrix.
      gated_mlp: the FFN is gated (SwiGLU: gate, up, down, n_mlp = 3); False: up and down only (GELU MLP of
        GPT-J and Falcon, n_mlp = 2). A parallel attention + MLP block (GPT-J, Falcon) has the same FLOPs and
        bytes as a sequential one.
      shared_allreduce: attention and MLP outputs are summed before one tensor-parallel all-reduce per layer
        (Falcon's parallel attention in TensorRT-LLM and vLLM: :mod:`sweepkit.catalogue.config_families`);
        False: one all-reduce after each (:attr:`allreduces_per_layer`). A dense model only.
      qkv_bias: attention q/k/v projections carry biases (Qwen2).
      n_experts (E), experts_per_token (k), n_shared_experts (S), moe_d_ff (F_e), dense_layers: the MoE
        part (E = 0: a dense model); dense_layers counts the layers with a dense FFN of width F.
      kv_lora_rank (d_c), q_lora_rank, qk_rope_head_dim (d_r), qk_nope_head_dim, v_head_dim: MLA
        (d_c = 0: GQA attention).
      sliding_window (W), window_layers (L_w): L_w layers attend to at most W positions (0: none).
      index_topk (k), index_n_heads (H_I), index_head_dim (d_I), indexer_layers (L_I): DeepSeek Sparse
        Attention, every layer attends to the k positions a lightning indexer of H_I x d_I picks (its own on
        L_I layers); k = 0: dense attention.
      attention_sinks: one learned sink logit per head and layer (gpt-oss).
      linear_layers (L_lin), linear_key_heads (H_k), linear_value_heads (H_v), linear_key_dim (d_k),
        linear_value_dim (d_v), linear_conv_kernel (K), linear_state_bytes (s_ssm, B per state value): the
        Gated DeltaNet layers of a hybrid model (L_lin = 0: every layer attends over the whole context).
      attention_output_gate: the full-attention layers' query projection also yields a per-channel output gate
        (Qwen3-Next, Qwen3.5: D x 2 H d_h query weights).
      mtp_layers: multi-token-prediction layers the checkpoint ships beside the L layers (not counted in
        the parameters; the ``mtp`` draft prices one).
      native_weight_format: the format the published checkpoint stores its quantised weights in
        (``quantization_config.quant_method``: mxfp4 -> fp4, fp8 -> fp8; "" for bf16).
      expert_weight_format: the format the routed experts keep whatever the weight_format of the other
        weights (gpt-oss: fp4, MXFP4 experts beside bf16 attention, router and embeddings); experts are
        then held and read at min(w, w_e) bytes per value. "": every weight in the weight_format.
      attention_weight_format: the format the checkpoint keeps its attention projections and output head in
        whatever the weight_format (P_a = :attr:`kept_params`; gpt-oss, NVIDIA's NVFP4 DeepSeek-R1
        checkpoints: bf16); they are held and read at max(w, w_a) bytes per value and multiply at the
        speed-up that width allows (:func:`sweepkit.costmodel.kept.kept_speedup`). "": in the weight_format.
    """

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab: int
    tied_embeddings: bool = False
    gated_mlp: bool = True
    shared_allreduce: bool = False
    qkv_bias: bool = False
    source: str = ""
    official_params: float | None = None
    official_active_params: float | None = None
    n_experts: int = 0
    experts_per_token: int = 0
    n_shared_experts: int = 0
    moe_d_ff: int = 0
    dense_layers: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0
    window_layers: int = 0
    index_topk: int = 0
    index_n_heads: int = 0
    index_head_dim: int = 0
    indexer_layers: int = 0
    attention_sinks: bool = False
    linear_layers: int = 0
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_dim: int = 0
    linear_value_dim: int = 0
    linear_conv_kernel: int = 0
    linear_state_bytes: int = 0
    attention_output_gate: bool = False
    mtp_layers: int = 0
    native_weight_format: str = ""
    expert_weight_format: str = ""
    attention_weight_format: str = ""

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def allreduces_per_layer(self) -> int:
        """n_ar, tensor-parallel all-reduces of one layer's output: 2 (after attention, after the MLP), 1 where
        attention and MLP outputs are summed first (``shared_allreduce``; Falcon-180B: 80 per pass, not 160)."""
        return 1 if self.shared_allreduce else 2

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_dsa(self) -> bool:
        """DeepSeek Sparse Attention: attention reads the index_topk positions a lightning indexer picks."""
        return self.index_topk > 0

    @property
    def indexer_params(self) -> int:
        """One layer's lightning indexer, r_q H_I d_I + D d_I + D H_I (0 without DSA; DeepSeek-V3.2: 13.96 M)."""
        return indexer_params(self.d_model, self.__dict__) if self.is_dsa else 0

    @property
    def q_dim(self) -> int:
        """H x d_h: width of the query / attention output (D for most catalogue models; MiniMax-M2.5: 6,144 = 2 D)."""
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """H_kv x d_h: width of one of K or V per token per layer."""
        return self.n_kv_heads * self.head_dim

    @property
    def attention_params(self) -> int:
        """One attention block: 2 D q_dim + 2 D kv_dim (+ q,k,v biases, + H sink logits, + D q_dim of output
        gate), or the MLA projections."""
        extra = (self.n_heads if self.attention_sinks else 0) + (
            self.d_model * self.q_dim if self.attention_output_gate else 0)
        if self.is_mla:
            return mla_attention_params(self.d_model, self.n_heads, self.__dict__) + extra
        bias = (self.q_dim + 2 * self.kv_dim) if self.qkv_bias else 0
        return 2 * self.d_model * self.q_dim + 2 * self.d_model * self.kv_dim + bias + extra

    @property
    def attention_width(self) -> int:
        """Width q of the attention FLOPs per (token, position) pair, 2 q for QK plus 2 q for PV.

        q_dim for GQA; MLA with the up-projections absorbed (decode attends over the latent, one
        "KV head" of width d_c + d_r): QK costs 2 H (d_c + d_r), PV 2 H d_c, so q = H (d_c + d_r / 2).
        """
        if self.is_mla:
            return self.n_heads * (self.kv_lora_rank + self.qk_rope_head_dim // 2)
        return self.q_dim

    @property
    def prefill_attention_width(self) -> float:
        """Width q_p of the attention FLOPs per (token, position) pair of a prompt chunk, 4 q_p per pair.

        MLA prefill runs as ordinary multi-head attention on keys and values up-projected from the latent
        (vLLM's MLA backend ``_forward_prefill``; SGLang's MHA / chunked-prefix-cache path; FlashMLA's dense
        kernels serve decode): QK costs 2 H (d_nope + d_r), PV 2 H d_v, so q_p = H (d_nope + d_r + d_v) / 2
        (DeepSeek-V3: 128 x 160 = 20,480, 81,920 FLOPs per pair against 278,528 absorbed). A DSA model's
        sparse prefill kernel attends over the latent as decode does (FlashMLA ``flash_mla_sparse_fwd``,
        d_qk = 576, d_v = 512), and a GQA model has one form: q_p = :attr:`attention_width` for both.
        """
        if self.is_mla and not self.is_dsa:
            return self.n_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim) / 2
        return float(self.attention_width)

    @property
    def prefix_upprojection_flops(self) -> float:
        """FLOPs per cached prefix position a prompt chunk up-projects, over the layers: 2 L d_c H (d_nope + d_v).

        A chunk after p0 cached positions attends to their keys and values in MHA form, so it multiplies the
        p0 cached latents by W_UK and W_UV again (vLLM ``_compute_prefill_context`` and SGLang
        ``MHA_CHUNKED_KV`` both run ``kv_b_proj`` over the cached prefix; the chunk's own new tokens are in
        P_mm). DeepSeek-V3: 2 x 61 x 512 x 128 x 256 = 2.05 GFLOP per cached position. 0 for GQA and DSA.
        """
        if self.is_mla and not self.is_dsa:
            return 2.0 * self.n_layers * self.kv_lora_rank * self.n_heads * (self.qk_nope_head_dim + self.v_head_dim)
        return 0.0

    @property
    def mlp_matrices(self) -> int:
        """n_mlp, the D x F matrices of one FFN (or expert): 3 for a gated (SwiGLU) MLP, 2 for an ungated one."""
        return 3 if self.gated_mlp else 2

    @property
    def dense_mlp_params(self) -> int:
        """One dense FFN, n_mlp D F. GPT-J (D 4,096, F 16,384, ungated): 134.2 M."""
        return self.mlp_matrices * self.d_model * self.d_ff

    @property
    def n_dense_layers(self) -> int:
        return self.dense_layers if self.is_moe else self.n_layers

    @property
    def n_moe_layers(self) -> int:
        return self.n_layers - self.n_dense_layers

    @property
    def expert_params(self) -> int:
        """One expert of one MoE layer: n_mlp D F_e (3 D F_e for the SwiGLU experts of every catalogue MoE)."""
        return self.mlp_matrices * self.d_model * self.moe_d_ff

    def _moe_layer(self, experts: int) -> int:
        return self.attention_params + (experts + self.n_shared_experts) * self.expert_params \
            + self.n_experts * self.d_model

    @property
    def params_per_layer(self) -> int:
        """One layer of the deepest kind: dense 2 D q_dim + 2 D kv_dim + n_mlp D F (+ biases); MoE: attention
        + (E + S) experts + router. Llama-3-70B: 855.6 M (github.com/BrendanJamesLynskey/Disaggregated_Inference_Sim)."""
        layer = self._moe_layer(self.n_experts) if self.is_moe else self.attention_params + self.dense_mlp_params
        return layer + self.indexer_params

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.d_model

    @property
    def matmul_params(self) -> int:
        """P_mm = the weights one token multiplies: dense layers + MoE layers with k + S experts + V D.

        A dense model streams all of them every pass; a MoE pass streams the experts its tokens touch
        (sweepkit.costmodel.passes)."""
        dense = self.n_dense_layers * (self.attention_params + self.dense_mlp_params)
        moe = self.n_moe_layers * self._moe_layer(self.experts_per_token) if self.is_moe else 0
        return dense + moe + self.indexer_layers * self.indexer_params + self.embedding_params + self._mixer_delta

    @property
    def _mixer_delta(self) -> int:
        """L_lin (P_lin - P_attn): what the linear layers' token mixers weigh beyond the attention blocks counted."""
        return self.linear_layers * (self.linear_params - self.attention_params)

    @property
    def kept_params(self) -> int:
        """P_a = the matmul weights ``attention_weight_format`` covers: the token mixers of the L layers (a
        hybrid's linear layers at their own weight) and the output head V D (DeepSeek-V3: 61 x 187.1 M MLA
        projections + 129,280 x 7,168 = 12.34 B). Checkpoints that leave attention unquantised leave the
        output head too (gpt-oss's ``modules_to_not_convert``; ModelOpt excludes ``lm_head`` by default)."""
        return self.n_layers * self.attention_params + self._mixer_delta + self.embedding_params

    @property
    def kept_resident_params(self) -> int:
        """:attr:`kept_params` plus the input embedding unless tied: what ``attention_weight_format`` holds."""
        return self.kept_params + (0 if self.tied_embeddings else self.embedding_params)

    @property
    def routed_expert_params(self) -> int:
        """P_e = one routed expert over all MoE layers, L_moe x 3 D F_e (0 for a dense model)."""
        return self.n_moe_layers * self.expert_params

    @property
    def total_matmul_params(self) -> int:
        """Matmul weights with every expert: P_mm + P_e (E - k)."""
        return self.matmul_params + self.routed_expert_params * (self.n_experts - self.experts_per_token)

    @property
    def resident_params(self) -> int:
        """Parameters held in HBM: all matmul weights (every expert) plus the input embedding unless tied."""
        return self.total_matmul_params + (0 if self.tied_embeddings else self.embedding_params)

    def resident_weight_bytes(self, bytes_per_value: float) -> float:
        """Bytes of the resident weights in a format of ``bytes_per_value`` w: resident params x w, with the
        routed experts at min(w, w_e) where the model keeps them in ``expert_weight_format`` and the attention
        projections, output head and embedding at max(w, w_a) where it keeps them in ``attention_weight_format``.

        gpt-oss-120b in bf16: 2.13 B params x 2 + 114.66 B expert params x 0.53125 = 60.69 GiB (model card:
        60.8 GiB)."""
        wider = (self.kept_resident_params * (max(bytes_per_value, get_format(self.attention_weight_format).bytes_per_value)
                                              - bytes_per_value) if self.attention_weight_format else 0.0)
        if not self.expert_weight_format:
            return self.resident_params * bytes_per_value + wider
        experts = self.n_experts * self.routed_expert_params
        w_e = min(bytes_per_value, get_format(self.expert_weight_format).bytes_per_value)
        return (self.resident_params - experts) * bytes_per_value + experts * w_e + wider

    @property
    def active_params(self) -> int:
        """Parameters one token uses (the input embedding included unless tied); = resident for dense."""
        return self.matmul_params + (0 if self.tied_embeddings else self.embedding_params)

    def with_layers(self, n_layers: int, name: str | None = None) -> Model:
        """The same architecture with another depth (the MTP draft is the target with one layer).

        The last ``n_layers`` layers are kept: a MoE target's one-layer copy is a MoE layer, a hybrid's (whose
        last layer attends over the whole context) a full-attention layer, as Qwen3.5's MTP layer is."""
        dense = max(0, self.dense_layers - (self.n_layers - n_layers))
        windowed = max(0, self.window_layers - (self.n_layers - n_layers))
        indexed = max(int(self.is_dsa), self.indexer_layers - (self.n_layers - n_layers))
        # the last n layers of a stack whose full layers close each group (Qwen3.5: every 4th): n - ceil(n L_a / L)
        linear = n_layers - -(-n_layers * self.attention_layers // self.n_layers) if self.is_hybrid else 0
        fields = {**self.__dict__, "n_layers": n_layers, "dense_layers": dense, "mtp_layers": 0,
                  "linear_layers": linear,
                  "indexer_layers": indexed,
                  "window_layers": windowed, "sliding_window": self.sliding_window if windowed else 0,
                  "name": name or f"{self.name}[{n_layers}L]"}
        return Model(**fields)
