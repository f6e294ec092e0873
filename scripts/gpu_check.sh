#!/usr/bin/env bash
# The GPU checks of issue 4 in one command, for a machine with a CUDA device (run from the repository root):
#
#   bash scripts/gpu_check.sh
#
#   1. nvidia-smi
#   2. builds the TensorRT plugins, kernels and C++ tests (cmake; TensorRT headers from TENSORRT_ROOT, the
#      system, or .cache/tensorrt/include -- a machine without network needs that folder carried along)
#   3. ctest (plugin_enqueue_gpu runs: the plugins' enqueue on device buffers against the C++ reference)
#   4. compute-sanitizer --tool memcheck on plugin_enqueue_gpu (when compute-sanitizer is installed)
#   5. pytest -m gpu on tests/test_cuda_kernels.py and tests/test_sru_scan_op.py (the torch CUDA binding
#      JIT-builds from plugins/kernels, i.e. rnnx.plugins)
#   6. where TensorRT is importable (else recorded as SKIP with the reason): every TensorRT-marked test
#      (pytest -m tensorrt over tests/; none may be skipped), then rnnx-parity of both targets: the demo
#      exported for --target tensorrt checked on --backend tensorrt (cuda), and for --target onnxruntime on
#      --backend onnxruntime. The engine builder loads librnnx_trt_plugins.so (RNNX_TRT_PLUGINS points at
#      this build); see docs/tensorrt.md.
#   7. benchmarks/bench_cuda_kernels.py
#
# Logs go to $OUT when set (the device tool's result folder), else ./gpu-results: build.log, ctest.log,
# memcheck.log, pytest.log, tensorrt.log, parity.log, bench.log and summary.txt. Every step has a time limit so the whole run fits in
# about 9 minutes; a failed step is recorded and the next one still runs. Exit status: 0 when every step
# passed (a skipped optional step does not count as a failure), else 1.
#
# rnnx need not be installed: unless `import rnnx.models` already works, a symlink tree under /tmp maps
# rnnx.models / rnnx.export / rnnx.runtime / rnnx.plugins to models/ export/ runtime/ plugins/ (the
# package-dir mapping of pyproject.toml) and goes on PYTHONPATH. Environment: PYTHON (default python3),
# CUDA_ARCH (default: the device's compute capability from nvidia-smi, e.g. 90), BUILD_DIR (default
# build/plugins).
set -u
set -o pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
RESULTS="${OUT:-$REPO/gpu-results}"
mkdir -p "$RESULTS"
PYTHON="${PYTHON:-python3}"
BUILD_DIR="${BUILD_DIR:-build/plugins}"
export PYTHONUNBUFFERED=1
START=$(date +%s)
SUMMARY="$RESULTS/summary.txt"
: >"$SUMMARY"
FAILED=0

note() { echo "$*" | tee -a "$SUMMARY"; }
# step NAME LOG LIMIT_S COMMAND...: runs COMMAND under `timeout`, appending stdout+stderr to LOG; records the result.
step() {
    local name="$1" log="$2" limit="$3"
    shift 3
    local t0=$(date +%s)
    echo "=== $name: $* (limit ${limit}s)" | tee -a "$log"
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log"
    local rc=$?
    local took=$(($(date +%s) - t0))
    if [ "$rc" -eq 0 ]; then
        note "PASS  $name (${took}s)"
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        note "FAIL  $name: timed out after ${limit}s (log: $(basename "$log"))"
        FAILED=1
    else
        note "FAIL  $name: exit $rc after ${took}s (log: $(basename "$log"))"
        FAILED=1
    fi
    return "$rc"
}

note "rnnx gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) at $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (+ local changes)')"

# --- 1. the device -----------------------------------------------------------------------------------------
{
    nvidia-smi || echo "nvidia-smi failed (exit $?)"
    echo
    nvcc --version 2>/dev/null | tail -n 2 || echo "nvcc not on PATH"
    cmake --version | head -n 1
    command -v compute-sanitizer || echo "compute-sanitizer not on PATH"
} 2>&1 | tee "$RESULTS/build.log"
if [ -z "${CUDA_ARCH:-}" ]; then
    CUDA_ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
fi
CUDA_ARCH="${CUDA_ARCH:-90}"
note "device: $(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -n 1) (building for sm_$CUDA_ARCH)"

# --- python path: rnnx without installing it ---------------------------------------------------------------
if ! "$PYTHON" -c "import rnnx.models" >/dev/null 2>&1; then
    PYROOT="$(mktemp -d /tmp/rnnx-pythonpath.XXXXXX)"
    mkdir -p "$PYROOT/rnnx"
    for part in models export runtime plugins; do
        ln -s "$REPO/$part" "$PYROOT/rnnx/$part"
    done
    export PYTHONPATH="$PYROOT${PYTHONPATH:+:$PYTHONPATH}"
    note "rnnx not installed: PYTHONPATH=$PYROOT (symlinks rnnx/{models,export,runtime,plugins} -> $REPO)"
fi
"$PYTHON" -c "import sys, torch, rnnx.models; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available()); print('rnnx.models from', rnnx.models.__file__); print('onnx imported by rnnx.models:', 'onnx' in sys.modules)" 2>&1 | tee -a "$SUMMARY"

# --- 2. build ------------------------------------------------------------------------------------------------
NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_COMPILER=$NVCC"
    "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH}-real" "-DRNNX_CUDA_ARCHITECTURES=${CUDA_ARCH}-real")
BUILT=0
if step "configure" "$RESULTS/build.log" 120 cmake -S plugins -B "$BUILD_DIR" "${CMAKE_ARGS[@]}" \
    && step "build" "$RESULTS/build.log" 300 cmake --build "$BUILD_DIR" -j "$(nproc)"; then
    BUILT=1
fi
ENQUEUE="$BUILD_DIR/tests/plugin_enqueue_gpu"

# --- 3. ctest ------------------------------------------------------------------------------------------------
if [ "$BUILT" -eq 1 ]; then
    step "ctest" "$RESULTS/ctest.log" 300 ctest --test-dir "$BUILD_DIR" --output-on-failure
    if grep -q "plugin_enqueue_gpu.*Skipped" "$RESULTS/ctest.log"; then
        note "FAIL  plugin_enqueue_gpu was SKIPPED by ctest although this is the GPU check (no device seen?)"
        FAILED=1
    fi
else
    note "SKIP  ctest: the build failed"
fi

# --- 4. compute-sanitizer memcheck -------------------------------------------------------------------------------
if [ "$BUILT" -eq 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    step "memcheck plugin_enqueue_gpu" "$RESULTS/memcheck.log" 240 \
        compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 "$ENQUEUE"
elif [ "$BUILT" -eq 1 ]; then
    note "SKIP  memcheck: compute-sanitizer not on PATH"
fi

# --- 5. pytest -m gpu ------------------------------------------------------------------------------------------
step "pytest -m gpu" "$RESULTS/pytest.log" 300 \
    "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider tests/test_cuda_kernels.py tests/test_sru_scan_op.py
if grep -qE "[0-9]+ skipped" "$RESULTS/pytest.log" && ! grep -qE "[0-9]+ passed" "$RESULTS/pytest.log"; then
    note "FAIL  pytest -m gpu ran no test (all skipped: no device seen by torch?)"
    FAILED=1
fi

# --- 6. TensorRT: every tensorrt-marked test, rnnx-parity of both targets ----------------------------------------
TRT_VERSION="$("$PYTHON" -c "import tensorrt; print(tensorrt.__version__)" 2>/dev/null)"
if [ -z "$TRT_VERSION" ]; then
    note "SKIP  TensorRT tests and parity: the tensorrt Python package is not importable (pip install tensorrt)"
elif [ "$BUILT" -ne 1 ]; then
    note "FAIL  TensorRT tests and parity: the plugin libraries were not built"
    FAILED=1
else
    note "TensorRT $TRT_VERSION"
    export RNNX_TRT_PLUGINS="$REPO/$BUILD_DIR/librnnx_trt_plugins.so"
    export RNNX_TRT_PLUGINS_STATIC="$REPO/$BUILD_DIR/librnnx_trt_plugins_static.so"
    export RNNX_ENGINE_CACHE="$RESULTS/engines"
    step "pytest -m tensorrt" "$RESULTS/tensorrt.log" 300 \
        "$PYTHON" -m pytest -q -m tensorrt -p no:cacheprovider -rs tests/
    if grep -qE "[0-9]+ skipped" "$RESULTS/tensorrt.log"; then
        note "FAIL  pytest -m tensorrt skipped tests although TensorRT is installed (see tensorrt.log)"
        FAILED=1
    fi
    EXPORTS="$(mktemp -d /tmp/rnnx-gpu-exports.XXXXXX)"
    EXPORT=(-c "import sys; from rnnx.export.cli import main; sys.argv[0] = 'export-model'; main()")
    PARITY=(-c "import sys; from rnnx.runtime.cli import parity_main; sys.argv[0] = 'rnnx-parity'; parity_main()")
    if step "export --target tensorrt" "$RESULTS/parity.log" 120 \
        "$PYTHON" "${EXPORT[@]}" --out "$EXPORTS/tensorrt" --target tensorrt --no-check; then
        step "rnnx-parity tensorrt" "$RESULTS/parity.log" 240 \
            "$PYTHON" "${PARITY[@]}" "$EXPORTS/tensorrt" --backend tensorrt --device cuda
    fi
    if step "export --target onnxruntime" "$RESULTS/parity.log" 120 \
        "$PYTHON" "${EXPORT[@]}" --out "$EXPORTS/onnxruntime" --target onnxruntime --no-check; then
        step "rnnx-parity onnxruntime" "$RESULTS/parity.log" 120 \
            "$PYTHON" "${PARITY[@]}" "$EXPORTS/onnxruntime" --backend onnxruntime
    fi
fi

# --- 7. benchmark (gets what is left of ~9 minutes) --------------------------------------------------------------
ELAPSED=$(($(date +%s) - START))
LEFT=$((530 - ELAPSED))
if [ "$LEFT" -ge 30 ]; then
    step "bench_cuda_kernels" "$RESULTS/bench.log" "$LEFT" "$PYTHON" benchmarks/bench_cuda_kernels.py
else
    note "SKIP  bench_cuda_kernels: only ${LEFT}s left of the 9-minute budget"
fi

note "total $(($(date +%s) - START))s; logs in $RESULTS"
if [ "$FAILED" -eq 0 ]; then
    note "RESULT: all GPU checks passed"
else
    note "RESULT: some GPU checks FAILED (see above)"
fi
exit "$FAILED"
