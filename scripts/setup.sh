#!/usr/bin/env bash
# Sets up a machine for rnnx development and CI: torch (kept if present), rnnx editable with its test
# extra, the published `sru` packages the parity tests compare against, and the compiled CPU kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
pipi() { "$PY" -m pip install --disable-pip-version-check --no-input "$@"; }

# The long steps mostly keep one core busy, so after the quick ones they run side by side (CI has 2 cores):
# the peer packages (fast-transformers' source build, the Triton venv) and the torch-linked kernels each in a
# background lane, the CMake builds in the foreground. A lane's output goes to .cache/setup/<lane>.log and is
# printed when it ends; setup fails if any lane failed.
lane_names=()
lane_pids=()
lane() {
  local name=$1
  shift
  mkdir -p .cache/setup
  echo "setup: lane $name started (log: .cache/setup/$name.log)"
  (
    start=$SECONDS
    "$@"
    echo "setup: lane $name took $((SECONDS - start)) s"
  ) >".cache/setup/$name.log" 2>&1 &
  lane_names+=("$name")
  lane_pids+=("$!")
}
wait_lanes() {
  local i failed=0
  for i in "${!lane_pids[@]}"; do
    if wait "${lane_pids[$i]}"; then
      echo "setup: lane ${lane_names[$i]} done:"
    else
      echo "setup: lane ${lane_names[$i]} FAILED:"
      failed=1
    fi
    sed 's/^/  /' ".cache/setup/${lane_names[$i]}.log"
  done
  return "$failed"
}

# A machine that already has torch (a CUDA build on a GPU box, say) keeps it; otherwise take the
# CPU build, so that the loose `torch` requirement never pulls a multi-GB CUDA build.
if "$PY" -c "import torch" 2>/dev/null; then
  echo "setup: keeping torch $("$PY" -c 'import torch; print(torch.__version__)')"
else
  echo "setup: installing torch==2.13.0 (CPU build)"
  pipi torch==2.13.0
fi

echo "setup: installing rnnx (editable) with the export and test extras"
pipi -e ".[export,test]"

# sru 2.6.0 (SRU) and 3.0.0.dev6 (SRU++) cannot share one environment: each goes into its own
# folder, which the parity tests put on PYTHONPATH of a subprocess.
for v in 2.6.0 3.0.0.dev6; do
  if [ ! -f ".reference/sru-$v/sru/__init__.py" ]; then
    echo "setup: installing the published sru==$v into .reference/sru-$v"
    pipi --no-deps --target ".reference/sru-$v" "sru==$v"
  fi
done

# pytorch-fast-transformers 0.4.0 (what rnnx.models.fast_transformers converts) ships only an sdist. Its
# setup.py adds CUDA extensions whenever `nvcc` runs, and those no longer compile, so it is built
# against the installed torch (no build isolation) with every PATH entry holding an nvcc left out.
fast_transformers() {
  if "$PY" -c "import fast_transformers" 2>/dev/null; then
    echo "setup: keeping pytorch-fast-transformers $("$PY" -c 'import fast_transformers; print(fast_transformers.__version__)')"
  else
    echo "setup: building pytorch-fast-transformers==0.4.0 from source, CPU kernels only (about 5 minutes)"
    py_exe=$("$PY" -c "import sys; print(sys.executable)")
    path_without_nvcc=$(tr ':' '\n' <<<"$PATH" | while read -r dir; do [ -x "$dir/nvcc" ] || echo "$dir"; done | paste -sd: -)
    PATH="$path_without_nvcc" CUDA_HOME="" "$py_exe" -m pip install --disable-pip-version-check --no-input \
      --no-build-isolation pytorch-fast-transformers==0.4.0
  fi
}

# Triton Inference Server for the serving tests: the tritonserver binary (Python backend only, no GPU
# needed) ships in the nvidia-pytriton wheel. It goes into its own venv (it pins numpy < 2), with
# tritonclient, ONNX Runtime and rnnx itself (editable, no torch): the Python backend's stub runs the
# model with that venv's python. The stub is copied where the server looks for it.
triton_venv() {
  local venv=".cache/triton/venv"
  if [ -f "$venv/.rnnx-ready" ]; then
    return
  fi
  echo "setup: creating $venv (nvidia-pytriton 0.7.0 = Triton 2.51, tritonclient, onnxruntime, rnnx)"
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
    nvidia-pytriton==0.7.0 "tritonclient[grpc]==2.73.0" "onnxruntime>=1.31" "click>=8" "safetensors>=0.4"
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q --no-deps -e .
  "$venv/bin/python" - <<'PYEOF'
import pathlib, shutil, sys
import pytriton
server = pathlib.Path(pytriton.__file__).parent / "tritonserver"
stub = server / "python_backend_stubs" / f"{sys.version_info.major}.{sys.version_info.minor}" / "triton_python_backend_stub"
shutil.copy2(stub, server / "backends" / "python" / stub.name)
PYEOF
  touch "$venv/.rnnx-ready"
}

# onnxruntime-genai 0.18.0 for tests/test_genai.py (export-model --genai, docs/genai.md). Its wheel needs
# onnxruntime>=1.31, which the main environment has, so it goes there, without letting pip touch onnxruntime.
# It runs in the foreground before the lanes start: the peers lane pip-installs into the same environment, and
# two pip processes must never write one environment at once (one wheel, a few seconds).
onnxruntime_genai() {
  if "$PY" -c "import onnxruntime_genai" 2>/dev/null; then
    echo "setup: keeping onnxruntime-genai $("$PY" -c 'import importlib.metadata as m; print(m.version("onnxruntime-genai"))')"
  else
    echo "setup: installing onnxruntime-genai==0.18.0"
    pipi --no-deps onnxruntime-genai==0.18.0
  fi
}

# The JavaScript runtime's packages (runtime/js/package.json: onnxruntime-node, onnxruntime-web, the text packages
# @huggingface/tokenizers and @huggingface/jinja, puppeteer-core and @sparticuz/chromium, the page test's Chromium), at the exact versions and sha512 integrity of the
# committed package-lock.json (`npm ci` refuses anything else), into .cache/js/node_modules. --ignore-scripts:
# onnxruntime-node's install script only downloads the CUDA provider (its CPU binding ships in the package), and
# no other package needs a script. Reinstalled when the lock file changes; skipped, saying so, without npm.
js_packages() {
  local dest=".cache/js"
  if ! command -v npm >/dev/null; then
    echo "setup: npm not found: skipping the JavaScript runtime's packages (tests/test_js_runtime.py skips)"
    return
  fi
  if cmp -s runtime/js/package-lock.json "$dest/package-lock.json" && [ -f "$dest/.rnnx-ready" ]; then
    echo "setup: keeping $dest/node_modules (runtime/js/package-lock.json unchanged)"
    return
  fi
  echo "setup: npm ci --ignore-scripts of runtime/js/package-lock.json into $dest"
  rm -rf "$dest"
  mkdir -p "$dest"
  cp runtime/js/package.json runtime/js/package-lock.json "$dest/"
  (cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund)
  touch "$dest/.rnnx-ready"
}

# TensorRT headers for building the plugins: TENSORRT_ROOT or a system install wins; otherwise the
# public TensorRT 10.14 headers shipped in the PyPI wheel kernel-lens==2.0.1 (headers only).
trt_headers=".cache/tensorrt/include"
if [ -n "${TENSORRT_ROOT:-}" ] && [ -f "$TENSORRT_ROOT/include/NvInfer.h" ]; then
  echo "setup: TensorRT headers from TENSORRT_ROOT=$TENSORRT_ROOT"
elif [ -f /usr/include/x86_64-linux-gnu/NvInfer.h ] || [ -f /usr/include/NvInfer.h ]; then
  echo "setup: TensorRT headers from the system"
elif [ ! -f "$trt_headers/NvInferRuntime.h" ]; then
  echo "setup: fetching the TensorRT 10.14 headers (kernel-lens==2.0.1 wheel) into $trt_headers"
  tmp=$(mktemp -d)
  "$PY" -m pip download --disable-pip-version-check --no-deps --only-binary=:all: -d "$tmp" kernel-lens==2.0.1
  mkdir -p "$trt_headers"
  "$PY" - "$tmp" "$trt_headers" <<'PYEOF'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("kernel_lens-*.whl"))
dest = pathlib.Path(sys.argv[2])
prefix = "kernel_lens/include/tensorrt/"
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and name.endswith(".h"):
            (dest / name[len(prefix):]).write_bytes(z.read(name))
PYEOF
  rm -rf "$tmp"
fi

# Every native library through the one build entry (each is incremental; one whose tools are missing is
# skipped with the reason): the SRU scan CPU kernel, librnnx_torch_ops (libtorch programs), the TensorRT plugin
# library (nvcc + cmake, no GPU or TensorRT needed) with its C++ tests, rnnx's ONNX Runtime ops (headers from an
# npm package, fetched once and integrity checked) and the native runtime (C API) with its sanitizer build. The two
# torch-linked libraries (one g++ each) build in a lane beside the CMake ones (which use every core).
peers() {
  fast_transformers
  triton_venv
}
onnxruntime_genai
lane peers peers
lane js js_packages
lane kernels "$PY" -m rnnx.plugins.build --only cpu-kernel,libtorch-ops
echo "setup: building the other native libraries (python3 -m rnnx.plugins.build)"
status=0
"$PY" -m rnnx.plugins.build --skip cpu-kernel,libtorch-ops || status=$?
wait_lanes || status=1
if [ "$status" -ne 0 ]; then
  echo "setup: FAILED (see above)"
  exit "$status"
fi
echo "setup: done"
