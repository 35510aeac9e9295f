"""benchmarks/bench_batch.py run for real on a few lanes: a vmapped batch of one program, chunked and padded,
gives every checked lane the results it has alone, and the script writes its figures."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_batch  # noqa: E402


def test_a_chunked_padded_batch_equals_its_lanes_alone(tmp_path):
    out = tmp_path / "batch.json"
    # 3 lanes, 2 a call: the second call is padded with a copy of its last lane
    got = bench_batch.main(["--workload", "realtime-voice", "--rate", "0.1953125", "--lanes", "3", "--chunk", "2",
                            "--check", "2", "--json", str(out)])
    assert got["batch_equals_alone"] and got["checked_lanes"] == 2
    assert got["lane_iterations"] >= got["batch_iterations"] > 0      # each call runs as long as its slowest lane
    assert json.loads(out.read_text())["lanes"] == 3


def test_bad_arguments_are_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        bench_batch.main(["--lanes", "0"])
    assert e.value.code == 2 and "--lanes 0" in capsys.readouterr().err
