"""Blackwell FP4 GEMM efficiency of the seed table and benchmarks/data/aic_efficiency.py on a synthetic table.

The seed values come from aiconfigurator-core 0.12.0 systems data (github.com/ai-dynamo/aiconfigurator,
Apache-2.0); the script that derives them is run here on a small Parquet file written with a known answer.
"""

from pathlib import Path

import duckdb
import numpy as np
import pytest
from support.scripts import load_script

from sweepkit.catalogue.efficiency import packaged_profile
from sweepkit.costmodel.efficiency import saturating


def _script():
    return load_script("benchmarks/data/aic_efficiency.py")


def test_seed_b200_fp4_gemm_efficiency_closed_form():
    seed = packaged_profile()
    f = seed.fields("B200", "fp4")
    assert (f["gemm_eff_max"], f["gemm_tokens_half"]) == (0.48, 536.0)
    # eff(T) = 0.48 T / (T + 536): half of e_max at T_half, 0.48 x 4096 / 4632 at 4096 tokens
    assert float(saturating(536.0, f["gemm_eff_max"], f["gemm_tokens_half"])) == pytest.approx(0.24)
    assert float(saturating(4096.0, f["gemm_eff_max"], f["gemm_tokens_half"])) == pytest.approx(0.48 * 4096 / 4632)
    assert seed.fields("B200", "nvfp4")["gemm_eff_max"] == 0.48          # nvfp4 -> fp4 in the format order
    assert (seed.fields("GB200", "fp4")["gemm_eff_max"], seed.fields("B300", "fp4")["gemm_eff_max"]) == (0.46, 0.37)
    assert "aiconfigurator" in seed.sources[("B200", "fp4")]
    # bf16 and fp8 from the same table; int8 and fp6 reach fp8 before fp4 in the format order
    assert [seed.fields("GB300", f)["gemm_eff_max"] for f in ("bf16", "fp8", "int8", "fp6")] == [0.73, 0.63, 0.63, 0.63]
    assert seed.fields("H100", "fp4")["gemm_eff_max"] == 0.55            # Hopper untouched


def _synthetic_table(path: Path, e_max: float, t_half: float, peak: float, hbm: float, w: float) -> None:
    n = k = 8192
    ms = 2.0 ** np.arange(0, 15)
    t_s = np.maximum(2 * ms * n * k / (peak * e_max * ms / (ms + t_half)), n * k * w / (hbm * 0.8))
    rows = [("nvfp4", int(m), n, k, float(t) * 1e3) for m, t in zip(ms, t_s)]
    rows += [("bfloat16", 1, n, k, 1.0)]
    con = duckdb.connect()
    con.execute("create table g (gemm_dtype varchar, m bigint, n bigint, k bigint, latency double)")
    con.executemany("insert into g values (?, ?, ?, ?, ?)", rows)
    con.execute(f"copy g to '{path}' (format parquet)")


def test_script_recovers_known_efficiency_from_parquet(tmp_path, capsys):
    mod = _script()
    table = tmp_path / "gemm_perf.parquet"
    _synthetic_table(table, 0.5, 256.0, peak=9.0e15, hbm=8.0e12, w=0.5625)   # B200 nvfp4 peak and bytes
    ms, t_s, nk = mod.measured(str(table), "nvfp4", mod.layer_shapes(8192, 28672, 1280, 8))
    assert len(ms) == 15 and nk == pytest.approx(sum(n * k for n, k in mod.layer_shapes(8192, 28672, 1280, 8)))
    assert mod.fit(ms, t_s, nk, 9.0e15, 8.0e12, 0.5625, 0.8) == pytest.approx((0.5, 256.0), abs=1e-9)
    assert mod.main(["--table", str(table), "--points", "llama-70b:1", "llama-405b:8"]) == 0
    out = capsys.readouterr().out
    assert '[efficiency."B200".nvfp4]' in out and "gemm_eff_max = 0.50" in out and "gemm_tokens_half = 256.0" in out
    with pytest.raises(SystemExit, match="no rows with gemm_dtype = 'fp8'"):
        mod.main(["--table", str(table), "--dtype", "fp8"])
    with pytest.raises(SystemExit, match="not MODEL:TP"):
        mod.main(["--table", str(table), "--points", "llama-70b:x"])


def test_script_skips_without_a_table(capsys, tmp_path):
    mod = _script()
    assert mod.main([]) == 0
    assert "nothing to do" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no such file .*missing.parquet"):
        mod.main(["--table", str(tmp_path / "missing.parquet")])
