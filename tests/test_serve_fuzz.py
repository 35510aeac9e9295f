"""Whatever JSON a client sends, the API's validation answers one 400 line or valid arguments, never another
exception (which the server would answer 500): a Hypothesis property over bodies built from the API's own
fields, lever objects included, each with hostile values."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sweepkit.errors import InputError
from sweepkit.serve import api
from sweepkit.serve.api import BadRequest
from sweepkit.serving.config import Config, check
from sweepkit.serving.levers import _FIELDS, CHOICES

WORKLOADS = Path(__file__).resolve().parent / "grids" / "serve-workloads.toml"
CTX = api.build_context(None, str(WORKLOADS))

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=8), st.sampled_from(["H100", "MI300X", "mtp", "none", "baseline", "tiny-chat",
                                                           "llama-3-8b", "fp8", "paged", "disagg", "workload",
                                                           *[c for cs in CHOICES.values() for c in cs]]),
                    st.sampled_from([0, 1, 2, 3, 4, 8, 0.5, 0.7, 1.5, -1, 1e308]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=6)
LEVER = st.one_of(VALUES, st.dictionaries(st.sampled_from(sorted(_FIELDS | {"name"})), VALUES, max_size=6),
                  st.dictionaries(st.sampled_from(sorted(_FIELDS | {"name"})), SCALARS, max_size=8))


def body(fields: list[str], levers: tuple[str, ...] = ()):
    keys = st.sampled_from(fields + ["page", "sql", ""])
    plain = st.dictionaries(keys, VALUES, max_size=len(fields) + 1)
    with_levers = st.fixed_dictionaries({k: LEVER for k in levers},
                                        optional={"workload": st.sampled_from(["tiny-chat", "tiny-batch", "x"]),
                                                  "device": st.sampled_from(["H100", "B200", "MI300X", "A100"])})
    return st.one_of(VALUES, plain, with_levers)


def _settled(fn, *args):
    try:
        return fn(*args)
    except (BadRequest, InputError) as exc:
        assert str(exc) and "\n" not in str(exc), repr(exc)
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body(["workload", "device", "before", "after", "rate"], ("before", "after")))
def test_whatif_bodies(b):
    args = _settled(api.whatif_args, CTX, b)
    if args is not None:
        for side in ("before", "after"):
            _settled(check, CTX.cluster, Config(args["device"], args[side]), side)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body(["workload", "device", "lever"], ("lever",)))
def test_capacity_bodies(b):
    args = _settled(api.capacity_args, CTX, b)
    if args is not None:
        _settled(check, CTX.cluster, Config(args["device"], args["lever"]), "lever")


@settings(max_examples=150, deadline=None)
@given(body(["device", "model", "draft", "batch", "context", "gamma", "alpha", "tp"]))
def test_decode_bodies(b):
    _settled(api.decode_args, b)


@pytest.mark.parametrize("b", [{"after": {"gamma": 2**70}}, {"after": {"alpha": float("nan")}},
                               {"after": {"draft": {"x": 1}}}, {"after": {"devices": [1, None]}},
                               {"after": {"instances": 1e308}}, {"after": {"name": ["x"]}}])
def test_hostile_lever_fields(b):
    _settled(api.whatif_args, CTX, {"workload": "tiny-chat", "device": "H100", **b})
