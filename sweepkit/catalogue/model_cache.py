"""What a :class:`~sweepkit.catalogue.models.Model` caches per token and per sequence: its KV bytes (MLA latents,
DSA indexer keys, windowed layers) and its linear-attention layers' state (a mixin of ``Model``; notation in
:mod:`sweepkit.catalogue.models` and docs/notation.md)."""

from __future__ import annotations

from sweepkit.catalogue.linear import linear_flops_per_token, linear_layer_params, linear_state_bytes
from sweepkit.catalogue.sparse import fp8_latent_overhead_bytes, indexer_key_bytes


class CacheShape:
    """KV bytes per token and linear-attention state per sequence, from a model's fields (mixed into ``Model``)."""

    @property
    def is_hybrid(self) -> bool:
        """Some layers are Gated DeltaNet (linear-attention) layers: no KV cache, a fixed state per sequence."""
        return self.linear_layers > 0

    @property
    def attention_layers(self) -> int:
        """L_a = L - L_lin: the layers that attend over the whole context and cache KV (L without linear layers)."""
        return self.n_layers - self.linear_layers

    @property
    def linear_params(self) -> int:
        """P_lin, one Gated DeltaNet token mixer's weights (0 without linear layers; Qwen3.5-35B-A3B: 33.72 M)."""
        return linear_layer_params(self.d_model, self.__dict__) if self.is_hybrid else 0

    @property
    def linear_flops_per_token(self) -> int:
        """F_lin L_lin: state-update, read and convolution FLOPs per token over the linear layers (0 without)."""
        return self.linear_layers * linear_flops_per_token(self.__dict__) if self.is_hybrid else 0

    @property
    def linear_state_bytes_per_sequence(self) -> int:
        """s_lin L_lin: bytes of recurrent and convolution state one sequence holds (0 without linear layers).
        Qwen3.5-35B-A3B: 30 x 2,146,304 = 64,389,120 B."""
        return self.linear_layers * linear_state_bytes(self.__dict__) if self.is_hybrid else 0

    @property
    def kv_values_per_token(self) -> int:
        """KV values cached per token: 2 (K and V) x L_a x H_kv x d_h (L_a = L without linear layers); MLA:
        L (d_c + d_r). Qwen3.5-35B-A3B: 2 x 10 x 2 x 256 = 10,240."""
        if self.is_mla:
            return self.n_layers * (self.kv_lora_rank + self.qk_rope_head_dim)
        return 2 * self.attention_layers * self.kv_dim

    @property
    def index_kv_bytes_per_token(self) -> int:
        """Indexer-key bytes cached per token, L_I (d_I + 4 ceil(d_I / 128)) in FP8 with FP32 scales whatever
        the KV format (0 without DSA). DeepSeek-V3.2: 61 x 132 = 8,052 B."""
        return self.indexer_layers * indexer_key_bytes(self.index_head_dim) if self.is_dsa else 0

    @property
    def fp8_latent_overhead_bytes(self) -> int:
        """Bytes per token a 1-byte KV format adds to a DSA model's MLA latents, L (4 ceil(d_c / 128) + d_r):
        FlashMLA's FP8 sparse layout keeps FP32 scales and a bf16 RoPE key (656 B per layer against 576 for
        DeepSeek-V3.2). 0 without DSA or without MLA."""
        if not (self.is_dsa and self.is_mla):
            return 0
        return self.n_layers * fp8_latent_overhead_bytes(self.kv_lora_rank, self.qk_rope_head_dim)

    def kv_bytes_per_token(self, kv_bytes_per_value: float = 2.0) -> float:
        """KV values x bytes + indexer-key bytes (+ the FP8 latent layout's scales and bf16 RoPE key at 1 byte per
        value). Llama-3-8B bf16: 2 x 32 x 1,024 x 2 = 131,072 B; DeepSeek-V3 bf16: 61 x 576 x 2 = 70,272 B;
        DeepSeek-V3.2 bf16: 70,272 + 61 x 132 = 78,324 B, fp8: 61 x (656 + 132) = 48,068 B."""
        overhead = self.fp8_latent_overhead_bytes if kv_bytes_per_value == 1.0 else 0
        return float(self.kv_values_per_token) * kv_bytes_per_value + self.index_kv_bytes_per_token + overhead

    def window_kv_bytes_per_token(self, kv_bytes_per_value: float = 2.0) -> float:
        """The windowed layers' share of :meth:`kv_bytes_per_token`: 2 L_w H_kv d_h x bytes (0 without windows).

        gpt-oss-120b bf16: 2 x 18 x 8 x 64 x 2 = 36,864 B of the 73,728 B per token."""
        if self.is_mla:
            return 0.0
        return 2.0 * self.window_layers * self.kv_dim * kv_bytes_per_value
