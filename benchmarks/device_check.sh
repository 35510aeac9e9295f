#!/usr/bin/env bash
# The accelerator check (docs/performance.md, "On an accelerator"), one script for one machine with a GPU and a
# JAX built for it, run from the repository root; figures go to $OUT (a temporary folder if unset):
#   devices.txt   the JAX version, backend and devices;
#   batch.*       a batch of LANES lanes (100,000) of one program, CHUNK (8,192) a call: chat's baseline on
#                 H100 at 0.5-1.5 x its reference load (benchmarks/bench_batch.py), BATCH_S seconds at most;
#   sweep.*       the whole sweep, cold (`sweepkit simulate grids/tradeoffs.toml`, an empty compile cache), on
#                 the accelerator, SWEEP_S seconds at most (its last progress line says how far it got), and its
#                 H100 verdicts against the reference's matrix (verdicts.txt) when it ends in time.
# Packages the machine lacks (duckdb, say) install from wheels in .whl/ when that folder exists, e.g.
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 -d .whl duckdb
#
# Example:  OUT=/tmp/check LANES=1000 CHUNK=500 SWEEP_S=60 bash benchmarks/device_check.sh
set -uo pipefail
OUT=${OUT:-$(mktemp -d)}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
if [ -d .whl ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/sweepkit-site \
    .whl/*.whl || exit 2
  export PYTHONPATH=/tmp/sweepkit-site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
"$PY" -c "import jax; print('jax', jax.__version__, jax.default_backend(), jax.devices())" 2>&1 | tee "$OUT/devices.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$OUT/devices.txt" 2>/dev/null

timeout "${BATCH_S:-300}" "$PY" benchmarks/bench_batch.py --lanes "${LANES:-100000}" --chunk "${CHUNK:-8192}" \
  --json "$OUT/batch.json" > "$OUT/batch.txt" 2>&1
echo "batch: exit $?" | tee -a "$OUT/batch.txt"

SWEEPKIT_JAX_CACHE=$(mktemp -d) && export SWEEPKIT_JAX_CACHE
WH=$(mktemp -d)
SECONDS=0
timeout "${SWEEP_S:-300}" "$PY" -m sweepkit.cli simulate grids/tradeoffs.toml --warehouse "$WH" \
  > "$OUT/sweep.txt" 2> "$OUT/sweep.err"
rc=$?
echo "sweep: exit $rc, ${SECONDS} s wall; $(tr '\r' '\n' < "$OUT/sweep.err" | grep simulating | tail -1)" \
  | tee -a "$OUT/sweep.txt"
if [ "$rc" = 0 ]; then "$PY" benchmarks/compare_reference.py --warehouse "$WH" > "$OUT/verdicts.txt" 2>&1; fi
tail -3 "$OUT/batch.txt" "$OUT/verdicts.txt" 2>/dev/null
exit 0
