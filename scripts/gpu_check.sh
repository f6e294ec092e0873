#!/usr/bin/env bash
# The GPU checks of rnnx in one command, for a machine with a CUDA device (run from anywhere in the checkout):
#
#   bash scripts/gpu_check.sh                     # full: needs TensorRT (10.7-10.x or 11.x) as well as CUDA
#   bash scripts/gpu_check.sh --kernels-only      # what needs only CUDA: the kernels and plugins, no TensorRT
#   bash scripts/gpu_check.sh [--kernels-only] --only STEP[,STEP...]    # some steps or groups (below)
#   bash scripts/gpu_check.sh [--kernels-only] [--only ...] --list      # the steps it would run; runs nothing
#
# Prerequisites are checked first, in a second or two, before anything is built: a CUDA device (nvidia-smi
# lists one), and what the selected steps need (cmake, nvcc and the TensorRT headers -- TENSORRT_ROOT, the
# system's or .cache/tensorrt/include -- for the build; compute-sanitizer for the sanitizer steps; torch with
# CUDA for the Python steps; in full mode TensorRT's Python package, onnx, onnxruntime, polygraphy and the ONNX
# Runtime headers in .cache/onnxruntime/include; and TensorRT headers of the installed TensorRT's major: the
# plugins are built against them, and one plugin build serves one major). When one is missing it prints one line
# naming what is missing (without TensorRT: and the --kernels-only option) and exits 2. The GPU machines lent to this project
# have no TensorRT: run --kernels-only there.
#
# Steps, in order, with their time limits (seconds):
#   build            300  cmake configure + build of the plugin libraries, the kernels and the C++ tests for the
#                         device's compute capability only (-lineinfo, for the sanitizers' reports)
#   ctest             60  the CPU-side C++ tests of that build: plugin unit tests, the libraries' dlopen test
#   enqueue          120  plugin_enqueue_gpu: both plugins' enqueue on device buffers against the C++ reference,
#                         fp32, fp16 and bf16 activations (fp32 state)
#   pytest-gpu       360  pytest -m gpu on tests/test_cuda_kernels.py and tests/test_sru_scan_op.py (the torch
#                         CUDA binding JIT-builds first); none may be skipped
#   memcheck-DTYPE   180  compute-sanitizer --tool memcheck --leak-check full on plugin_enqueue_gpu --dtype DTYPE
#   racecheck-DTYPE  180  compute-sanitizer --tool racecheck on plugin_enqueue_gpu --dtype DTYPE
#   synccheck-DTYPE  120  compute-sanitizer --tool synccheck on the CausalLinearAttention cases (the linear
#                         recurrence's kernels it runs on: the chunked MMA kernel,
#                         plugins/linear_recurrence/cuda/linear_recurrence_mma.cu, the chunked and the recurrent
#                         kernel) (DTYPE: fp32, fp16, bf16 -- nine sanitizer steps)
#   trt-mask-types   120  full mode, first: one SRUScan and one CausalLinearAttention node (plugins only) with an
#                         int32 and a bool pad mask; int32 must build and match the naive twins, bool is reported
#   trt-pytest       300  full mode: every tensorrt-marked test (pytest -m tensorrt tests/); none may be skipped
#   trt-CASE         180-300  full mode: the other cases of scripts/gpu_check_cases.py (`list` prints them): a
#                         bidirectional SRU, SRU with k = 4, attention head dims 64 and 128 (fp32 and fp16
#                         engines vs ONNX Runtime), the srupp_linear_copy demo with CUDA graphs, its fp16 engine
#                         vs ONNX Runtime fp32, rnnx-parity --backend tensorrt, an engine deserialized in a fresh
#                         process, the native runtime's TensorRT backend, trtexec --staticPlugins (skipped
#                         without trtexec), polygraphy --plugins
#   bench            what is left (>= 60 s), optional: benchmarks/bench_cuda_kernels.py; only without --only or
#                    when named
# Groups for --only: kernels (build ctest enqueue pytest-gpu), memcheck, racecheck, synccheck, sanitizers (the
# nine), tensorrt (every trt-*), trt-models (mask-types and the four model cases), trt-demo, all. A step that needs the build gets it first (make is
# incremental on a warm machine).
#
# Time: the whole run keeps to a budget of GPU_CHECK_BUDGET_S seconds (default 540, inside the device tool's
# 10-minute command limit). A step runs with its limit cut to what is left of the budget; one cut short that
# way, or reached with under 30 s left, is SKIPPED (not failed) with the --only command that runs it, the
# summary ends with that command ("run next: ..."), and the exit status says the run was incomplete. All steps
# take longer than one command, so a session splits them (each command builds again on a fresh machine):
#   bash scripts/gpu_check.sh --kernels-only --only kernels,memcheck
#   bash scripts/gpu_check.sh --kernels-only --only racecheck,synccheck
#   bash scripts/gpu_check.sh --only trt-pytest,trt-models         # full mode only (TensorRT installed)
#   bash scripts/gpu_check.sh --only trt-demo
# Device tool: run(command="bash scripts/gpu_check.sh --kernels-only --only kernels,memcheck",
#   carry=[".cache/tensorrt"], timeout_s=600): .cache/tensorrt holds the TensorRT headers the build needs (bash
#   scripts/setup.sh writes them); full mode also carries .cache/onnxruntime (the ONNX Runtime headers of
#   trt-native). The logs come back from $OUT; the summary is also the end of the command's output.
#
# Output: one line per step while it runs, then ONE summary table (step, PASS / FAIL / SKIP, time, note: the
# reason of a SKIP or FAIL) and a RESULT line. Files, in $OUT when set (the device tool's result folder) else
# ./gpu-results, at most 7 (the device tool returns 8): summary.txt (the table), steps.tsv (the same, tab-
# separated), build.log (device, toolchain, build, ctest), kernels.log (enqueue, pytest-gpu), sanitizers.log,
# tensorrt.log, bench.log; each step's part is capped at 1 MB (head and tail), its whole log stays in
# $GPU_CHECK_WORK/logs. Exit status: 0 every selected step passed (an optional step may be skipped); 1 a step
# failed; 2 bad arguments or a missing prerequisite; 3 nothing failed but a required step was skipped (the time
# budget, or compute-sanitizer not supported on this machine).
#
# Environment: PYTHON (default python3), CUDA_ARCH (default: the device's compute capability, e.g. 90),
# BUILD_DIR (default build/gpu-check), GPU_CHECK_WORK (default /tmp/rnnx-gpu-check: logs, exports, engines,
# the native build), GPU_CHECK_BUDGET_S. rnnx need not be installed: unless `rnnx.runtime` already comes from
# this checkout, a symlink tree in $GPU_CHECK_WORK maps rnnx.models / export / runtime / plugins to this
# checkout and goes first on PYTHONPATH.
#
# NOT RUN ON A GPU YET: no GPU session has run this version, and no machine it was written on has TensorRT.
# tests/test_gpu_check.py runs on the CPU: the prerequisite checks, the arguments, --list, and the runner and
# its summary on a fake toolchain (fake nvidia-smi, cmake, compute-sanitizer, test binary). Tool names and
# options follow their documentation: compute-sanitizer --tool memcheck|racecheck|synccheck --error-exitcode,
# trtexec --staticPlugins (10.x: + --stronglyTyped --useCudaGraph; 11.x builds strongly typed and captures CUDA
# graphs by default, where both flags are deprecated no-ops), polygraphy run --trt --strongly-typed --plugins.
# TensorRT 10 or 11: the version is read from the tensorrt package, the plugins are built for its major
# (-DRNNX_TENSORRT_MAJOR; TENSORRT_ROOT must hold that major's headers) and the summary names both.
set -u
set -o pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/gpu_common.sh
source "$REPO/scripts/gpu_common.sh" || exit 2
cd "$REPO" || exit 2
PYTHON="${PYTHON:-python3}"
BUILD_DIR="${BUILD_DIR:-build/gpu-check}"
WORK="${GPU_CHECK_WORK:-/tmp/rnnx-gpu-check}"
BUDGET_S="${GPU_CHECK_BUDGET_S:-540}"
CASES_PY="scripts/gpu_check_cases.py"
DTYPES=(fp32 fp16 bf16)
SANITIZER_TOOLS=(memcheck racecheck synccheck)

die_usage() {
    echo "gpu_check: $*" >&2
    echo "usage: bash scripts/gpu_check.sh [--kernels-only] [--only STEP[,STEP...]] [--list]  (see the header)" >&2
    exit 2
}

# --- arguments -----------------------------------------------------------------------------------------------
MODE=full
ONLY=""
LIST=0
while [ $# -gt 0 ]; do
    case "$1" in
        --kernels-only) MODE=kernels ;;
        --only)
            if [ $# -lt 2 ] || [ -z "$2" ]; then die_usage "--only needs STEP[,STEP...]"; fi
            ONLY="$2"
            shift
            ;;
        --only=*)
            ONLY="${1#--only=}"
            [ -n "$ONLY" ] || die_usage "--only needs STEP[,STEP...]"
            ;;
        --list) LIST=1 ;;
        -h | --help)
            sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *) die_usage "unknown argument '$1'" ;;
    esac
    shift
done
case "$BUDGET_S" in '' | *[!0-9]*) die_usage "GPU_CHECK_BUDGET_S must be a number of seconds, got '$BUDGET_S'" ;; esac

# --- the steps -----------------------------------------------------------------------------------------------
declare -A LIMIT WHAT
LIMIT[build]=300 WHAT[build]="cmake build of the plugins, kernels and C++ tests for sm_ARCH"
LIMIT[ctest]=60 WHAT[ctest]="plugin unit tests and the libraries' dlopen test (ctest)"
LIMIT[enqueue]=120 WHAT[enqueue]="plugin_enqueue_gpu: both plugins' enqueue vs the C++ reference, fp32/fp16/bf16"
LIMIT[pytest-gpu]=360 WHAT[pytest-gpu]="pytest -m gpu: test_cuda_kernels.py, test_sru_scan_op.py (torch binding)"
for dtype in "${DTYPES[@]}"; do
    LIMIT[memcheck-$dtype]=180 WHAT[memcheck-$dtype]="compute-sanitizer memcheck (leaks too): plugin_enqueue_gpu --dtype $dtype"
    LIMIT[racecheck-$dtype]=180 WHAT[racecheck-$dtype]="compute-sanitizer racecheck: plugin_enqueue_gpu --dtype $dtype"
    LIMIT[synccheck-$dtype]=120 WHAT[synccheck-$dtype]="compute-sanitizer synccheck: attention (chunked MMA, chunked, recurrent) --dtype $dtype"
done
LIMIT[trt-pytest]=300 WHAT[trt-pytest]="pytest -m tensorrt tests/ (none skipped)"
LIMIT[bench]=0 WHAT[bench]="benchmarks/bench_cuda_kernels.py (optional: the time left)"

KERNEL_STEPS=(build ctest enqueue pytest-gpu)
SANITIZER_STEPS=()
for tool in "${SANITIZER_TOOLS[@]}"; do
    for dtype in "${DTYPES[@]}"; do SANITIZER_STEPS+=("$tool-$dtype"); done
done
TRT_STEPS=()
TRT_MODEL_STEPS=(trt-mask-types trt-sru-bidirectional trt-sru-k4 trt-attention-e64 trt-attention-e128)
if [ "$MODE" = full ]; then
    # trt-mask-types first (it answers in seconds whether the plugins build at all), then trt-pytest, then the rest.
    TRT_STEPS=(trt-mask-types trt-pytest)
    cases="$("$PYTHON" "$CASES_PY" list)" || die_usage "$PYTHON $CASES_PY list failed"
    while IFS=$'\t' read -r name limit what; do
        [ "$name" = mask-types ] || TRT_STEPS+=("trt-$name")
        LIMIT[trt-$name]="$limit" WHAT[trt-$name]="$what"
    done <<<"$cases"
fi
ALL_STEPS=("${KERNEL_STEPS[@]}" "${SANITIZER_STEPS[@]}" "${TRT_STEPS[@]}" bench)

# members GROUP_OR_STEP: the steps it names (nothing for an unknown name).
members() {
    case "$1" in
        all) printf '%s\n' "${ALL_STEPS[@]}" ;;
        kernels) printf '%s\n' "${KERNEL_STEPS[@]}" ;;
        sanitizers) printf '%s\n' "${SANITIZER_STEPS[@]}" ;;
        memcheck | racecheck | synccheck) for dtype in "${DTYPES[@]}"; do echo "$1-$dtype"; done ;;
        tensorrt) [ "$MODE" = full ] && printf '%s\n' "${TRT_STEPS[@]}" ;;
        trt-models) [ "$MODE" = full ] && printf '%s\n' "${TRT_MODEL_STEPS[@]}" ;;
        trt-demo) # the TensorRT steps that are neither trt-pytest nor a model case
            local step
            for step in "${TRT_STEPS[@]}"; do
                [ "$step" = trt-pytest ] || [[ " ${TRT_MODEL_STEPS[*]} " == *" $step "* ]] || echo "$step"
            done
            ;;
        *) [ -n "${LIMIT[$1]:-}" ] && { [ "$MODE" = full ] || [[ "$1" != trt-* ]]; } && echo "$1" ;;
    esac
    return 0
}

needs_build() { case "$1" in pytest-gpu | bench) return 1 ;; *) return 0 ;; esac }

declare -A SELECTED
if [ -z "$ONLY" ]; then
    for step in "${ALL_STEPS[@]}"; do SELECTED[$step]=1; done
else
    IFS=',' read -r -a wanted <<<"$ONLY"
    for item in "${wanted[@]}"; do
        [ -n "$item" ] || continue
        found="$(members "$item")"
        if [ -z "$found" ]; then
            if [ "$MODE" = kernels ] && { [[ "$item" == trt-* ]] || [ "$item" = tensorrt ]; }; then
                die_usage "'$item' needs TensorRT: it is not part of --kernels-only"
            fi
            die_usage "unknown step or group '$item'; steps: ${ALL_STEPS[*]}; groups: all kernels memcheck racecheck synccheck sanitizers$([ "$MODE" = full ] && echo ' tensorrt trt-models trt-demo')"
        fi
        while read -r step; do SELECTED[$step]=1; done <<<"$found"
    done
    for step in "${!SELECTED[@]}"; do
        if needs_build "$step"; then SELECTED[build]=1; fi
    done
fi
RUN=()
for step in "${ALL_STEPS[@]}"; do
    if [ -n "${SELECTED[$step]:-}" ]; then RUN+=("$step"); fi
done

if [ "$LIST" -eq 1 ]; then
    for step in "${RUN[@]}"; do
        limit="${LIMIT[$step]}"
        [ "$step" = bench ] && limit="rest"
        printf '%-22s %5s  %s\n' "$step" "$limit" "${WHAT[$step]}"
    done
    exit 0
fi

# --- prerequisites (quick: nothing is built before they pass) ----------------------------------------------------
wants() { # wants PATTERN: whether a selected step matches the glob PATTERN
    local step
    for step in "${RUN[@]}"; do
        # shellcheck disable=SC2254 # PATTERN is a glob on purpose
        case "$step" in $1) return 0 ;; esac
    done
    return 1
}
find_tool() { # find_tool NAME [CANDIDATE...]: the first executable of PATH's NAME and the candidates
    local found
    found="$(command -v "$1" 2>/dev/null)" && [ -n "$found" ] && { echo "$found"; return 0; }
    shift
    local candidate
    for candidate in "$@"; do
        [ -x "$candidate" ] && { echo "$candidate"; return 0; }
    done
    return 1
}
headers_version() { # headers_version DIR: MAJOR.MINOR.PATCH of the TensorRT headers in DIR (rnnx.plugins reads them)
    "$PYTHON" -c 'import sys; from pathlib import Path; from rnnx.plugins import read_tensorrt_header_version as r
v = r(Path(sys.argv[1]) / "NvInferVersion.h"); print(".".join(map(str, v)) if v else "")' "$1" 2>/dev/null
}
trt_headers() { # the TensorRT headers the plugin build (plugins/CMakeLists.txt) would find, roughly in its order
    local dir
    for dir in ${TENSORRT_ROOT:+"$TENSORRT_ROOT/include" "$TENSORRT_ROOT"} /usr/include /usr/include/x86_64-linux-gnu \
        /usr/local/include /usr/include/tensorrt /usr/local/include/tensorrt "$REPO/.cache/tensorrt/include"; do
        [ -f "$dir/NvInferRuntime.h" ] && { echo "$dir"; return 0; }
    done
    return 1
}

MISSING=()
TRT_MISSING=""
GPU_OK=0
if ! command -v nvidia-smi >/dev/null 2>&1; then
    MISSING+=("a CUDA device (nvidia-smi not found on PATH)")
elif ! timeout 60 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    MISSING+=("a CUDA device (nvidia-smi lists no GPU)")
else
    GPU_OK=1
fi
NVCC="${CUDACXX:-}"
[ -n "$NVCC" ] && [ -x "$NVCC" ] || NVCC="$(find_tool nvcc /usr/local/cuda/bin/nvcc)" || NVCC=""
SANITIZER="$(find_tool compute-sanitizer /usr/local/cuda/bin/compute-sanitizer "${CUDA_HOME:-/usr/local/cuda}/compute-sanitizer/compute-sanitizer")" || SANITIZER=""
if wants build; then
    command -v cmake >/dev/null 2>&1 || MISSING+=("cmake")
    [ -n "$NVCC" ] || MISSING+=("nvcc (CUDA toolkit; not on PATH, CUDACXX or /usr/local/cuda/bin)")
    trt_headers >/dev/null || MISSING+=("the TensorRT headers (NvInferRuntime.h: set TENSORRT_ROOT, or carry .cache/tensorrt, written by bash scripts/setup.sh)")
fi
if wants '*check-*' && [ -z "$SANITIZER" ]; then
    MISSING+=("compute-sanitizer (not on PATH or in the CUDA toolkit)")
fi

# rnnx from this checkout: a symlink tree unless rnnx.runtime already is this checkout's.
use_checkout_rnnx "$WORK" || exit 2
TRT_VERSION=""
TRT_MAJOR=""
if [ "$MODE" = full ]; then
    # rnnx's own check: importable, 10.7-10.x or 11.x (one line when not).
    if ! TRT_MISSING="$("$PYTHON" -c '
from rnnx.runtime.tensorrt import require_tensorrt
try:
    require_tensorrt()
except Exception as e:
    print(str(e).splitlines()[0])' 2>&1)"; then
        TRT_MISSING="$PYTHON cannot import rnnx.runtime.tensorrt: $(echo "$TRT_MISSING" | tail -n 1)"
    fi
    if [ -z "$TRT_MISSING" ]; then
        TRT_VERSION="$("$PYTHON" -c 'import tensorrt; print(tensorrt.__version__)' 2>/dev/null)"
        TRT_MAJOR="${TRT_VERSION%%.*}"
        # One plugin build serves one TensorRT major (ILogger's vtable changed in 11): the headers must match.
        if wants build && dir="$(trt_headers)"; then
            found="$(headers_version "$dir")"
            if [ "${found%%.*}" != "$TRT_MAJOR" ]; then
                MISSING+=("TensorRT $TRT_MAJOR headers for the plugin build (TensorRT $TRT_VERSION is installed; $dir has ${found:-unknown} headers): set TENSORRT_ROOT to TensorRT ${TRT_MAJOR}'s folder (for 11.x, the include/ folder of the NVIDIA/TensorRT repository at that release)")
            fi
        fi
    fi
    for module in onnx onnxruntime; do
        "$PYTHON" -c "import $module" 2>/dev/null || MISSING+=("the Python package $module")
    done
    if wants trt-polygraphy && ! command -v polygraphy >/dev/null 2>&1; then MISSING+=("polygraphy (pip install polygraphy)"); fi
    if wants trt-native && [ ! -f "${RNNX_ORT_HEADERS:-$REPO/.cache/onnxruntime/include}/onnxruntime_cxx_api.h" ]; then
        MISSING+=("the ONNX Runtime headers for trt-native (carry .cache/onnxruntime, written by bash scripts/setup.sh)")
    fi
fi
if [ "$GPU_OK" -eq 1 ] && { wants pytest-gpu || wants bench || wants 'trt-*'; }; then
    "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null \
        || MISSING+=("torch with CUDA ($PYTHON: torch.cuda.is_available() is not True)")
fi
if [ -n "$TRT_MISSING" ]; then
    MISSING=("TensorRT ($TRT_MISSING)" "${MISSING[@]}")
fi
if [ "${#MISSING[@]}" -gt 0 ]; then
    list="$(printf '; %s' "${MISSING[@]}")"
    if [ -n "$TRT_MISSING" ]; then
        echo "gpu_check: cannot run the full check, missing: ${list#; }. Without TensorRT, run bash scripts/gpu_check.sh --kernels-only (the checks that need only CUDA)." >&2
    else
        echo "gpu_check$([ "$MODE" = kernels ] && echo ' --kernels-only'): cannot run, missing: ${list#; }" >&2
    fi
    exit 2
fi

# --- set-up --------------------------------------------------------------------------------------------------
RESULTS="${OUT:-$REPO/gpu-results}"
LOGS="$WORK/logs"
mkdir -p "$RESULTS" "$LOGS" || exit 2
rm -f "$LOGS"/*.log
for name in build kernels sanitizers tensorrt bench; do : >"$RESULTS/$name.log"; done
SUMMARY="$RESULTS/summary.txt"
TSV="$RESULTS/steps.tsv"
export PYTHONUNBUFFERED=1
START=$(date +%s)
if [ -z "${CUDA_ARCH:-}" ]; then
    CUDA_ARCH="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')"
fi
CUDA_ARCH="${CUDA_ARCH:-90}"
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-${CUDA_ARCH%?}.${CUDA_ARCH: -1}}"
export MAX_JOBS="${MAX_JOBS:-$(nproc)}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$REPO/$BUILD_DIR" ;; esac
ENQUEUE="$BUILD_DIR/tests/plugin_enqueue_gpu"
export RNNX_TRT_PLUGINS="$BUILD_DIR/librnnx_trt_plugins.so"
export RNNX_TRT_PLUGINS_STATIC="$BUILD_DIR/librnnx_trt_plugins_static.so"
export RNNX_ENGINE_CACHE="$WORK/trt/engines" # the cases' engine cache (gpu_check_cases.py --work $WORK/trt)
if commit="$(git rev-parse --short HEAD 2>/dev/null)"; then
    git diff --quiet HEAD 2>/dev/null || commit="$commit + local changes"
else
    commit="a copy without git history"
fi
HEADER="rnnx gpu_check ($MODE) $(date -u +%Y-%m-%dT%H:%M:%SZ) at $commit"
if dir="$(trt_headers)"; then
    headers="$(headers_version "$dir")"
    headers="${headers:-of unknown version} in $dir"
else
    headers="none"
fi
TRT_LINE="TensorRT: ${TRT_VERSION:-not used (--kernels-only)}; TensorRT headers: $headers"
DEVICE="$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -n 1)"
{
    echo "$HEADER"
    nvidia-smi
    "$NVCC" --version | tail -n 2
    cmake --version | head -n 1
    echo "compute-sanitizer: ${SANITIZER:-none}"
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
    echo "$TRT_LINE"
    echo "PYTHONPATH=${PYTHONPATH:-}"
    echo "steps: ${RUN[*]}"
} >>"$RESULTS/build.log" 2>&1
echo "$HEADER"
echo "device: $DEVICE; building for sm_$CUDA_ARCH; budget ${BUDGET_S}s; steps: ${RUN[*]}"
echo "$TRT_LINE"

# --- running and recording ----------------------------------------------------------------------------------------
R_NAME=() R_RESULT=() R_TIME=() R_NOTE=()
FAILED=0
INCOMPLETE=0
declare -A STATUS
elapsed() { echo $(($(date +%s) - START)); }
record() { # record NAME RESULT SECONDS NOTE [required]: one row of the summary
    R_NAME+=("$1") R_RESULT+=("$2") R_TIME+=("$3") R_NOTE+=("$4")
    STATUS[$1]="$2"
    [ "$2" = FAIL ] && FAILED=1
    [ "$2" = SKIP ] && [ "${5:-}" = required ] && INCOMPLETE=1
    printf '[%4ss] %-22s %s%s\n' "$(elapsed)" "$1" "$2" "${4:+  ($4)}"
}
append_log() { # append_log STEP_LOG GROUP_LOG: the step's log into the group's, at most 1 MB of it
    local size
    size=$(wc -c <"$1")
    if [ "$size" -le 1000000 ]; then
        cat "$1" >>"$2"
    else
        {
            head -c 500000 "$1"
            printf '\n... (%s bytes in all; the whole log: %s) ...\n' "$size" "$1"
            tail -c 500000 "$1"
        } >>"$2"
    fi
}
last_line() { grep -E "$1" "$2" | tail -n 1 | cut -c1-200; }

# judge STEP RC LOG LIMIT CUT: "RESULT|note|required" for a finished step (rc 0 is not always a pass, nor 77 a
# skip). CUT=1: LIMIT was cut to what was left of the budget, so a timeout is a skip, not a failure.
judge() {
    local step="$1" rc="$2" log="$3" limit="$4" cut="$5"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        if [ "$step" = bench ]; then
            echo "SKIP|optional: stopped after ${limit}s, the end of the ${BUDGET_S}s budget (--only bench runs it)"
        elif [ "$cut" -eq 1 ]; then
            echo "SKIP|stopped after ${limit}s, the end of the ${BUDGET_S}s budget: run --only $step|required"
        else
            echo "FAIL|timed out after ${limit}s"
        fi
        return
    fi
    case "$step" in
        enqueue | memcheck-* | racecheck-* | synccheck-*)
            if grep -q "^SKIP plugin_enqueue_gpu" "$log"; then
                echo "FAIL|plugin_enqueue_gpu saw no CUDA device (exit 77)"
            elif grep -q "Device not supported" "$log"; then
                echo "SKIP|compute-sanitizer cannot instrument this device here (see sanitizers.log)|required"
            elif [ "$rc" -ne 0 ]; then
                local tests sanitizer
                tests="$(last_line '^[0-9]+ passed, [0-9]+ failed' "$log")"
                sanitizer="$(last_line '(ERROR|RACECHECK|SYNCCHECK) SUMMARY' "$log" | sed 's/^=* *//')"
                echo "FAIL|exit $rc; ${tests:-no test summary}${sanitizer:+; $sanitizer}"
            elif ! grep -qE "^[1-9][0-9]* passed, 0 failed" "$log"; then
                echo "FAIL|no '<n> passed, 0 failed' line in the output"
            else
                echo "PASS|$(last_line '^[0-9]+ passed, [0-9]+ failed' "$log")"
            fi
            ;;
        pytest-gpu | trt-pytest)
            if [ "$rc" -ne 0 ]; then
                echo "FAIL|exit $rc; $(last_line '[0-9]+ (passed|failed|error)' "$log")"
            elif grep -qE "[0-9]+ skipped" "$log" || ! grep -qE "[0-9]+ passed" "$log"; then
                echo "FAIL|tests were skipped or none ran: $(last_line '[0-9]+ (passed|skipped)' "$log")"
            else
                echo "PASS|$(last_line '[0-9]+ passed' "$log")"
            fi
            ;;
        trt-*)
            if [ "$rc" -eq 77 ]; then
                echo "SKIP|$(last_line '^SKIP: ' "$log" | sed 's/^SKIP: //') (optional)"
            elif [ "$rc" -ne 0 ]; then
                echo "FAIL|$(last_line '^FAIL: ' "$log" | sed 's/^FAIL: //')"
            else
                echo "PASS|$(last_line '^PASS: ' "$log" | sed 's/^PASS: //')"
            fi
            ;;
        *)
            if [ "$rc" -eq 0 ]; then echo "PASS|"; else echo "FAIL|exit $rc"; fi
            ;;
    esac
}

# run_step STEP GROUP_LOG COMMAND...: runs COMMAND under its time limit, cut to what is left of the budget
# (skipped when under 30 s are left), logs it and records the result.
run_step() {
    local step="$1" group="$2"
    shift 2
    local limit="${LIMIT[$step]}" left=$((BUDGET_S - $(elapsed) - 5)) cut=0
    if [ "$step" = bench ]; then
        if [ "$left" -lt 60 ]; then
            record "$step" SKIP - "optional: only ${left}s left of the ${BUDGET_S}s budget"
            return
        fi
        limit="$left"
    elif [ "$left" -lt 30 ]; then
        record "$step" SKIP - "only ${left}s left of the ${BUDGET_S}s budget: run --only $step" required
        return
    elif [ "$limit" -gt "$left" ]; then
        limit="$left" cut=1
    fi
    if needs_build "$step" && [ "$step" != build ] && [ "${STATUS[build]:-}" != PASS ]; then
        record "$step" SKIP - "the build did not pass" required
        return
    fi
    local log="$LOGS/$step.log" t0 rc
    t0=$(date +%s)
    printf '[%4ss] %-22s ... (limit %ss%s)\n' "$(elapsed)" "$step" "$limit" "$([ "$cut" -eq 1 ] && echo ', cut to the budget')"
    {
        echo "=== $step: ${WHAT[$step]} (limit ${limit}s)"
        echo "=== $*"
    } >"$log"
    timeout --kill-after=15 "$limit" "$@" >>"$log" 2>&1 </dev/null
    rc=$?
    local took=$(($(date +%s) - t0)) verdict result note required
    echo "=== exit $rc after ${took}s" >>"$log"
    verdict="$(judge "$step" "$rc" "$log" "$limit" "$cut")"
    IFS='|' read -r result note required <<<"$verdict"
    append_log "$log" "$RESULTS/$group.log"
    record "$step" "$result" "${took}s" "$note" "$required"
    if [ "$result" = FAIL ]; then tail -n 15 "$log" | sed 's/^/        /'; fi
}

# shellcheck disable=SC2317,SC2329 # run by `bash -c build_plugins` under timeout (exported below)
build_plugins() {
    cmake -S plugins -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_COMPILER=$NVCC" \
        "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH}-real" "-DRNNX_CUDA_ARCHITECTURES=${CUDA_ARCH}-real" \
        "-DCMAKE_CUDA_FLAGS=-lineinfo" ${TRT_MAJOR:+"-DRNNX_TENSORRT_MAJOR=$TRT_MAJOR"} \
        && cmake --build "$BUILD_DIR" -j "$(nproc)" --target rnnx_trt_plugins rnnx_trt_plugins_static \
            rnnx_plugin_tests rnnx_plugin_library_test plugin_enqueue_gpu
}
export -f build_plugins
export BUILD_DIR NVCC CUDA_ARCH TRT_MAJOR

for step in "${RUN[@]}"; do
    case "$step" in
        build) run_step build build bash -c build_plugins ;;
        ctest) run_step ctest build ctest --test-dir "$BUILD_DIR" --output-on-failure -R '^(plugin_unit_tests|plugin_library_dlopen)$' ;;
        enqueue) run_step enqueue kernels "$ENQUEUE" ;;
        pytest-gpu)
            run_step pytest-gpu kernels "$PYTHON" -m pytest -o addopts="" -q -m gpu -p no:cacheprovider -rs \
                tests/test_cuda_kernels.py tests/test_sru_scan_op.py
            ;;
        memcheck-*)
            run_step "$step" sanitizers "$SANITIZER" --tool memcheck --leak-check full --error-exitcode 3 \
                "$ENQUEUE" --dtype "${step#memcheck-}"
            ;;
        racecheck-*)
            run_step "$step" sanitizers "$SANITIZER" --tool racecheck --error-exitcode 3 \
                "$ENQUEUE" --dtype "${step#racecheck-}"
            ;;
        synccheck-*)
            run_step "$step" sanitizers "$SANITIZER" --tool synccheck --error-exitcode 3 \
                "$ENQUEUE" --dtype "${step#synccheck-}" CausalLinearAttention
            ;;
        trt-pytest) run_step trt-pytest tensorrt "$PYTHON" -m pytest -o addopts="" -q -m tensorrt -p no:cacheprovider -rs tests/ ;;
        trt-*) run_step "$step" tensorrt "$PYTHON" "$CASES_PY" run "${step#trt-}" --work "$WORK/trt" ;;
        bench) run_step bench bench "$PYTHON" benchmarks/bench_cuda_kernels.py ;;
    esac
done

# --- the summary -----------------------------------------------------------------------------------------------
SKIPPED=() # the steps the budget left out or cut: the next command's --only
for i in "${!R_NAME[@]}"; do
    case "${R_NOTE[$i]}" in *"run --only"*) SKIPPED+=("${R_NAME[$i]}") ;; esac
done
{
    echo "$HEADER"
    echo "device: $DEVICE (sm_$CUDA_ARCH); $(nproc) CPU cores; budget ${BUDGET_S}s; total $(elapsed)s"
    echo "$TRT_LINE"
    printf '%-22s %-6s %6s  %s\n' step result time note
    for i in "${!R_NAME[@]}"; do
        printf '%-22s %-6s %6s  %s\n' "${R_NAME[$i]}" "${R_RESULT[$i]}" "${R_TIME[$i]}" "${R_NOTE[$i]}"
    done
    if [ "$FAILED" -ne 0 ]; then
        echo "RESULT: FAILED (logs in $RESULTS; whole step logs in $LOGS)"
    elif [ "$INCOMPLETE" -ne 0 ]; then
        echo "RESULT: INCOMPLETE: nothing failed, but required steps were skipped"
    else
        echo "RESULT: all selected GPU checks passed"
    fi
    if [ "${#SKIPPED[@]}" -gt 0 ]; then
        echo "run next: bash scripts/gpu_check.sh$([ "$MODE" = kernels ] && echo ' --kernels-only') --only $(
            IFS=,
            echo "${SKIPPED[*]}"
        )"
    fi
} >"$SUMMARY"
for i in "${!R_NAME[@]}"; do
    printf '%s\t%s\t%s\t%s\n' "${R_NAME[$i]}" "${R_RESULT[$i]}" "${R_TIME[$i]}" "${R_NOTE[$i]}"
done >"$TSV"
echo
cat "$SUMMARY"
if [ "$FAILED" -ne 0 ]; then exit 1; fi
if [ "$INCOMPLETE" -ne 0 ]; then exit 3; fi
exit 0
