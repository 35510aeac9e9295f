"""KV capacity with windowed layers: a sequence of n positions holds n_held(n) capacity positions.

A windowed layer keeps at most W + 1 positions of a sequence (Mistral 7B, arXiv 2310.06825 sec. 2, "Rolling
Buffer Cache": a cache of fixed size W); gpt-oss (arXiv 2508.10925 sec. 2) alternates a 128-token window with
full attention on its 36 layers, so half of its KV per token is windowed.
"""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepkit.catalogue import get_draft, get_model, model_names
from sweepkit.costmodel.arrays import model_arrays
from sweepkit.costmodel.memory import kv_positions_held
from sweepkit.evaluate import evaluate


def _held(name: str, n: float, draft: str = "none") -> float:
    with jax.enable_x64(True):
        f = jnp.float64
        m = get_model(name)
        return float(kv_positions_held(model_arrays(m, f), model_arrays(get_draft(draft, m), f), f(n)))


def test_gpt_oss_120b_holds_half_the_windowed_tail():
    # 131,072 positions: full layers hold all, the 18 windowed layers 129 -> 131,072 - 0.5 x 130,943.
    assert _held("gpt-oss-120b", 131072) == 65600.5


def test_mistral_7b_holds_w_plus_one_positions():
    # Every layer has W = 4,096: a sequence holds min(n, 4,097) positions.
    assert _held("mistral-7b", 32768) == 4097.0
    assert _held("mistral-7b", 1000) == 1000.0


def test_an_mtp_draft_layer_keeps_its_full_context():
    # gpt-oss-120b + MTP (the last layer, a full-attention one): kv_w / (kv + kv_layer) = 18 / 37.
    n = 131072.0
    assert _held("gpt-oss-120b", n, "mtp") == pytest.approx(n - 18 / 37 * (n - 129), rel=1e-15)


WINDOW_FREE = [n for n in model_names() if get_model(n).window_layers == 0]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(WINDOW_FREE), st.sampled_from(["none", "mtp"]), st.integers(0, 1 << 24))
def test_window_free_models_hold_every_position_bit_for_bit(name, draft, n):
    assert _held(name, n, draft) == float(n)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["gpt-oss-120b", "gpt-oss-20b", "llama-4-scout", "mistral-7b"]),
       st.integers(0, 1 << 22), st.integers(1, 4096))
def test_windowed_sequences_never_hold_more_and_grow_with_n(name, n, extra):
    m = get_model(name)
    held, longer = _held(name, n), _held(name, n + extra)
    assert held <= n and held <= longer
    if n <= m.sliding_window + 1:
        assert held == n


def test_gpt_oss_long_context_fits_where_full_reservation_would_not():
    # gpt-oss-120b, fp4 weights on one H100 at 131,072 tokens per row: the batch that fits is
    # floor(capacity / n_held), about twice floor(capacity / n).
    n = 131072

    def point(batch):
        return evaluate(device="H100", model="gpt-oss-120b", batch=batch, context=n - 1, weight_format="fp4")

    cap = point(1)["kv_capacity_tokens"]
    b_fit = int(cap // 65600.5)
    assert b_fit > cap // n >= 0 and b_fit >= 1
    assert point(b_fit)["fits_in_memory"] and not point(b_fit + 1)["fits_in_memory"]
