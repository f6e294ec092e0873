#!/usr/bin/env bash
# The CUDA kernels of rnnx on a real GPU, against the naive references, in one short command (under 5 minutes):
#
#   bash scripts/gpu_kernels_check.sh [PYTEST_ARGS...]     # e.g. -k linear_attention, -x
#
# 1. build   the torch CUDA binding (plugins/torch/binding.cpp + every plugins/<op>/cuda/*.cu, JIT through
#            torch.utils.cpp_extension) for this device's compute capability only, MAX_JOBS = the CPU count
# 2. pytest  pytest -m gpu tests/test_cuda_kernels.py: the causal linear attention op in its version 2 layout
#            (heads packed, q (B, L, H*E) batch-first and (L, B, H*E) time-major, mask_pad with pads at both ends,
#            in the middle, rows of nothing but pads, L = 1 decode, E != M, several heads, prefill then in-place
#            steps) and the SRU scan, each against its naive twin (models/ops/*/naive.py) in fp64; no test may be
#            skipped
#
# Needs: a CUDA device (nvidia-smi lists one), nvcc (PATH, CUDA_HOME or /usr/local/cuda/bin), and a Python
# (PYTHON, default python3) with torch built with CUDA, ninja and pytest. No TensorRT, no cmake. rnnx need not be
# installed: unless rnnx.runtime already comes from this checkout, a symlink tree in $WORK maps rnnx.models /
# export / runtime / plugins to it. The plugins' enqueue on the GPU is `bash scripts/gpu_check.sh --kernels-only
# --only enqueue` (cmake and the TensorRT headers).
#
# Device tool: run(command="bash scripts/gpu_kernels_check.sh", timeout_s=420). Output: one line per step and a
# RESULT line; the full log in $OUT (the device tool's result folder) or ./gpu-results: gpu_kernels_check.log.
# Exit status: 0 both steps passed; 1 the build or a test failed (or a test was skipped); 2 a prerequisite is
# missing (one line says which). Environment: PYTHON, WORK (default /tmp/rnnx-gpu-kernels-check),
# BUILD_LIMIT_S (default 200), TEST_LIMIT_S (default 200).
set -u
set -o pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/gpu_common.sh
source "$REPO/scripts/gpu_common.sh" || exit 2
PYTHON="${PYTHON:-python3}"
WORK="${WORK:-/tmp/rnnx-gpu-kernels-check}"
BUILD_LIMIT_S="${BUILD_LIMIT_S:-200}"
TEST_LIMIT_S="${TEST_LIMIT_S:-200}"
RESULTS="${OUT:-$REPO/gpu-results}"
mkdir -p "$WORK" "$RESULTS" || exit 2
LOG="$RESULTS/gpu_kernels_check.log"
: >"$LOG"
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }
say() { echo "[$(printf '%4s' "$(elapsed)")s] $*" | tee -a "$LOG"; }

# --- prerequisites ---------------------------------------------------------------------------------------------
MISSING=()
if ! command -v nvidia-smi >/dev/null 2>&1 || ! timeout 60 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    MISSING+=("a CUDA device (nvidia-smi lists none)")
fi
NVCC="$(command -v nvcc 2>/dev/null)"
for candidate in "${CUDA_HOME:+$CUDA_HOME/bin/nvcc}" /usr/local/cuda/bin/nvcc; do
    [ -z "$NVCC" ] && [ -n "$candidate" ] && [ -x "$candidate" ] && NVCC="$candidate"
done
if [ -z "$NVCC" ]; then
    MISSING+=("nvcc (not on PATH, in CUDA_HOME or /usr/local/cuda/bin)")
else
    export CUDA_HOME="${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}"
    export PATH="$(dirname "$NVCC"):$PATH"
fi
if ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.version.cuda and torch.cuda.is_available() else 1)' \
    >/dev/null 2>&1; then
    MISSING+=("torch with CUDA ($PYTHON: torch.cuda.is_available() is not True)")
fi
"$PYTHON" -c 'import pytest' >/dev/null 2>&1 || MISSING+=("pytest ($PYTHON -m pip install pytest)")
if ! command -v ninja >/dev/null 2>&1 && ! "$PYTHON" -c 'import ninja' >/dev/null 2>&1; then
    MISSING+=("ninja (torch's JIT build needs it: $PYTHON -m pip install ninja)")
fi
if [ "${#MISSING[@]}" -gt 0 ]; then
    list="$(printf '; %s' "${MISSING[@]}")"
    echo "gpu_kernels_check: cannot run, missing: ${list#; }" | tee -a "$LOG" >&2
    exit 2
fi
# pip's ninja module puts its binary beside the interpreter's scripts.
command -v ninja >/dev/null 2>&1 || export PATH="$("$PYTHON" -c 'import ninja, os; print(ninja.BIN_DIR)'):$PATH"

# rnnx from this checkout: a symlink tree unless rnnx.runtime already is this checkout's.
use_checkout_rnnx "$WORK" || exit 2
export MAX_JOBS="${MAX_JOBS:-$(nproc)}"
{
    nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
    "$NVCC" --version | tail -n 2
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    echo "PYTHONPATH=${PYTHONPATH:-} MAX_JOBS=$MAX_JOBS"
    git -C "$REPO" log -1 --format='commit %h %s' 2>/dev/null
    git -C "$REPO" status --short 2>/dev/null | head -n 40
} >>"$LOG" 2>&1
say "device: $(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader | head -n 1)"

# --- 1. build ----------------------------------------------------------------------------------------------------
say "build: the torch CUDA binding of the kernels (limit ${BUILD_LIMIT_S}s)"
timeout "$BUILD_LIMIT_S" "$PYTHON" - >>"$LOG" 2>&1 <<'EOF'
import sys
import time

from rnnx.models.ops import cuda

start = time.time()
ext = cuda.load()
if ext is None:
    print(f"BUILD FAILED:\n{cuda.EXTENSION.error}")
    sys.exit(1)
print(f"built {ext.__file__} in {time.time() - start:.0f}s")
EOF
rc=$?
if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 124 ] && say "build: FAIL (timed out after ${BUILD_LIMIT_S}s)" || say "build: FAIL (exit $rc)"
    grep -E "error|BUILD FAILED" "$LOG" | head -n 20
    say "RESULT: FAIL (log: $LOG)"
    exit 1
fi
say "build: PASS ($(grep -E '^built ' "$LOG" | tail -n 1 | sed 's/.* in /in /'))"

# --- 2. pytest ---------------------------------------------------------------------------------------------------
say "pytest: -m gpu tests/test_cuda_kernels.py $* (limit ${TEST_LIMIT_S}s)"
cd "$REPO" || exit 2
timeout "$TEST_LIMIT_S" "$PYTHON" -m pytest -o addopts="" -q -m gpu -p no:cacheprovider -rfEs --durations=5 \
    tests/test_cuda_kernels.py "$@" >"$WORK/pytest.log" 2>&1
rc=$?
cat "$WORK/pytest.log" >>"$LOG"
summary="$(grep -E '[0-9]+ (passed|failed|error|skipped|deselected)' "$WORK/pytest.log" | tail -n 1)"
if [ "$rc" -eq 124 ]; then
    say "pytest: FAIL (timed out after ${TEST_LIMIT_S}s)"
    rc=1
elif [ "$rc" -ne 0 ]; then
    grep -E '^(FAILED|ERROR) ' "$WORK/pytest.log" | head -n 30
    say "pytest: FAIL ($summary)"
    rc=1
elif grep -qE '[0-9]+ skipped' <<<"$summary" || ! grep -qE '[0-9]+ passed' <<<"$summary"; then
    grep -E '^SKIPPED' "$WORK/pytest.log" | head -n 10
    say "pytest: FAIL (tests were skipped or none ran: $summary)"
    rc=1
else
    say "pytest: PASS ($summary)"
fi
if [ "$rc" -eq 0 ]; then
    say "RESULT: PASS (log: $LOG)"
else
    say "RESULT: FAIL (log: $LOG)"
fi
exit "$rc"
