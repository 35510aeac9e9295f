"""The validation steady state of a hybrid model: each running request holds I + O positions of full-attention KV
plus its Gated DeltaNet state, s = s_lin L_lin / kv_token positions (Qwen3.5-35B-A3B in bf16: 64,389,120 B over
20,480 B per token = 3,144), so n = min(b_max, C / (I + O + s), N_tok / (1 + I / O))."""

import jax

from sweepkit.validation import parse_measurements
from sweepkit.validation.steady import kv_positions, request_positions, running
from sweepkit.validation.steady_rows import row_inputs

HEAD = "source,device,model,metric,value,unit,weight_format,kv_format,input_tokens,output_tokens\n"


def _row(model, isl, osl):
    m = parse_measurements(HEAD + f"s,H200,{model},max_output_throughput,1,tok/s,bf16,bf16,{isl},{osl}\n",
                           "s.csv")[0]
    return jax.tree_util.tree_map(lambda x: x[0], row_inputs([m], 1 << 20, 1 << 30))


def test_running_requests_count_their_state():
    with jax.enable_x64(True):
        row = _row("Qwen/Qwen3.5-35B-A3B", 32000, 100)
        assert float(request_positions(row)) == 32000 + 100 + 3144.0
        cap = float(kv_positions(row))
        assert float(running(row)) == cap / (32000 + 100 + 3144.0)
        dense = _row("qwen3-30b-a3b", 32000, 100)                     # no linear layers: s = 0
        assert float(request_positions(dense)) == 32100.0
        assert float(running(dense)) == float(kv_positions(dense)) / 32100.0
