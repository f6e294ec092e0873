// librnnx_torch_ops: the rnnx ops for libtorch programs without Python (inference, CPU).
//
// A module scripted in Python (torch.jit.script) records calls to torch.ops.rnnx.<op>. In Python those ops are
// defined by torch.library (models/ops/*/op.py); a C++ program that torch::jit::load()s the module gets them from
// this library instead: the same schemas (generated from the Python definitions at build time into
// rnnx_torch_schemas.h, see rnnx.models.ops.libtorch) and CPU kernels built from the same sources. Each op is one
// file of its own folder, plugins/<op>/torch/<op>_torch_op.cpp (its TORCH_LIBRARY_FRAGMENT and CPU
// TORCH_LIBRARY_IMPL, compiled with the op's plugins/<op>/cpu/*.cpp); this file only claims the namespace, so a
// second definition of it (the library loaded into a process whose Python already defined the ops) fails at load
// with torch's one-line error. No autograd: call under torch::NoGradGuard or c10::InferenceMode.
#include <torch/library.h>

TORCH_LIBRARY(rnnx, m) {}
