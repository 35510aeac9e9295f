"""Grid specs: parsing, ranges, defaults, and one clear InputError line for every kind of bad file."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

from sweepkit.errors import InputError
from sweepkit.sweep.grid import AXES, DEFAULTS, load_grid, parse_grid

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_fill_missing_axes_in_fixed_order():
    spec = parse_grid('name = "d"\n', "d.toml")
    assert tuple(spec.axes) == AXES
    assert spec.axes == DEFAULTS
    assert spec.n_points == 1 and spec.description == "" and spec.path == "d.toml"


def test_lists_ranges_product_and_sha():
    text = """name = "r"
description = "ranges"
[axes]
device = ["H100", "A100"]
batch = { start = 1, stop = 512, num = 10, scale = "log" }
context = { start = 100, stop = 102, num = 5 }
alpha = { start = 0.5, stop = 0.9, num = 5 }
gamma = 4
"""
    spec = parse_grid(text, "r.toml")
    assert spec.axes["batch"] == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    assert spec.axes["context"] == (100, 101, 102)          # 100, 100.5, 101, 101.5, 102 rounded, de-duplicated
    assert spec.axes["alpha"] == (0.5, 0.6, 0.7, 0.8, 0.9)
    assert spec.axes["gamma"] == (4,)
    assert all(isinstance(v, int) for v in spec.axes["batch"] + spec.axes["context"] + spec.axes["gamma"])
    assert spec.n_points == math.prod(len(v) for a, v in spec.axes.items() if a != "acceptance") == 2 * 10 * 3 * 5
    assert isinstance(spec.n_points, int)
    assert spec.sha256 == hashlib.sha256(text.encode()).hexdigest() and spec.toml_text == text


def test_repo_grids():
    seed = load_grid(ROOT / "grids/seed.toml")
    assert seed.axes["device"] == ("H100", "A100") and seed.n_points == 60
    lev = load_grid(ROOT / "grids/leviathan.toml")
    pairs = {(a, g) for a in lev.axes["alpha"] for g in lev.axes["gamma"]}
    assert {(0.6, 2), (0.7, 3), (0.8, 2), (0.8, 5), (0.9, 2), (0.9, 10)} <= pairs
    assert load_grid(ROOT / "grids/large.toml").n_points >= 10**7


BAD = [
    ('name = "x"\n[axes\n', "not valid TOML", "line 2"),
    ('name = "x"\ncolour = 1\n', "colour = 1 is not allowed", "top-level key"),
    ('name = "x"\n[axes]\nbatchsize = [1]\n', "axes.batchsize", "an axis among"),
    ('name = "x"\n[axes]\ndevice = ["H900"]\n', "axes.device = 'H900' is not allowed", "H100"),
    ('name = "x"\n[axes]\nmodel = ["gpt-5"]\n', "axes.model = 'gpt-5'", "llama-3-8b"),
    ('name = "x"\n[axes]\nweight_format = ["fp7"]\n', "axes.weight_format = 'fp7'", "bf16"),
    ('name = "x"\n[axes]\ndevice = []\n', "axes.device = [] is not allowed", "non-empty"),
    ('name = "x"\n[axes]\nalpha = [1.5]\n', "axes.alpha = 1.5 is not allowed; expected a number in [0, 1]", ""),
    ('name = "x"\n[axes]\ngamma = [-1]\n', "axes.gamma = -1 is not allowed; expected an integer in [0, 64]", ""),
    ('name = "x"\n[axes]\ngamma = [2.5]\n', "axes.gamma = 2.5", "integer"),
    ('name = "x"\n[axes]\nbatch = [0]\n', "axes.batch = 0", "integer in [1, 1,048,576]"),
    ('name = "x"\n[axes]\ncontext = [1.5]\n', "axes.context = 1.5", "integer in [1, 16,777,216]"),
    ('name = "x"\n[axes]\ntp = [0]\n', "axes.tp = 0", "integer in [1, 1,024]"),
    ('name = "x"\n[axes]\nbatch = [1, 1]\n', "axes.batch", "distinct"),
    ('name = "x"\n[axes]\nbatch = { start = 1, stop = 8, num = 0 }\n', "axes.batch.num = 0", "an integer in [1, "),
    ('name = "x"\n[axes]\nbatch = { start = 0, stop = 8, num = 3, scale = "log" }\n', "axes.batch.start = 0", "log"),
    ('name = "x"\n[axes]\nbatch = { start = 1, stop = 8, num = 3, scale = "cubic" }\n', "axes.batch.scale", "linear"),
    ('name = "x"\n[axes]\nbatch = { start = 1, stop = 8 }\n', "missing num", ""),
    ('name = "x"\n[axes]\ndevice = { start = 1, stop = 8, num = 2 }\n', "axes.device", "list of names"),
    ('description = "no name"\n', "name = None", "non-empty string"),
    ('name = "x"\n[axes]\nmodel = ["llama-3-8b"]\ndraft = ["qwen2.5-7b"]\n', "axes.draft = 'qwen2.5-7b'", "vocab"),
]


@pytest.mark.parametrize("text, must, also", BAD)
def test_bad_grid_one_line(text, must, also):
    with pytest.raises(InputError) as exc:
        parse_grid(text, "grids/x.toml")
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("grids/x.toml: ")
    assert must in msg and also in msg


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such grid file"):
        load_grid(tmp_path / "nope.toml")


def test_huge_ranges_and_grids_are_refused_before_anything_is_allocated(tmp_path):
    from sweepkit.errors import InputError
    from sweepkit.sweep.grid import MAX_POINTS, load_grid

    path = tmp_path / "g.toml"
    path.write_text('name = "g"\n[axes]\nbatch = { start = 1, stop = 8, num = 10000000000000 }\n')
    with pytest.raises(InputError, match=r"axes.batch.num = 10000000000000 is not allowed; expected an integer in"):
        load_grid(path)
    axes = "\n".join(f"{a} = {{ start = 1, stop = 1000000, num = 1000000 }}" for a in ("batch", "context"))
    path.write_text(f'name = "g"\n[axes]\n{axes}\ngamma = [1, 2]\n')
    with pytest.raises(InputError, match=f"at most {MAX_POINTS:,} are allowed"):
        load_grid(path)
