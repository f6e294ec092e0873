// Constants of the linear recurrence shared by its native kernels (cpu/, cuda/). Plain C++, no includes: the CPU
// kernel header includes it (inside the ONNX Runtime ISA builds' anonymous namespace too), the CUDA kernels as well.
// Each value mirrors one of rnnx.runtime.contract.ops, the source of truth; tests/test_ort_linear_recurrence.py
// parses this file and checks that they agree.
#pragma once

namespace rnnx
{
//! qk_l2_norm's epsilon: each query / key head x becomes x / sqrt(sum(x^2) + kQK_L2_NORM_EPS), in fp32
//! (rnnx.runtime.contract.ops.QK_L2_NORM_EPS).
constexpr float kQK_L2_NORM_EPS = 1e-6f;
} // namespace rnnx
