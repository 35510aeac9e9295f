"""benchmarks/data/aic_mla_kernel.py on a synthetic generation-MLA table written with a known answer.

The script fits t = t_call + R t_row + max(F / R_f, K kv / R_b) to aiconfigurator-core's measured table
(github.com/ai-dynamo/aiconfigurator, Apache-2.0); here it reads a small Parquet file in the table's layout whose
latencies come from that form, and must give the parameters back.
"""

from pathlib import Path

import duckdb
import numpy as np
from support.scripts import load_script


def _script():
    return load_script("benchmarks/data/aic_mla_kernel.py")


def _write_table(path: Path, truth: dict) -> None:
    rows = []
    for kv, (r_f, r_b, t_row, t_call) in truth.items():
        kv_bytes = {"bfloat16": 2.0, "fp8": 1.0}[kv]
        for heads in (64, 128):
            for batch in (16, 64, 256, 1024):
                for cached in (1023, 4095, 16383):
                    flops = 2.0 * batch * cached * heads * (2 * 512 + 64)
                    kv_read = batch * cached * 576 * kv_bytes
                    t = t_call + batch * t_row + max(flops / r_f, kv_read / r_b)
                    rows.append((kv, heads, 1, batch, 1, cached, t * 1e3))     # latency in ms, isl + step
        rows.append((kv, 128, 1, 4, 1, 2047, 1.0))            # batch < 16: outside the fit
        rows.append((kv, 128, 2, 256, 1, 2047, 1.0))          # tp 2: outside the fit
    con = duckdb.connect()
    con.execute("create table t (kv_cache_dtype varchar, num_heads int, tp_size int, batch_size int, isl int, "
                "step int, latency double)")
    con.executemany("insert into t values (?, ?, ?, ?, ?, ?, ?)", rows)
    con.execute(f"copy t to '{path}' (format parquet)")


def test_fit_recovers_a_known_kernel(tmp_path):
    truth = {"bfloat16": (1.3e15, 5.5e12, 25e-9, 15e-6), "fp8": (2.5e15, 5.4e12, 70e-9, 13e-6)}
    table = tmp_path / "generation_mla_perf.parquet"
    _write_table(table, truth)
    mod = _script()
    for kv, want in truth.items():
        rows = mod.table_rows(table, kv)
        assert len(rows) == 2 * 4 * 3                       # the out-of-range rows are left out
        got, err = mod.fit(rows, mod.KV_BYTES[kv], 8e12)
        assert np.allclose(got, want, rtol=1e-3)
        assert np.abs(err).max() < 1e-4                     # the solver's tolerance, not the form's


def test_bandwidth_never_above_the_hbm_peak(tmp_path):
    # a table whose kernel reads faster than the stated HBM peak could deliver: R_b stops at the peak
    truth = {"bfloat16": (1.3e15, 9e12, 25e-9, 15e-6), "fp8": (2.5e15, 9e12, 70e-9, 13e-6)}
    table = tmp_path / "generation_mla_perf.parquet"
    _write_table(table, truth)
    mod = _script()
    got, _ = mod.fit(mod.table_rows(table, "bfloat16"), 2.0, 4.8e12)
    assert got[1] <= 4.8e12 * (1 + 1e-9)


def test_kv_time_ratios_pair_the_two_caches_point_by_point(tmp_path):
    # a memory-bound kernel reading both caches at one rate: FP8 halves the time wherever the read dominates
    truth = {"bfloat16": (1e18, 5e12, 0.0, 0.0), "fp8": (1e18, 5e12, 0.0, 0.0)}
    table = tmp_path / "generation_mla_perf.parquet"
    _write_table(table, truth)
    ratios = _script().kv_time_ratios(table)
    assert sorted(ratios) == [64, 128]
    for r in ratios.values():
        assert len(r) == 3 * 2                              # rows 64-1,024 x cached 4,095 and 16,383 (1,023: < 2,048)
        assert np.allclose(r, 0.5)


def test_priced_ratio_lies_between_the_bytes_and_the_flops_bound():
    # halving the bytes at equal FLOPs: 0.5 where the read binds, 1 where the FLOPs do, never outside
    mod = _script()
    for gpu in ("H100", "H200", "B200"):
        assert mod.priced_ratio(gpu, 1) == 0.5                  # 1 head: 3.8 FLOP a byte, bytes-bound anywhere
        assert all(0.5 <= mod.priced_ratio(gpu, h) <= 1.0 for h in (16, 64, 128))


def test_without_a_folder_it_says_so(capsys):
    assert _script().main([]) == 0
    assert "no --dir given" in capsys.readouterr().out
