"""MoE all-to-all call times against DeepEP's published kernel times, per-DP-rank dense GEMMs and host time, and
the two-batch-overlap ablation's sign (closed forms and published numbers)."""

import dataclasses

import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_device, get_model
from sweepkit.catalogue.efficiency import packaged_profile
from sweepkit.costmodel.arrays import device_arrays, model_arrays
from sweepkit.costmodel.efficiency import efficiency_arrays, step_time_by_class
from sweepkit.costmodel.layout import make_layout
from sweepkit.costmodel.moe_comm import (COMBINE_LATENCY_S, DISPATCH_LATENCY_S, a2a_busy_s, all_to_all_bytes,
                                         all_to_all_s)
from sweepkit.costmodel.passes import Work, decode_work
from sweepkit.costmodel.steps import instance, target_pass

pytestmark = pytest.mark.usefixtures("x64")
F = jnp.float64
DSV3, H100 = get_model("deepseek-v3"), get_device("H100")

DEEPEP_LOW_LATENCY_US = {8: (77, 114), 16: (118, 195), 32: (155, 273), 64: (173, 314), 128: (192, 369),
                         256: (194, 360)}
"""(dispatch, combine) microseconds of DeepEP's low-latency kernels: H800 (NVLink ~160 GB/s), one CX7 400 Gb/s
InfiniBand NIC (~50 GB/s) per GPU, 128 tokens per GPU, hidden 7,168, top-8, FP8 dispatch, BF16 combine
(github.com/deepseek-ai/DeepEP README, "Low-latency kernels with pure RDMA")."""


@pytest.mark.parametrize("ep", sorted(DEEPEP_LOW_LATENCY_US))
def test_all_to_all_reproduces_deepep_low_latency_table(ep):
    dev = dataclasses.replace(device_arrays(H100, F), link_bytes_per_s=F(160e9))    # H800's NVLink, as measured
    lay = make_layout(H100, DSV3, 1, dp=ep, ep=ep, imbalance=1.0, compute_format="fp8", gpus_per_node=8,
                      redundant_experts=-256 % ep, dtype=F)
    want_d, want_c = DEEPEP_LOW_LATENCY_US[ep]
    b_d = all_to_all_bytes(lay, F(128), F(7168), F(8), F(1.0))
    b_c = all_to_all_bytes(lay, F(128), F(7168), F(8), F(2.0))
    got_d = float(all_to_all_s(lay, dev, b_d, F(DISPATCH_LATENCY_S))) * 1e6
    got_c = float(all_to_all_s(lay, dev, b_c, F(COMBINE_LATENCY_S))) * 1e6
    assert got_d == pytest.approx(want_d, rel=0.07)
    assert got_c == pytest.approx(want_c, rel=0.09)
    if ep == 64:     # the docstring's example: 121.6 us of bytes over InfiniBand + 5 + 10 + 41 us
        assert got_d == pytest.approx(177.6, abs=0.1)
    # without the fixed call time the bytes and hops fall 35-65 us short of every published entry
    short_d = want_d - float(all_to_all_s(lay, dev, b_d, F(0.0))) * 1e6
    short_c = want_c - float(all_to_all_s(lay, dev, b_c, F(0.0))) * 1e6
    assert 30 < short_d < 50 and 45 < short_c < 90


def test_a2a_busy_time_only_where_tokens_are_dispatched():
    assert float(a2a_busy_s(make_layout(H100, DSV3, 1, dp=8, ep=8, dtype=F))) == pytest.approx(107e-6, rel=1e-12)
    assert float(a2a_busy_s(make_layout(H100, DSV3, 8, ep=8, dtype=F))) == 0.0        # experts inside TP: all-reduce
    assert float(a2a_busy_s(make_layout(H100, DSV3, 8, dtype=F))) == 0.0


def test_dense_gemm_is_one_dp_rank_roofline():
    # DEP8 on H100, 256 decode rows per rank: the dense class is one rank's GEMMs on its 256 tokens against its own
    # copy of the dense weights, max(2 P_d T / (P n k eff(T / dp)), (dp P_d + T D) w / (B n b_w)).
    net, dev = model_arrays(DSV3, F), device_arrays(H100, F)
    eff = efficiency_arrays(packaged_profile().fields("H100", "fp8"), F)
    eff = dataclasses.replace(eff, gemm_eff_max=F(0.6), gemm_tokens_half=F(64.0), weight_bw_eff=F(0.8), tp_loss=F(0.0))
    t = 8 * 256.0
    zero = Work(F(0.0), F(0.0), F(0.0))
    got = float(step_time_by_class(decode_work(F(t * 2000.0), F(t)), zero, net, dev, eff, F(8.0), F(1.0), F(1.0),
                                   F(2.0), dp=F(8.0))["gemm"])
    p_d = DSV3.matmul_params - 8 * DSV3.routed_expert_params
    g = 0.6 * 256 / (256 + 64)
    want = max(2 * p_d * t / (989e12 * 8 * 2 * g), (8 * p_d + t * 7168) * 1.0 / (3.35e12 * 8 * 0.8))
    assert got == pytest.approx(want, rel=1e-9)
    # one rank's compute at its own 256 tokens: the same as a lone replica of one GPU with 256 rows
    one = float(step_time_by_class(decode_work(F(256 * 2000.0), F(256.0)), zero, net, dev, eff, F(1.0), F(1.0),
                                   F(1.0), F(2.0))["gemm"])
    assert got == pytest.approx(one, rel=1e-9)


def test_host_time_per_token_counts_one_dp_rank():
    # the profile's token_overhead_s is paid on each DP rank's T / dp tokens, not on the replica's T
    eff = efficiency_arrays(packaged_profile().fields("H100", "fp8"), F)
    lay = make_layout(H100, DSV3, 1, dp=72, ep=72, imbalance=1.05, compute_format="fp8", gpus_per_node=8,
                      redundant_experts=32, dtype=F)
    work = decode_work(F(72 * 256 * 2000.0), F(72 * 256.0))

    def t(tok_s):
        i = instance(H100, DSV3, None, 1, "fp8", "fp8", "fp8", dtype=F, layout=lay)
        e = dataclasses.replace(eff, token_overhead_s=F(tok_s))
        return float(target_pass(dataclasses.replace(i, efficiency=e), work)[0])

    assert t(5e-6) - t(0.0) == pytest.approx(5e-6 * 256, rel=1e-9)


@pytest.mark.parametrize("profiled", [False, True])
def test_two_batch_overlap_loses_at_32_rows_and_wins_at_256_as_lmsys_measured(profiled):
    # LMSYS, EP72 decode of DeepSeek-V3 on H100: TBO -27 % at 32 tokens per GPU, +25.5 % at 256
    # (lmsys.org/blog/2025-05-05-large-scale-ep, "Ablation Study: Two-batch Overlap")
    eff = efficiency_arrays(packaged_profile().fields("H100", "fp8"), F) if profiled else None

    def step(rows, overlap):
        lay = make_layout(H100, DSV3, 1, dp=72, ep=72, imbalance=1.05, compute_format="fp8", gpus_per_node=8,
                          redundant_experts=32, two_batch_overlap=overlap, dtype=F)
        i = dataclasses.replace(instance(H100, DSV3, None, 1, "fp8", "fp8", "fp8", dtype=F, layout=lay),
                                efficiency=eff)
        b = 72.0 * rows
        return float(target_pass(i, decode_work(F(b * 2000.0), F(b)))[0])

    gain = {r: step(r, False) / step(r, True) - 1.0 for r in (32, 256)}
    assert gain[32] < -0.15 and 0.1 < gain[256] < 0.45


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([1, 2, 4, 8, 16, 72]), st.floats(1.0, 20000.0), st.floats(0.0, 1.0))
def test_dense_class_never_gets_cheaper_with_more_dp_ranks(dp, tokens, t_half_share):
    # more DP ranks over the same tokens: each reads its own weight copy and runs fewer tokens (lower GEMM
    # efficiency), so the dense class is non-decreasing in dp; dp = 1 is the class of the module docstring
    net, dev = model_arrays(DSV3, F), device_arrays(H100, F)
    eff = efficiency_arrays(packaged_profile().fields("H100", "fp8"), F)
    eff = dataclasses.replace(eff, gemm_tokens_half=F(256.0 * t_half_share))
    zero = Work(F(0.0), F(0.0), F(0.0))
    work = decode_work(F(tokens * 1000.0), F(tokens))

    def gemm(d):
        return float(step_time_by_class(work, zero, net, dev, eff, F(72.0), F(1.0), F(1.0), F(2.0), dp=F(d))["gemm"])

    assert gemm(dp) <= gemm(2 * dp) * (1 + 1e-12)
    assert gemm(1) == pytest.approx(float(step_time_by_class(work, zero, net, dev, eff, F(72.0), F(1.0), F(1.0),
                                                             F(2.0))["gemm"]), rel=1e-12)
