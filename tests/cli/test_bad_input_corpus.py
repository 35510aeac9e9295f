"""The bad-input corpus: every case obeys one rule, in real processes against real files.

The rule: exit status 2 (the Python API: an InputError); stdout empty; stderr exactly one line, starting
``Error:``, naming the file or argument (``where``) and the field (``field``), with no traceback; and the
warehouse unchanged: every file's bytes, compared before and after each case, and the runs and row counts
compared before and after the whole corpus.

Cases run in a few driver processes (one per group, not one per case, so ~180 cases take seconds rather than
minutes): a driver calls the ``sweepkit`` entry point as the console script does (click standalone mode, with
its real stdout and stderr file descriptors redirected to files per case) and runs the API cases as written.
A handful of cases also run as separate ``python -m sweepkit.cli`` processes, to show that the driver answers
as a fresh process does.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
       "JAX_PLATFORMS": "cpu"}

# ------------------------------------------------------------------------------------------------ the cases
def grid(axes: str, head: str = 'name = "x"\n') -> str:
    return head + "[axes]\n" + axes + "\n"


SERVING_OK = '[serving]\nworkloads = ["chat"]\nlevers = ["baseline"]\n'
WORKLOAD_OK = 'source = "s"\nttft_slo_s = 1.0\ntpot_slo_s = 0.1\n'
CLUSTER_OK = ('model = "llama-3-8b"\ninstances = 1\ntp = 1\ndevices = ["H100"]\n')
LLAMA = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "intermediate_size": 14336, "vocab_size": 128256}
RANDOM = bytes((i * 151 + 7) % 256 for i in range(4096))          # fixed "random" bytes, not UTF-8


def serving(extra: str = "", body: str = SERVING_OK) -> str:
    return 'name = "s"\n' + body + extra


def workload(fields: str) -> str:
    return "[workloads.w]\n" + fields


def cluster(fields: str) -> str:
    return "[cluster]\n" + fields


FILES: dict[str, str | bytes] = {
    # decode grids
    "g/ok.toml": grid("batch = [1, 2]"),                  # valid: only the options of its cases are bad
    "g/syntax.toml": 'name = "x"\n[axes\n',
    "g/unknown_key.toml": 'name = "x"\ncolour = 1\n',
    "g/no_name.toml": grid("batch = [1]", head=""),
    "g/empty_name.toml": grid("batch = [1]", head='name = " "\n'),
    "g/int_name.toml": grid("batch = [1]", head="name = 3\n"),
    "g/int_description.toml": grid("batch = [1]", head='name = "x"\ndescription = 4\n'),
    "g/axes_scalar.toml": 'name = "x"\naxes = 3\n',
    "g/unknown_axis.toml": grid("colour = [1]"),
    "g/device.toml": grid('device = ["H900"]'),
    "g/device_int.toml": grid("device = [1]"),
    "g/model.toml": grid('model = ["gpt-5"]'),
    "g/draft.toml": grid('draft = ["eagle"]'),
    "g/draft_vocab.toml": grid('draft = ["qwen2.5-7b"]'),
    "g/tp_zero.toml": grid("tp = [0]"),
    "g/tp_huge.toml": grid("tp = [4096]"),
    "g/tp_divisor.toml": grid("tp = [3]"),
    "g/tp_float.toml": grid("tp = [1.5]"),
    "g/batch_zero.toml": grid("batch = [0]"),
    "g/batch_1e300.toml": grid("batch = [1e300]"),
    "g/batch_negative.toml": grid("batch = [-8]"),
    "g/batch_text.toml": grid('batch = ["8"]'),
    "g/batch_bool.toml": grid("batch = [true]"),
    "g/batch_inf.toml": grid("batch = [inf]"),
    "g/context_zero.toml": grid("context = [0]"),
    "g/context_huge.toml": grid("context = [1099511627776]"),
    "g/gamma_negative.toml": grid("gamma = [-1]"),
    "g/gamma_2e31.toml": grid("gamma = [2147483648]"),
    "g/gamma_half.toml": grid("gamma = [0.5]"),
    "g/alpha_big.toml": grid("alpha = [1.5]"),
    "g/alpha_negative.toml": grid("alpha = [-0.1]"),
    "g/alpha_nan.toml": grid("alpha = [nan]"),
    "g/alpha_text.toml": grid('alpha = ["high"]'),
    "g/empty_axis.toml": grid("batch = []"),
    "g/duplicates.toml": grid("batch = [1, 8, 1]"),
    "g/range_no_num.toml": grid("batch = { start = 1, stop = 8 }"),
    "g/range_num_zero.toml": grid("batch = { start = 1, stop = 8, num = 0 }"),
    "g/range_num_huge.toml": grid("alpha = { start = 0, stop = 1, num = 10000000 }"),
    "g/range_scale.toml": grid('batch = { start = 1, stop = 8, num = 4, scale = "cubic" }'),
    "g/range_log_zero.toml": grid('batch = { start = 0, stop = 8, num = 4, scale = "log" }'),
    "g/range_key.toml": grid("batch = { start = 1, stop = 8, num = 4, step = 2 }"),
    "g/range_names.toml": grid("device = { start = 1, stop = 2, num = 2 }"),
    "g/range_stop_text.toml": grid('batch = { start = 1, stop = "many", num = 2 }'),
    "g/range_alpha_out.toml": grid("alpha = { start = 0.5, stop = 1.5, num = 3 }"),
    "g/weight_format.toml": grid('weight_format = ["fp3"]'),
    "g/kv_format.toml": grid('kv_format = ["int2"]'),
    "g/too_many_points.toml": grid("batch = { start = 1, stop = 1000000, num = 1000000 }\n"
                                   "context = { start = 1, stop = 1000000, num = 1000000 }\n"
                                   "alpha = { start = 0, stop = 1, num = 1000000 }"),
    "g/random.toml": RANDOM,
    "g/nul.toml": 'name = "x"\x00\n',
    "g/config_missing.toml": grid('model = ["nowhere/config.json"]'),
    "g/config_bad_json.toml": grid('model = ["cfg/bad.json"]'),
    "g/config_fields.toml": grid('model = ["cfg/fields.json"]'),
    "g/config_heads.toml": grid('model = ["cfg/heads.json"]'),
    "g/config_huge.toml": grid('model = ["cfg/huge.json"]'),
    "g/config_tp.toml": grid('model = ["cfg/ok.json"]\ntp = [64]'),
    "g/models_file_missing.toml": grid("batch = [1]", head='name = "x"\nmodels_file = "nope.toml"\n'),
    "g/models_file_clash.toml": grid("batch = [1]", head='name = "x"\nmodels_file = "cfg/clash.toml"\n'),
    "g/models_file_fields.toml": grid("batch = [1]", head='name = "x"\nmodels_file = "cfg/fields.toml"\n'),
    "g/cfg/clash.toml": "[models.llama-3-8b]\n" + "\n".join(f"{k} = {v}" for k, v in LLAMA.items()) + "\n",
    "g/cfg/fields.toml": "[models.mine]\nhidden_size = 0\n",
    "g/cfg/bad.json": "{not json",
    "g/cfg/fields.json": json.dumps({"hidden_size": 4096}),
    "g/cfg/heads.json": json.dumps({**LLAMA, "num_key_value_heads": 5}),
    "g/cfg/huge.json": json.dumps({**LLAMA, "hidden_size": 10**300}),
    "g/cfg/ok.json": json.dumps(LLAMA),
    # serving grids
    "s/random.toml": RANDOM,
    "s/syntax.toml": "[serving\n",
    "s/unknown_top.toml": serving("colour = 2\n"),
    "s/no_serving.toml": 'name = "s"\n',
    "s/serving_scalar.toml": 'name = "s"\nserving = 3\n',
    "s/unknown_key.toml": serving("speed = 3\n"),
    "s/workload.toml": serving(body='[serving]\nworkloads = ["poetry"]\nlevers = ["baseline"]\n'),
    "s/lever.toml": serving(body='[serving]\nworkloads = ["chat"]\nlevers = ["magic"]\n'),
    "s/lever_twice.toml": serving(body='[serving]\nworkloads = ["chat"]\nlevers = ["baseline", "baseline"]\n'),
    "s/workloads_empty.toml": serving(body='[serving]\nworkloads = []\nlevers = ["baseline"]\n'),
    "s/baseline.toml": serving("baseline = \"mtp\"\n"),
    "s/device.toml": serving('devices = ["Z9"]\n'),
    "s/reference_device.toml": serving('reference_device = "B200"\ndevices = ["H100"]\n'),
    "s/reference_loads.toml": serving("reference_loads = { poetry = 1.0 }\n"),
    "s/reference_load_negative.toml": serving("reference_loads = { chat = -1.0 }\n"),
    "s/rates.toml": serving("rates_per_call = 0\n"),
    "s/rates_huge.toml": serving("rates_per_call = 1e300\n"),
    "s/search.toml": serving('search = "golden"\n'),
    "s/search_int.toml": serving("search = 3\n"),
    "s/workloads_file_missing.toml": serving('workloads_file = "nope.toml"\n'),
    "s/workloads_file_folder.toml": serving('workloads_file = "."\n'),
    "s/levers_file_folder.toml": serving('levers_file = "w"\n'),
    "s/device_not_served.toml": serving('devices = ["MI300X"]\n'),
    "s/mean_over_max.toml": serving('workloads_file = "w/mean_over_max.toml"\n'),
    "s/trace_random.toml": serving('workloads_file = "w/trace_random.toml"\n'),
    "s/trace_negative.toml": serving('workloads_file = "w/trace_negative.toml"\n'),
    "s/trace_columns.toml": serving('workloads_file = "w/trace_columns.toml"\n'),
    "s/trace_text.toml": serving('workloads_file = "w/trace_text.toml"\n'),
    "s/trace_missing.toml": serving('workloads_file = "w/trace_missing.toml"\n'),
    "s/trace_huge_length.toml": serving('workloads_file = "w/trace_huge_length.toml"\n'),
    "s/workload_cv.toml": serving('workloads_file = "w/cv.toml"\n'),
    "s/workload_turns.toml": serving('workloads_file = "w/turns.toml"\n'),
    "s/workload_slo.toml": serving('workloads_file = "w/slo.toml"\n'),
    "s/workload_unknown.toml": serving('workloads_file = "w/unknown.toml"\n'),
    "s/workload_offline.toml": serving('workloads_file = "w/offline.toml"\n'),
    "s/workload_random.toml": serving('workloads_file = "w/random.toml"\n'),
    "s/levers_draft.toml": serving('levers_file = "l/draft.toml"\n'),
    "s/levers_gamma.toml": serving('levers_file = "l/gamma.toml"\n'),
    "s/levers_alpha.toml": serving('levers_file = "l/alpha.toml"\n'),
    "s/levers_unknown.toml": serving('levers_file = "l/unknown.toml"\n'),
    "s/levers_random.toml": serving('levers_file = "l/random.toml"\n'),
    "s/cluster_tp.toml": serving('cluster_file = "c/tp.toml"\n'),
    "s/cluster_fit.toml": serving('cluster_file = "c/fit.toml"\n'),
    "s/cluster_gpus.toml": serving('cluster_file = "c/gpus.toml"\n'),
    "s/cluster_model.toml": serving('cluster_file = "c/model.toml"\n'),
    "s/cluster_devices.toml": serving('cluster_file = "c/devices.toml"\n'),
    "s/cluster_instances.toml": serving('cluster_file = "c/instances.toml"\n'),
    "s/cluster_batch_cap.toml": serving('cluster_file = "c/batch_cap.toml"\n'),
    "s/cluster_format.toml": serving('cluster_file = "c/format.toml"\n'),
    "s/cluster_random.toml": serving('cluster_file = "c/random.toml"\n'),
    "s/w/mean_over_max.toml": workload(WORKLOAD_OK + "output_mean_tokens = 5000.0\noutput_max_tokens = 100\n"
                                       "prompt_mean_tokens = 10.0\nprompt_cv = 0.1\nprompt_max_tokens = 100\n"
                                       "output_cv = 0.1\n"),
    "s/w/trace_random.toml": workload(WORKLOAD_OK + 'trace = "random.csv"\n'),
    "s/w/trace_negative.toml": workload(WORKLOAD_OK + 'trace = "negative.csv"\n'),
    "s/w/trace_columns.toml": workload(WORKLOAD_OK + 'trace = "columns.csv"\n'),
    "s/w/trace_text.toml": workload(WORKLOAD_OK + 'trace = "text.csv"\n'),
    "s/w/trace_missing.toml": workload(WORKLOAD_OK + 'trace = "nope.csv"\n'),
    "s/w/trace_huge_length.toml": workload(WORKLOAD_OK + 'trace = "huge.csv"\n'),
    "s/w/random.csv": RANDOM,
    "s/replay_truncated.toml": serving('workloads_file = "w/replay_truncated.toml"\n'),
    "s/replay_random.toml": serving('workloads_file = "w/replay_random.toml"\n'),
    "s/w/replay_truncated.toml": workload(WORKLOAD_OK + 'replay = "truncated.jsonl"\n'),
    "s/w/replay_random.toml": workload(WORKLOAD_OK + 'replay = "random.csv"\n'),
    "s/w/truncated.jsonl": '{"timestamp": 0, "input_length": 9, "output_length": 2}\n{"timestamp": 5, "input_le',
    "t/backwards.csv": "t_s,input_tokens,output_tokens\n5,10,2\n4,10,2\n",
    "t/length.jsonl": '{"timestamp": 0, "input_length": 9, "output_length": 0}\n',
    "t/cut.jsonl.gz": gzip.compress(b'{"timestamp": 0, "input_length": 9, "output_length": 2}\n' * 200)[:60],
    "s/w/negative.csv": "input_tokens,output_tokens\n100,20\n-5,20\n",
    "s/w/columns.csv": "prompt,completion\n100,20\n",
    "s/w/text.csv": "input_tokens,output_tokens\n100,many\n",
    "s/w/huge.csv": "input_tokens,output_tokens\n100,99999999\n",
    "s/w/cv.toml": workload(WORKLOAD_OK + "prompt_mean_tokens = 10.0\nprompt_cv = 50.0\nprompt_max_tokens = 100\n"
                            "output_mean_tokens = 10.0\noutput_cv = 0.1\noutput_max_tokens = 100\n"),
    "s/w/turns.toml": workload(WORKLOAD_OK + "turns = 0\nprompt_mean_tokens = 10.0\nprompt_cv = 0.1\n"
                               "prompt_max_tokens = 100\noutput_mean_tokens = 10.0\noutput_cv = 0.1\n"
                               "output_max_tokens = 100\n"),
    "s/w/slo.toml": workload('source = "s"\nttft_slo_s = -1.0\ntpot_slo_s = 0.1\nprompt_mean_tokens = 10.0\n'
                             "prompt_cv = 0.1\nprompt_max_tokens = 100\noutput_mean_tokens = 10.0\n"
                             "output_cv = 0.1\noutput_max_tokens = 100\n"),
    "s/w/unknown.toml": workload(WORKLOAD_OK + "colour = 1\n"),
    "s/w/offline.toml": workload(WORKLOAD_OK + 'offline = "yes"\nprompt_mean_tokens = 10.0\nprompt_cv = 0.1\n'
                                 "prompt_max_tokens = 100\noutput_mean_tokens = 10.0\noutput_cv = 0.1\n"
                                 "output_max_tokens = 100\n"),
    "s/w/random.toml": RANDOM,
    "s/l/draft.toml": '[levers.baseline]\ndraft = "none"\n[levers.x]\ndraft = "eagle"\ngamma = 3\nalpha = 0.7\n',
    "s/l/gamma.toml": '[levers.baseline]\ndraft = "none"\n[levers.x]\ndraft = "mtp"\ngamma = 2147483648\nalpha = 0.7\n',
    "s/l/alpha.toml": '[levers.baseline]\ndraft = "none"\n[levers.x]\ndraft = "mtp"\ngamma = 3\nalpha = 7\n',
    "s/l/unknown.toml": '[levers.baseline]\ndraft = "none"\ncolour = 1\n',
    "s/l/random.toml": RANDOM,
    "s/c/tp.toml": cluster('model = "llama-3-8b"\ninstances = 1\ntp = 5\ndevices = ["H100"]\n'),
    "s/c/fit.toml": cluster('model = "llama-3-70b"\ninstances = 8\ntp = 1\ndevices = ["H100"]\n'),
    "s/c/gpus.toml": cluster(CLUSTER_OK + "gpus = 3\n"),
    "s/c/model.toml": cluster('model = "gpt-5"\ninstances = 1\ntp = 1\ndevices = ["H100"]\n'),
    "s/c/devices.toml": cluster('model = "llama-3-8b"\ninstances = 1\ntp = 1\ndevices = []\n'),
    "s/c/instances.toml": cluster('model = "llama-3-8b"\ninstances = 0\ntp = 1\ndevices = ["H100"]\n'),
    "s/c/batch_cap.toml": cluster(CLUSTER_OK + "batch_cap = 1e300\n"),
    "s/c/format.toml": cluster(CLUSTER_OK + 'weight_format = "fp3"\n'),
    "s/c/random.toml": RANDOM,
    "q/random.sql": RANDOM,
    "q/two.sql": "-- two: two statements\nselect 1; select 2\n",
}


@dataclass(frozen=True)
class Cli:
    """A command line; ``{files}`` and ``{wh}`` stand for the case files' folder and the warehouse."""

    id: str
    args: tuple[str, ...]
    where: str
    field: str

    def argv(self, ctx: dict[str, str]) -> list[str]:
        args = list(self.args)
        for key, value in ctx.items():
            args = [a.replace("{" + key + "}", value) for a in args]
        return args if "--warehouse" in args or args[0] in ("devices", "models", "nope", "workload") else \
            [*args, "--warehouse", ctx["wh"]]


def run(name: str, field: str) -> Cli:
    return Cli(f"run-{name}", ("run", f"g/{name}.toml"), f"g/{name}.toml", field)


def simulate(name: str, where: str, field: str) -> Cli:
    return Cli(f"simulate-{name}", ("simulate", f"s/{name}.toml"), where, field)


CLI: list[Cli] = [
    run("syntax", "not valid TOML"), run("unknown_key", "colour"), run("no_name", "name"),
    run("empty_name", "name"), run("int_name", "name = 3"), run("int_description", "description = 4"),
    run("axes_scalar", "axes = 3"), run("unknown_axis", "axes.colour"), run("device", "axes.device = 'H900'"),
    run("device_int", "axes.device = 1"), run("model", "axes.model = 'gpt-5'"),
    run("draft", "axes.draft = 'eagle'"), run("draft_vocab", "draft = 'qwen2.5-7b'"),
    run("tp_zero", "axes.tp = 0"), run("tp_huge", "axes.tp = 4096"), run("tp_divisor", "axes.tp = 3"),
    run("tp_float", "axes.tp = 1.5"), run("batch_zero", "axes.batch = 0"),
    run("batch_1e300", "axes.batch = 1e+300"), run("batch_negative", "axes.batch = -8"),
    run("batch_text", "axes.batch = '8'"), run("batch_bool", "axes.batch = True"),
    run("batch_inf", "axes.batch = inf"), run("context_zero", "axes.context = 0"),
    run("context_huge", "axes.context = 1099511627776"), run("gamma_negative", "axes.gamma = -1"),
    run("gamma_2e31", "axes.gamma = 2147483648"), run("gamma_half", "axes.gamma = 0.5"),
    run("alpha_big", "axes.alpha = 1.5"), run("alpha_negative", "axes.alpha = -0.1"),
    run("alpha_nan", "axes.alpha = nan"), run("alpha_text", "axes.alpha = 'high'"),
    run("empty_axis", "axes.batch = []"), run("duplicates", "axes.batch"),
    run("range_no_num", "missing num"), run("range_num_zero", "axes.batch.num = 0"),
    run("range_num_huge", "axes.alpha.num = 10000000"), run("range_scale", "axes.batch.scale = 'cubic'"),
    run("range_log_zero", "axes.batch.start = 0"), run("range_key", "axes.batch.step"),
    run("range_names", "axes.device"), run("range_stop_text", "axes.batch.stop = 'many'"),
    run("range_alpha_out", "axes.alpha = 1.5"), run("weight_format", "axes.weight_format = 'fp3'"),
    run("kv_format", "axes.kv_format = 'int2'"), run("too_many_points", "points"),
    run("random", "is not UTF-8"), run("nul", "NUL"), run("config_missing", "no such config.json"),
    run("config_bad_json", "not valid JSON"), run("config_fields", "missing num_hidden_layers"),
    run("config_heads", "num_key_value_heads = 5"), run("config_huge", "hidden_size"),
    run("config_tp", "axes.tp = 64"), run("models_file_missing", "no such models file"),
    run("models_file_clash", "models.llama-3-8b"), run("models_file_fields", "[models.mine]"),
    Cli("run-missing", ("run", "g/nope.toml"), "g/nope.toml", "no such grid file"),
    Cli("run-folder", ("run", "g"), "'g'", "is a directory"),
    Cli("run-dev-zero", ("run", "/dev/zero"), "/dev/zero", "size"),
    Cli("run-chunk-points", ("run", "g/ok.toml", "--chunk-points", "0"), "--chunk-points",
        "= 0"),
    Cli("run-limit", ("run", "g/batch_zero.toml", "--limit", "x"), "--limit", "'x'"),
    Cli("run-limit-negative", ("run", "g/ok.toml", "--limit", "-1"), "--limit", "-1"),
    Cli("run-format", ("run", "g/batch_zero.toml", "--format", "xml"), "--format", "'xml'"),
    simulate("random", "s/random.toml", "is not UTF-8"), simulate("syntax", "s/syntax.toml", "not valid TOML"),
    simulate("unknown_top", "s/unknown_top.toml", "colour"), simulate("no_serving", "s/no_serving.toml", "serving"),
    simulate("serving_scalar", "s/serving_scalar.toml", "[serving]"),
    simulate("unknown_key", "s/unknown_key.toml", "speed"), simulate("workload", "s/workload.toml", "'poetry'"),
    simulate("lever", "s/lever.toml", "'magic'"), simulate("lever_twice", "s/lever_twice.toml", "'baseline' twice"),
    simulate("workloads_empty", "s/workloads_empty.toml", "workloads = []"),
    simulate("baseline", "s/baseline.toml", "baseline = 'mtp'"), simulate("device", "s/device.toml", "'Z9'"),
    simulate("reference_device", "s/reference_device.toml", "reference_device = 'B200'"),
    simulate("reference_loads", "s/reference_loads.toml", "reference_loads.poetry"),
    simulate("reference_load_negative", "s/reference_load_negative.toml", "chat = -1.0"),
    simulate("rates", "s/rates.toml", "rates_per_call = 0"),
    simulate("rates_huge", "s/rates_huge.toml", "rates_per_call = 1e+300"),
    simulate("search", "s/search.toml", "search = 'golden' is not allowed; expected one of interpolate, bisect, bracket"),
    simulate("search_int", "s/search_int.toml", "search = 3 is not allowed"),
    simulate("workloads_file_missing", "nope.toml", "no such file"),
    simulate("mean_over_max", "mean_over_max.toml [workloads.w]", "output_mean_tokens = 5000.0"),
    simulate("trace_random", "random.csv", "is not UTF-8"),
    simulate("trace_negative", "negative.csv", "input_tokens = '-5'"),
    simulate("trace_columns", "columns.csv", "input_tokens, output_tokens"),
    simulate("trace_text", "text.csv", "output_tokens = 'many'"),
    simulate("trace_missing", "nope.csv", "no such trace CSV"),
    simulate("trace_huge_length", "huge.csv", "output_tokens = '99999999'"),
    simulate("replay_truncated", "truncated.jsonl", "line 2"), simulate("replay_random", "random.csv", "not UTF-8"),
    Cli("fit-backwards", ("workload", "fit", "t/backwards.csv"), "t/backwards.csv", "line 3"),
    Cli("fit-length", ("workload", "fit", "t/length.jsonl"), "t/length.jsonl", "output_length = 0"),
    Cli("fit-gzip", ("workload", "fit", "t/cut.jsonl.gz"), "t/cut.jsonl.gz", "truncated or corrupt"),
    Cli("fit-missing", ("workload", "fit", "t/nope.jsonl"), "t/nope.jsonl", "cannot read the trace"),
    simulate("workload_cv", "cv.toml [workloads.w]", "prompt_cv = 50.0"),
    simulate("workload_turns", "turns.toml [workloads.w]", "turns = 0"),
    simulate("workload_slo", "slo.toml [workloads.w]", "ttft_slo_s = -1.0"),
    simulate("workload_unknown", "unknown.toml [workloads.w]", "colour"),
    simulate("workload_offline", "offline.toml [workloads.w]", "offline = 'yes'"),
    simulate("workload_random", "w/random.toml", "is not UTF-8"),
    simulate("levers_draft", "draft.toml", "draft = 'eagle'"),
    simulate("levers_gamma", "gamma.toml", "gamma = 2147483648"),
    simulate("levers_alpha", "alpha.toml", "alpha = 7"),
    simulate("levers_unknown", "unknown.toml", "colour"),
    simulate("levers_random", "l/random.toml", "is not UTF-8"),
    simulate("cluster_tp", "tp.toml [cluster]", "tp = 5"),
    simulate("cluster_fit", "fit.toml [cluster]", "tp = 1"),
    simulate("cluster_gpus", "gpus.toml [cluster]", "gpus = 3"),
    simulate("cluster_model", "model.toml [cluster]", "model = 'gpt-5'"),
    simulate("cluster_devices", "devices.toml [cluster]", "devices = []"),
    simulate("cluster_instances", "instances.toml [cluster]", "instances = 0"),
    simulate("cluster_batch_cap", "batch_cap.toml [cluster]", "batch_cap = 1e+300"),
    simulate("cluster_format", "format.toml [cluster]", "weight_format = 'fp3'"),
    simulate("cluster_random", "c/random.toml", "is not UTF-8"),
    Cli("sql-copy-committed", ("sql", "COPY (select 42 as x) TO '{wh}/sweepkit.duckdb'"), "sql", "COPY"),
    Cli("sql-copy-anywhere", ("sql", "COPY (select 1) TO 'out.csv'"), "sql", "COPY"),
    Cli("sql-export", ("sql", "EXPORT DATABASE 'dump'"), "sql", "EXPORT"),
    Cli("sql-two", ("sql", "select 1; select 2"), "sql", "2 statements"),
    Cli("sql-explain-analyze-copy", ("sql", "EXPLAIN ANALYZE COPY (select 1) TO '{wh}/sweepkit.duckdb'"), "sql",
        "EXPLAIN of a COPY"),
    Cli("sql-install", ("sql", "INSTALL httpfs"), "sql", "LOAD"),
    Cli("sql-load", ("sql", "LOAD httpfs"), "sql", "LOAD"),
    Cli("sql-attach", ("sql", "ATTACH 'other.db'"), "sql", "ATTACH"),
    Cli("sql-set", ("sql", "SET enable_external_access = true"), "sql", "SET"),
    Cli("sql-create", ("sql", "CREATE TABLE t AS SELECT 1"), "sql", "CREATE"),
    Cli("sql-insert", ("sql", "INSERT INTO runs SELECT * FROM runs"), "sql", "INSERT"),
    Cli("sql-delete", ("sql", "DELETE FROM runs"), "sql", "DELETE"),
    Cli("sql-drop", ("sql", "DROP VIEW decode"), "sql", "DROP"),
    Cli("sql-pragma", ("sql", "PRAGMA enable_profiling"), "sql", "PRAGMA"),
    Cli("sql-read-outside", ("sql", "select * from read_csv('/etc/passwd')"), "sql", "/etc/passwd"),
    Cli("sql-read-http", ("sql", "select * from read_parquet('https://example.invalid/x.parquet')"), "sql",
        "https://example.invalid"),
    Cli("sql-empty", ("sql", " "), "sql", "0 statements"),
    Cli("sql-parse", ("sql", "selec 1"), "sql", "Parser Error"),
    Cli("sql-catalog", ("sql", "select * from nowhere"), "sql", "nowhere"),
    Cli("sql-warehouse-empty", ("sql", "select 1", "--warehouse", ""), "--warehouse", "''"),
    Cli("sql-warehouse-missing", ("sql", "select 1", "--warehouse", "{files}/no-such-warehouse"), "--warehouse",
        "no-such-warehouse"),
    Cli("runs-warehouse-missing", ("runs", "--warehouse", "{files}/typo"), "--warehouse", "typo"),
    Cli("drop", ("drop", "nope", "--yes"), "run_id", "'nope'"),
    Cli("runs-format", ("runs", "--format", "yaml"), "--format", "'yaml'"),
    Cli("query-unknown", ("query", "nope"), "query", "'nope'"),
    Cli("query-param", ("query", "speedup_table", "--param", "colour=red"), "query speedup_table", "'colour'"),
    Cli("query-param-form", ("query", "speedup_table", "--param", "device"), "--param", "'device'"),
    Cli("query-param-twice", ("query", "speedup_table", "-p", "device=A", "-p", "device=B"), "--param",
        "'device=B'"),
    Cli("query-file-random", ("query", "q/random.sql"), "q/random.sql", "is not UTF-8"),
    Cli("query-file-two", ("query", "q/two.sql"), "q/two.sql", "2 statements"),
    Cli("query-warehouse-missing", ("query", "bounds", "--warehouse", "{files}/typo"), "--warehouse", "typo"),
    Cli("export-view", ("export", "decode"), "VIEW", "'decode'"),
    Cli("export-into-db", ("export", "v_decode", "--as", "csv", "--out", "{wh}/sweepkit.duckdb"), "--out",
        "outside the warehouse"),
    Cli("export-into-parquet", ("export", "v_decode", "--out", "{wh}/parquet/x.parquet"), "--out",
        "outside the warehouse"),
    Cli("export-no-folder", ("export", "v_decode", "--out", "no/such/folder/x.parquet"), "--out",
        "an existing folder"),
    Cli("export-format", ("export", "v_decode", "--as", "xlsx"), "--as", "'xlsx'"),
    Cli("matrix-run-id", ("matrix", "--run-id", "bogus"), "--run-id", "'bogus'"),
    Cli("matrix-decode-run", ("matrix", "--run-id", "{decode_run}"), "--run-id", "decode run"),
    Cli("matrix-device", ("matrix", "--device", "Z9"), "--device", "'Z9'"),
    Cli("trace-seed", ("trace", "--seed", "99999999999999999999"), "seed", "99999999999999999999"),
    Cli("trace-seed-negative", ("trace", "--seed", "-1"), "seed", "-1"),
    Cli("trace-outputs", ("trace", "--outputs", "1000000"), "outputs", "1000000"),
    Cli("trace-outputs-count", ("trace", "--outputs", "1,2,3"), "outputs", "'1,2,3'"),
    Cli("trace-prompts-negative", ("trace", "--prompts=-5"), "--prompts", "'-5'"),
    Cli("trace-prompts-text", ("trace", "--prompts", "many"), "--prompts", "'many'"),
    Cli("trace-prompts-huge", ("trace", "--prompts", "99999999"), "prompts", "99999999"),
    Cli("trace-gamma", ("trace", "--gamma", "0"), "gamma", "0"),
    Cli("trace-gamma-huge", ("trace", "--gamma", "2147483648"), "gamma", "2147483648"),
    Cli("trace-alpha", ("trace", "--alpha", "2"), "alpha", "2.0"),
    Cli("trace-alpha-nan", ("trace", "--alpha", "nan"), "alpha", "nan"),
    Cli("trace-device", ("trace", "--device", "Z9"), "device", "'Z9'"),
    Cli("trace-model", ("trace", "--model", "gpt-5"), "model", "'gpt-5'"),
    Cli("trace-draft-none", ("trace", "--draft", "none"), "draft", "'none'"),
    Cli("trace-warehouse-empty", ("trace", "--warehouse", ""), "--warehouse", "''"),
    Cli("report-warehouse-missing", ("report", "--warehouse", "{files}/typo", "--no-png"), "--warehouse", "typo"),
    simulate("workloads_file_folder", "s/workloads_file_folder.toml [serving]", "workloads_file = '.' is a folder"),
    simulate("levers_file_folder", "s/levers_file_folder.toml [serving]", "levers_file = 'w' is a folder"),
    simulate("device_not_served", "s/device_not_served.toml [serving]",
             "devices = 'MI300X' is not allowed; expected one of H100, H200, B200, A100: a serving grid simulates "
             "the devices of its cluster (sweepkit/serving/data/cluster.toml: H100, H200, B200) and A100; to serve "
             "on MI300X, give a cluster_file whose devices list it"),
    Cli("export-folder", ("export", "v_decode", "--out", "g"), "'g'", "is a directory"),
    Cli("export-dangling-link", ("export", "v_decode", "--out", "dangling.parquet"), "--out",
        "'dangling.parquet' is not allowed; expected a regular file or a new path (it is a link to nothing)"),
    Cli("verify-warehouse-missing", ("verify", "--warehouse", "{files}/typo"), "--warehouse", "typo"),
    Cli("verify-format", ("verify", "--format", "yaml"), "--format", "'yaml'"),
    Cli("verify-warehouse-empty", ("verify", "--warehouse", ""), "--warehouse", "''"),
    Cli("serve-workloads-folder", ("serve", "--workloads", "g"), "'g'", "is a directory"),
    Cli("unknown-command", ("nope",), "sweepkit", "'nope'"),
]


@dataclass(frozen=True)
class Api:
    """Python that must raise InputError; ``WH`` is the warehouse folder, ``{files}`` the case files."""

    id: str
    code: str
    where: str
    field: str


API: list[Api] = [
    Api("evaluate-batch", "import sweepkit; sweepkit.evaluate(device='H100', model='llama-3-8b', batch=1e300)",
        "batch", "1e+300"),
    Api("evaluate-tp", "import sweepkit; sweepkit.evaluate(device='H100', model='llama-3-8b', tp=4096)", "tp",
        "4096"),
    Api("evaluate-tp-divisor", "import sweepkit; sweepkit.evaluate(device='H100', model='llama-3-8b', tp=3)",
        "tp", "divisor"),
    Api("evaluate-gamma", "import sweepkit; sweepkit.evaluate(device='H100', model='llama-3-8b', gamma=2**31)",
        "gamma", "2147483648"),
    Api("evaluate-device", "import sweepkit; sweepkit.evaluate(device='Z9', model='llama-3-8b')", "device",
        "'Z9'"),
    Api("evaluate-alpha", "import sweepkit; sweepkit.evaluate(device='H100', model='llama-3-8b', alpha=2)",
        "alpha", "2"),
    Api("evaluate-device-list", "import sweepkit; sweepkit.evaluate(device=['H100'], model='llama-3-8b')",
        "device", "['H100'] is not allowed; expected one name as a string"),
    Api("evaluate-draft-list", "import sweepkit; sweepkit.evaluate(device='H100', model='llama-3-8b', draft=['mtp'])",
        "draft", "['mtp'] is not allowed; expected one name as a string"),
    Api("evaluate-model-int", "import sweepkit; sweepkit.evaluate(device='H100', model=8)", "model", "8"),
    Api("evaluate-format-none", "import sweepkit; sweepkit.evaluate(device='H100', model='llama-3-8b', "
        "kv_format=None)", "kv_format", "None"),
    Api("evaluate-acceptance-list", "import sweepkit; sweepkit.evaluate(device='H100', model='llama-3-8b', "
        "acceptance=['x'])", "acceptance", "['x']"),
    Api("evaluate-alpha-list", "import sweepkit; sweepkit.evaluate(device='H100', model='llama-3-8b', alpha=[0.7])",
        "alpha", "[0.7]"),
    Api("evaluate-models-file-int", "import sweepkit; sweepkit.evaluate(device='H100', model='llama-3-8b', "
        "models_file=3)", "models_file", "3"),
    Api("evaluate-config-missing", "import sweepkit; sweepkit.evaluate(device='H100', model='no/config.json')",
        "no/config.json", "no such config.json"),
    Api("evaluate-config-bad", "import sweepkit; sweepkit.evaluate(device='H100', model='g/cfg/bad.json')",
        "g/cfg/bad.json", "not valid JSON"),
    Api("parse-grid", "from sweepkit.sweep.grid import parse_grid; parse_grid('name = 1', 'mine.toml')",
        "mine.toml", "name = 1"),
    Api("load-grid-random", "from sweepkit.sweep.grid import load_grid; load_grid('g/random.toml')",
        "g/random.toml", "is not UTF-8"),
    Api("workloads", "from sweepkit.serving.workloads import load_workloads; "
        "load_workloads('s/w/mean_over_max.toml')", "mean_over_max.toml", "output_mean_tokens"),
    Api("cluster", "from sweepkit.serving.cluster import load_cluster; load_cluster('s/c/fit.toml')",
        "fit.toml", "weights"),
    Api("levers", "from sweepkit.serving.levers import load_levers; load_levers('s/l/alpha.toml')", "alpha.toml",
        "alpha = 7"),
    Api("query-copy", "from sweepkit.store import Warehouse; Warehouse(WH).query(\"copy (select 1) to 'x.csv'\")",
        "sql", "COPY"),
    Api("query-two", "from sweepkit.store import Warehouse; Warehouse(WH).query('select 1; select 2')", "sql",
        "2 statements"),
    Api("query-attach", "from sweepkit.store import Warehouse; Warehouse(WH).query(\"attach 'x.db'\")", "sql",
        "ATTACH"),
    Api("drop-runs", "from sweepkit.store import Warehouse; from sweepkit.store.drop import drop_runs; "
        "drop_runs(Warehouse(WH), ['nope'])", "run_id", "'nope'"),
    Api("run-query", "from sweepkit.store import Warehouse, run_query; run_query(Warehouse(WH), 'nope')",
        "query", "'nope'"),
    Api("trace-scenario", "from sweepkit.trace.scheduler import Scenario; Scenario(seed=2**64).checked()", "seed",
        str(2**64)),
    Api("hf-config", "from sweepkit.catalogue import load_hf_config; load_hf_config('s/w/random.csv')",
        "random.csv", "is not UTF-8"),
    Api("write-run-kind", "from sweepkit.store import Warehouse; Warehouse(WH).write_run(kind='x', grid_name='g',"
        " grid_toml='', grid_sha256='s', tables={})", "kind", "'x'"),
]


DRIVER = r'''
import contextlib, hashlib, json, os, sys, tempfile, traceback
from pathlib import Path

cases, wh, out_path = json.load(open(sys.argv[1])), Path(sys.argv[2]), sys.argv[3]

def fingerprint():
    return {str(p.relative_to(wh)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(wh.rglob("*")) if p.is_file() and p.name != ".commit-gate"}

def captured(fn):
    """Run fn with fds 1 and 2 redirected to files; returns (result, stdout, stderr)."""
    sys.stdout.flush(); sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        os.dup2(o.fileno(), 1); os.dup2(e.fileno(), 2)
        try:
            result = fn()
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(saved[0]); os.close(saved[1])
        o.seek(0); e.seek(0)
        return result, o.read().decode("utf-8", "replace"), e.read().decode("utf-8", "replace")

def cli(argv):
    from sweepkit.cli import main
    try:
        main.main(args=argv, prog_name="sweepkit", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        return "traceback"
    return 0

def api(code):
    from sweepkit.errors import InputError
    scope = {"WH": str(wh)}
    try:
        exec(code, scope)
    except InputError as exc:
        return "InputError: " + str(exc)
    except BaseException:
        return "traceback: " + traceback.format_exc()
    return "no error"

results = []
for case in cases:
    before = fingerprint()
    os.chdir(case["cwd"])
    if case["kind"] == "cli":
        code, out, err = captured(lambda: cli(case["argv"]))
    else:
        code, out, err = captured(lambda: api(case["code"]))
    results.append({"id": case["id"], "code": code, "out": out, "err": err, "unchanged": fingerprint() == before})
json.dump(results, open(out_path, "w"))
'''


@dataclass(frozen=True)
class Result:
    code: object
    out: str
    err: str
    unchanged: bool


def _fingerprint(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".commit-gate"}


def _census(root: Path) -> dict:
    """Runs and row counts, as the warehouse answers them."""
    from sweepkit.store import Warehouse

    wh = Warehouse(root)
    return {"runs": wh.query("select run_id, kind, row_count from runs order by run_id").to_pylist(),
            "decode": wh.query("select count(*) n from decode").column(0)[0].as_py(),
            "trace_steps": wh.query("select count(*) n from trace_steps").column(0)[0].as_py(),
            "files": wh.query("select count(*) n from run_files").column(0)[0].as_py()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[dict[str, Result], dict[str, str]]:
    """Write the case files, fill a warehouse, run every case in two driver processes, check the warehouse."""
    base = tmp_path_factory.mktemp("corpus")
    files = base / "files"
    files.mkdir()
    for name, content in FILES.items():
        path = files / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    (files / "dangling.parquet").symlink_to(files / "no-such-target.parquet")
    wh = base / "wh"
    for argv in (["run", str(ROOT / "grids/seed.toml")], ["trace", "--outputs", "8"]):
        p = subprocess.run([sys.executable, "-m", "sweepkit.cli", *argv, "--warehouse", str(wh), "--format", "csv"],
                           env=ENV, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
    before, census = _fingerprint(wh), _census(wh)
    ctx = {"files": str(files), "wh": str(wh),
           "decode_run": next(r["run_id"] for r in census["runs"] if r["kind"] == "decode")}
    cases = [{"id": c.id, "kind": "cli", "argv": c.argv(ctx), "cwd": str(files)} for c in CLI] + \
            [{"id": c.id, "kind": "api", "code": c.code.replace("{files}", str(files)), "cwd": str(files)}
             for c in API]
    groups = [cases[0::2], cases[1::2]]                   # two processes: one per CI core
    procs = []
    for k, group in enumerate(groups):
        (base / f"cases-{k}.json").write_text(json.dumps(group))
        procs.append(subprocess.Popen([sys.executable, "-c", DRIVER, str(base / f"cases-{k}.json"), str(wh),
                                       str(base / f"results-{k}.json")], env=ENV, cwd=base,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    results = {}
    for k in range(len(groups)):
        for r in json.loads((base / f"results-{k}.json").read_text()):
            results[r["id"]] = Result(r["code"], r["out"], r["err"], r["unchanged"])
    assert _fingerprint(wh) == before and _census(wh) == census
    return results, ctx


def test_the_corpus_is_big_enough():
    assert len(CLI) + len(API) >= 100
    assert len({c.id for c in CLI} | {c.id for c in API}) == len(CLI) + len(API)


@pytest.mark.parametrize("case", CLI, ids=[c.id for c in CLI])
def test_cli_case(corpus, case):
    results, ctx = corpus
    r = results[case.id]
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert r.code == 2, (r.code, r.err)
    assert r.out == "" and "Traceback" not in r.err, r.err
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.err
    assert case.where in lines[0] and case.field in lines[0], lines[0]
    assert r.unchanged


@pytest.mark.parametrize("case", API, ids=[c.id for c in API])
def test_api_case(corpus, case):
    r = corpus[0][case.id]
    assert isinstance(r.code, str) and r.code.startswith("InputError: "), r.code
    message = r.code[len("InputError: "):]
    assert "\n" not in message.strip() and "Traceback" not in message
    assert case.where in message and case.field in message, message
    assert r.unchanged


@pytest.mark.parametrize("index", [0, 41, 88])
def test_a_fresh_process_answers_as_the_driver_does(corpus, index):
    results, ctx = corpus
    case = CLI[index]
    p = subprocess.run([sys.executable, "-m", "sweepkit.cli", *case.argv(ctx)], env=ENV, cwd=ctx["files"],
                       capture_output=True, text=True, timeout=300)
    r = results[case.id]
    assert (p.returncode, p.stdout, p.stderr.strip()) == (r.code, r.out, r.err.strip())
