"""``sweepkit devices`` and ``sweepkit models``: the catalogue, in the units of its TOML files."""

from __future__ import annotations

import click

from sweepkit.cli.common import emit, format_option


@click.command(context_settings={"max_content_width": 100})
@format_option
def devices(fmt: str) -> None:
    """List the accelerators a grid's device axis may name (dense bf16 peak, HBM, power, price).

    \b
    Example: sweepkit devices --format markdown
    """
    import pyarrow as pa

    from sweepkit.catalogue import load_devices

    ds = list(load_devices().values())
    emit(pa.table({
        "device": [d.name for d in ds],
        "description": [d.description for d in ds],
        "peak_tflops_bf16": [d.peak_flops_per_s / 1e12 for d in ds],
        "hbm_tb_per_s": [d.hbm_bytes_per_s / 1e12 for d in ds],
        "hbm_gb": [d.hbm_capacity_bytes / 1e9 for d in ds],
        "tdp_w": [d.tdp_w for d in ds],
        "ridge_flop_per_byte": [round(d.ridge_flop_per_byte, 1) for d in ds],
        "usd_per_gpu_hour": [d.price_usd_per_gpu_hour for d in ds],
        "scaleup_domain_gpus": [d.scaleup_domain_gpus for d in ds],
        "scaleout_gbit_per_s": [d.scaleout_bytes_per_s * 8 / 1e9 for d in ds],
        "native_formats": [" ".join(f"{k}x{v:g}" for k, v in d.compute_speedup.items()) for d in ds],
    }), fmt, title="devices")


@click.command(context_settings={"max_content_width": 100})
@format_option
def models(fmt: str) -> None:
    """List the models a grid's model (and draft) axis may name, with their shapes.

    experts: routed / per token + shared; attention: gqa or mla, and the layers with a window; aliases: other
    names (HF ids) that resolve to the model. A HF id "org/Name" also matches the model named Name, and a
    quantised checkpoint "org/Name-FP8" (-FP8-dynamic, -FP8-KV, -FP4, -NVFP4, -MXFP4) what "org/Name" matches.

    \b
    Example: sweepkit models --format csv
    """
    import pyarrow as pa

    from sweepkit.catalogue import load_models
    from sweepkit.catalogue.aliases import alias_table

    ms = list(load_models().values())
    aliases = alias_table("models")
    emit(pa.table({
        "model": [m.name for m in ms],
        "params_b": [round(m.resident_params / 1e9, 3) for m in ms],
        "active_params_b": [round(m.active_params / 1e9, 3) for m in ms],
        "layers": [m.n_layers for m in ms],
        "d_model": [m.d_model for m in ms],
        "heads": [m.n_heads for m in ms],
        "kv_heads": [m.n_kv_heads for m in ms],
        "d_ff": [m.d_ff for m in ms],
        "vocab": [m.vocab for m in ms],
        "kv_bytes_per_token_bf16": [int(m.kv_bytes_per_token()) for m in ms],
        "experts": [f"{m.n_experts}/{m.experts_per_token}+{m.n_shared_experts}" if m.is_moe else "" for m in ms],
        "attention": [("mla" if m.is_mla else "gqa") + (f" window {m.sliding_window} on {m.window_layers}L"
                                                       if m.window_layers else "")
                      + (f" dsa top-{m.index_topk} ({m.index_n_heads}x{m.index_head_dim} indexer on "
                         f"{m.indexer_layers}L)" if m.is_dsa else "")
                      + (f" on {m.attention_layers}L + gated deltanet on {m.linear_layers}L "
                         f"({m.linear_state_bytes_per_sequence:,} B state per sequence)" if m.is_hybrid else "")
                      for m in ms],
        "mtp_layers": [m.mtp_layers for m in ms],
        "native_weight_format": [m.native_weight_format or "bf16" for m in ms],
        "expert_weight_format": [m.expert_weight_format for m in ms],
        "attention_weight_format": [m.attention_weight_format for m in ms],
        "aliases": [" ".join(sorted(k for k, v in aliases.items() if v == m.name)) for m in ms],
    }), fmt, title="models")


@click.command(context_settings={"max_content_width": 100})
@format_option
def acceptance(fmt: str) -> None:
    """List the acceptance tables a grid's acceptance axis may name, and the per-workload models.

    E is the expected tokens per verify pass of a 3-token chain draft (bonus token counted).

    \b
    Example: sweepkit acceptance --format markdown
    """
    import pyarrow as pa

    from sweepkit.acceptance import expected_tokens_np, load_packaged

    cat = load_packaged()
    models = [("table", m) for m in cat.tables.values()] + [("workload", m) for m in cat.workloads.values()]
    emit(pa.table({
        "kind": [k for k, _ in models],
        "name": [m.name for _, m in models],
        "alpha_1_to_3": [" ".join(f"{a:.3f}" for a in m.alphas_for(3)) for _, m in models],
        "e_gamma_3": [round(expected_tokens_np(m.alphas_for(3)), 3) for _, m in models],
        "source": [m.source for _, m in models],
    }), fmt, title="acceptance")
