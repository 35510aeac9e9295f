"""Bad input to ``sweepkit.evaluate`` gets one clear line naming the argument, the value and what is allowed."""

import pytest

from sweepkit import evaluate
from sweepkit.errors import InputError

OK = dict(device="H100", model="llama-3-8b", draft="mtp", batch=1, context=512, gamma=3, alpha=0.7)


@pytest.mark.parametrize("override, pattern", [
    ({"device": "H900"}, r"device = 'H900' .*one of .*H100"),
    ({"model": "llama-9"}, r"model = 'llama-9' .*llama-3-8b"),
    ({"draft": "eagle"}, r"draft = 'eagle' .*none, mtp"),
    ({"weight_format": "fp2"}, r"weight_format = 'fp2' .*bf16"),
    ({"kv_format": "q3"}, r"kv_format = 'q3' .*fp8"),
    ({"compute_format": "tf32"}, r"compute_format = 'tf32'"),
    ({"alpha": 1.5}, r"alpha = 1.5 .*\[0, 1\]"),
    ({"alpha": -0.1}, r"alpha = -0.1"),
    ({"alpha": float("nan")}, r"alpha = nan"),
    ({"gamma": -1}, r"gamma = -1 .*integer in \[0, 64\]"),
    ({"gamma": 2.5}, r"gamma = 2.5 .*integer"),
    ({"gamma": True}, r"gamma = True"),
    ({"batch": 0}, r"batch = 0 .*integer in \[1, "),
    ({"context": 0}, r"context = 0"),
    ({"tp": 0}, r"tp = 0"),
    ({"batch": "8"}, r"batch = '8'"),
])
def test_bad_arguments(override, pattern):
    with pytest.raises(InputError, match=pattern) as info:
        evaluate(**{**OK, **override})
    assert "\n" not in str(info.value)


def test_integer_valued_floats_are_accepted():
    assert evaluate(**{**OK, "gamma": 3.0, "batch": 1.0})["s_per_token_spec"] == evaluate(**OK)["s_per_token_spec"]


def test_point_that_does_not_fit_is_flagged_not_an_error():
    r = evaluate(device="A100-40GB", model="llama-3-8b", draft="mtp", batch=512, context=8192)
    assert r["fits_in_memory"] is False
