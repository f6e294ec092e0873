// The CPU kernels of the ONNX Runtime custom-op library, one entry point per op and instruction set.
//
// isa_kernels.cpp is compiled twice by rnnx.runtime.ortops (-DRNNX_ISA=avx2 -mavx2 -mfma, and -DRNNX_ISA=base
// with no flags); the ops pick one at run time by the CPU's features (isa_avx2_fma()), so the library never
// executes an instruction the CPU lacks. fp32 tensors (fp64 for fp64 activations, whose state is fp64 too);
// the ops stage fp16 / bf16 I/O to fp32 around these calls.
#pragma once

#include <cstdint>
#include <functional>

namespace rnnx_ort
{
using RangeFn = std::function<void(int64_t, int64_t)>;
// Runs fn over disjoint ranges covering [begin, end), each at least `grain` long where possible.
using ParallelFor = std::function<void(int64_t, int64_t, int64_t, const RangeFn&)>;

// rnnx::SRUScan in the layouts of docs/ops.md, all in acc_t (float or double); x and mask may be null.
template <typename acc_t> struct SruArgs
{
    int64_t L, B, D, d, k;
    bool has_skip, use_tanh;
    double scale_x;
    const acc_t *U, *x, *weight_c, *bias, *c0;
    const uint8_t* mask;
    acc_t *h, *c_last;
};

// rnnx::CausalLinearAttention in the layouts of docs/ops.md, all in acc_t; S0 and z0 may be null (zeros).
template <typename acc_t> struct AttentionArgs
{
    int64_t B, H, L, E, M;
    double eps;
    bool time_major;
    const acc_t *q, *k, *v, *S0, *z0;
    const uint8_t* pad;
    acc_t *out, *S_last, *z_last;
};

#define RNNX_ORT_DECLARE_KERNELS(isa)                                                                                  \
    void sru_forward_##isa(const ParallelFor& parallel_for, const SruArgs<float>& args);                               \
    void sru_forward_##isa(const ParallelFor& parallel_for, const SruArgs<double>& args);                              \
    void attention_forward_##isa(const ParallelFor& parallel_for, const AttentionArgs<float>& args);                   \
    void attention_forward_##isa(const ParallelFor& parallel_for, const AttentionArgs<double>& args);
RNNX_ORT_DECLARE_KERNELS(avx2)
RNNX_ORT_DECLARE_KERNELS(base)
#undef RNNX_ORT_DECLARE_KERNELS

// Whether this CPU runs the avx2 build (AVX2 and FMA).
inline bool isa_avx2_fma()
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

// The entry points of the build this CPU can run.
template <typename acc_t> void sru_forward(const ParallelFor& parallel_for, const SruArgs<acc_t>& args)
{
    if (isa_avx2_fma())
        sru_forward_avx2(parallel_for, args);
    else
        sru_forward_base(parallel_for, args);
}

template <typename acc_t> void attention_forward(const ParallelFor& parallel_for, const AttentionArgs<acc_t>& args)
{
    if (isa_avx2_fma())
        attention_forward_avx2(parallel_for, args);
    else
        attention_forward_base(parallel_for, args);
}
} // namespace rnnx_ort
