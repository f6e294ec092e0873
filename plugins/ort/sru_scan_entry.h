// The SRU scan forward entry points of the ONNX Runtime custom-op library, one per instruction set.
#pragma once

#include <cstdint>
#include <functional>

namespace rnnx_ort
{
using RangeFn = std::function<void(int64_t, int64_t)>;
// Runs fn over disjoint ranges covering [begin, end), each at least `grain` long where possible.
using ParallelFor = std::function<void(int64_t, int64_t, int64_t, const RangeFn&)>;

// fp32 tensors in the layouts of rnnx::SRUScan (docs/ops.md); x and mask may be null.
struct SruArgs
{
    int64_t L, B, D, d, k;
    bool has_skip, use_tanh;
    double scale_x;
    const float *U, *x, *weight_c, *bias, *c0;
    const uint8_t* mask;
    float *h, *c_last;
};

void sru_forward_avx2(const ParallelFor& parallel_for, const SruArgs& args);
void sru_forward_base(const ParallelFor& parallel_for, const SruArgs& args);
} // namespace rnnx_ort
