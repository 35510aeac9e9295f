"""The lever fields' table: each field is a Lever attribute and a resolved setting, the fields with a policy set
that Policy field, and a new field added as docs/serving.md ("Adding a lever field") says flows from a TOML
lever to the Policy the engine gets."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from sweepkit.errors import InputError
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config, policy
from sweepkit.serving.engine import Policy
from sweepkit.serving.lever_fields import FIELDS, Settings, policy_fields, resolve
from sweepkit.serving.levers import Lever, parse_lever

PACKAGE = Path(__file__).resolve().parents[1] / "sweepkit"


def test_every_field_is_a_lever_attribute_and_a_setting_and_sets_a_policy_field_once():
    lever = {f.name for f in dataclasses.fields(Lever)}
    settings = {f.name for f in dataclasses.fields(Settings)}
    targets = [f.policy for f in FIELDS if f.policy]
    assert {f.key for f in FIELDS} <= lever and {f.key for f in FIELDS} <= settings
    assert set(targets) <= {f.name for f in dataclasses.fields(Policy)} and len(targets) == len(set(targets))


@pytest.mark.parametrize("raw, want", [
    ({"batching": "chunked"}, {"batching": 2}), ({"router": "session"}, {"router": 1}),
    ({"kv": "paged", "preemption": "swap"}, {"paged": 1.0, "swap": 1.0}),
    ({"preemption": "swap"}, {"paged": 0.0, "swap": 0.0}),        # swapping needs paged KV
    ({"token_budget": 512}, {"token_budget": 512.0}), ({"kv": "paged", "prefix_caching": True}, {"prefix": 1.0}),
    ({"mode": "disagg", "handoff": "push", "instances": 1, "prefill_instances": 1}, {"pull": 0.0}),
    ({}, {"batching": 0, "router": 0, "paged": 0.0, "swap": 0.0, "prefix": 0.0, "pull": 0.0, "token_budget": 8192.0}),
])
def test_a_lever_field_sets_its_policy_field(raw, want):
    cluster = load_cluster()
    lever = parse_lever(raw, "test")
    with jax.enable_x64(True):
        got = policy_fields(resolve(cluster, lever))
        pol = policy(cluster, Config("H100", lever))
    assert {k: float(got[k]) for k in want} == want
    assert {k: float(getattr(pol, k)) for k in want} == want


def test_a_colocated_lever_keeps_no_prefill_pool_and_no_handoff():
    res = resolve(load_cluster(), Lever("x", prefill_instances=3, handoff="push"))
    assert (res.prefill_instances, res.handoff, res.total_instances) == (0, "none", res.instances)


@pytest.mark.parametrize("raw, message", [
    ({"batching": "fifo"}, "batching = 'fifo' is not allowed; expected one of prefill-priority, decode-priority, chunked"),
    ({"prefix_caching": "yes"}, "prefix_caching = 'yes' is not allowed; expected true or false"),
    ({"tp": 0}, "tp"), ({"expert_imbalance": 0.5}, "expert_imbalance"),
])
def test_a_bad_field_value_is_one_line_naming_it(raw, message):
    with pytest.raises(InputError, match="levers.toml") as err:
        parse_lever(raw, "levers.toml")
    assert message in str(err.value) and "\n" not in str(err.value)


_ROW = ('    F("acceptance_seed", "int", lambda c, r: 0, lo=0, hi=2 ** 31, policy="spec_seed",\n'
        '      encode=lambda v, s: jnp.asarray(v, jnp.uint64)),\n')
_ATTRIBUTE = "    acceptance_seed: int | None = None\n"

_CHECK = """
import json, sys
import jax
from sweepkit.errors import InputError
from sweepkit.serving.cluster import load_cluster
from sweepkit.serving.config import Config
from sweepkit.serving.lanes import lane_inputs
from sweepkit.serving.levers import load_levers
from sweepkit.serving.workloads import load_workloads
out = {}
lv = load_levers(sys.argv[1])
with jax.enable_x64(True):
    for name in ("seeded", "baseline"):
        pol, req, loads, shape = lane_inputs(load_workloads()["chat"], load_cluster(), Config("H100", lv[name]), 1.0)
        out[name] = int(pol.spec_seed)
try:
    load_levers(sys.argv[2])
except InputError as exc:
    out["error"] = str(exc)
print(json.dumps(out))
"""


def _add_field(root: Path) -> None:
    """The edits docs/serving.md lists: a row of the table, an attribute of the Lever."""
    table = root / "sweepkit" / "serving" / "lever_fields.py"
    text = table.read_text()
    start = text.index("FIELDS: tuple[LeverField, ...] = (")
    end = text.index("\n)\n", start) + 1
    table.write_text(text[:end] + _ROW + text[end:])
    levers = root / "sweepkit" / "serving" / "levers.py"
    text = levers.read_text()
    anchor = "\n    @property\n    def speculative"
    assert text.count(anchor) == 1
    levers.write_text(text.replace(anchor, "\n" + _ATTRIBUTE + anchor))


def test_a_new_lever_field_flows_from_a_toml_lever_to_the_engine_policy(tmp_path):
    """A field added in the places docs/serving.md lists (here one that sets the acceptance seed) is read
    from a levers file, validated, resolved and in the Policy of the lane the engine runs."""
    shutil.copytree(PACKAGE, tmp_path / "sweepkit", ignore=shutil.ignore_patterns("__pycache__"))
    _add_field(tmp_path)
    good, bad = tmp_path / "levers.toml", tmp_path / "bad.toml"
    good.write_text("[levers.baseline]\n\n[levers.seeded]\nacceptance_seed = 7\n")
    bad.write_text("[levers.seeded]\nacceptance_seed = -1\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", _CHECK, str(good), str(bad)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["seeded"] == 7 and out["baseline"] == 0
    assert "bad.toml" in out["error"] and "acceptance_seed" in out["error"] and "-1" in out["error"]
