"""The engine agrees with an independent plain-numpy implementation of the same maths (float64)."""

import types

import numpy as np
import pyarrow as pa

from sweepkit.sweep.engine import iter_decode_chunks

from sweepkit.sweep.numpy_reference import evaluate_numpy

AXES = dict(device=("H100", "B200", "A100-40GB"), model=("llama-3-8b", "llama-3-70b"),
            draft=("none", "mtp", "llama-3.2-1b"), tp=(1, 4), weight_format=("bf16", "fp8"), kv_format=("bf16",),
            compute_format=("bf16", "fp8"), batch=(1, 64, 512), context=(256, 8192), gamma=(0, 2, 4, 7),
            alpha=(0.0, 0.6, 1.0))


MESH_AXES = dict(AXES, device=("MI300X",), model=("llama-3-70b",), draft=("none", "mtp"), tp=(1, 2, 4, 8),
                 batch=(1, 64, 4096), context=(8192,))
"""A full-mesh device (Infinity Fabric): one-shot, two-shot and library all-reduces (batch 4,096 x 16 KiB is
over 8 MiB), at every tp the custom kernels serve."""


def test_engine_matches_numpy_reference():
    _check(AXES)


def test_engine_matches_numpy_reference_on_a_full_mesh():
    _check(MESH_AXES)


def _check(axes):
    table = pa.Table.from_batches(list(iter_decode_chunks(types.SimpleNamespace(axes=axes), 5000)))
    ref = evaluate_numpy(axes, dtype=np.float64)
    shape = (len(ref["t_plain_pass_s"]), len(axes["gamma"]), len(axes["alpha"]))
    for name, expected in ref.items():
        expected = np.broadcast_to(expected.reshape(expected.shape + (1,) * (3 - expected.ndim)), shape)
        got = table.column(name).to_numpy(zero_copy_only=False)
        if name.endswith("_bound"):
            got = np.array([{"memory": 0, "compute": 1, "power": 2}[x] for x in table.column(name).to_pylist()])
            assert (got == expected.reshape(-1)).mean() > 0.999, name
        else:
            np.testing.assert_allclose(got, expected.reshape(-1), rtol=2e-5, err_msg=name)
