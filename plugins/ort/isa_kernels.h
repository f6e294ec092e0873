// The CPU kernels of the ONNX Runtime custom-op library, one entry point per op and instruction set.
//
// isa_kernels.cpp is compiled three times by rnnx.runtime.ortops (-DRNNX_ISA=avx512 -mavx512f -mavx2 -mfma,
// -DRNNX_ISA=avx2 -mavx2 -mfma, and -DRNNX_ISA=base with no flags); the ops pick one at run time by the CPU's features
// (isa_avx512(), isa_avx2_fma(); SRUScan and CausalLinearAttention use avx2 or base), so the library never
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

// rnnx::LinearRecurrence in the layouts of docs/ops.md, all in acc_t; rule 0..3 = linear, gated, delta, gated_delta;
// past_state and pad may be null (zeros, no pads), decay / beta are null where the rule reads none.
template <typename acc_t> struct LinearRecurrenceArgs
{
    int64_t B, T, Hq, Hkv, dk, dv, rule;
    bool decay_per_key, beta_per_head;
    double scale; // resolved: never 0
    const acc_t *query, *key, *value, *past_state, *decay, *beta;
    const uint8_t* pad;
    acc_t *out, *present_state;
};

// rnnx::CausalConvWithState in the layouts of docs/ops.md, all in acc_t; bias, past_state and pad may be null.
template <typename acc_t> struct CausalConvArgs
{
    int64_t B, C, T, K;
    bool silu;
    const acc_t *input, *weight, *bias, *past_state;
    const uint8_t* pad;
    acc_t *out, *present_state;
};

#define RNNX_ORT_DECLARE_KERNELS(isa)                                                                                  \
    void sru_forward_##isa(const ParallelFor& parallel_for, const SruArgs<float>& args);                               \
    void sru_forward_##isa(const ParallelFor& parallel_for, const SruArgs<double>& args);                              \
    void attention_forward_##isa(const ParallelFor& parallel_for, const AttentionArgs<float>& args);                   \
    void attention_forward_##isa(const ParallelFor& parallel_for, const AttentionArgs<double>& args);                  \
    void linear_recurrence_forward_##isa(const ParallelFor& parallel_for, const LinearRecurrenceArgs<float>& args);    \
    void linear_recurrence_forward_##isa(const ParallelFor& parallel_for, const LinearRecurrenceArgs<double>& args);   \
    void causal_conv_forward_##isa(const ParallelFor& parallel_for, const CausalConvArgs<float>& args);                \
    void causal_conv_forward_##isa(const ParallelFor& parallel_for, const CausalConvArgs<double>& args);
RNNX_ORT_DECLARE_KERNELS(avx512)
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

// Whether this CPU runs the avx512 build (AVX-512F, AVX2 and FMA).
inline bool isa_avx512()
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx512f") && isa_avx2_fma();
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

template <typename acc_t>
void linear_recurrence_forward(const ParallelFor& parallel_for, const LinearRecurrenceArgs<acc_t>& args)
{
    if (isa_avx512())
        linear_recurrence_forward_avx512(parallel_for, args);
    else if (isa_avx2_fma())
        linear_recurrence_forward_avx2(parallel_for, args);
    else
        linear_recurrence_forward_base(parallel_for, args);
}

template <typename acc_t> void causal_conv_forward(const ParallelFor& parallel_for, const CausalConvArgs<acc_t>& args)
{
    if (isa_avx512())
        causal_conv_forward_avx512(parallel_for, args);
    else if (isa_avx2_fma())
        causal_conv_forward_avx2(parallel_for, args);
    else
        causal_conv_forward_base(parallel_for, args);
}
} // namespace rnnx_ort
