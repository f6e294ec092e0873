// rnnx::CausalLinearAttention on the CPU execution provider, fp32, fp16, bf16 and fp64 I/O (fp32 state; fp64 for fp64).
//
// Inputs by position: q, k (B, H, L, E), v (B, H, L, M), S0? (B, H, E, M), z0? (B, H, E); outputs out
// (B, H, L, M), S_last, z_last; attribute eps (rnnx.runtime.contract.ops.CAUSAL_LINEAR_ATTENTION). The onnxruntime
// target's nodes leave absent states out, the tensorrt target's give zeros: both run. fp16 / bf16 inputs are
// staged to fp32 around the fp32 kernel (isa_kernels.h), parallel over (batch, head) on ORT's intra-op thread pool.
#pragma once

#include "ort_op_support.h"

namespace rnnx_ort
{
// CausalLinearAttention for activation type T: q, k, v and out in T; S0?, z0?, S_last, z_last in acc_type<T>.
template <typename T> struct CausalLinearAttentionKernel
{
    static constexpr const char* name = "CausalLinearAttention";
    static constexpr std::array<Input, 5> inputs{{{Role::activation, false}, {Role::activation, false},
        {Role::activation, false}, {Role::state, true}, {Role::state, true}}};
    static constexpr std::array<Role, 3> outputs{{Role::activation, Role::state, Role::state}};

    double eps;

    explicit CausalLinearAttentionKernel(const OrtKernelInfo* info)
        : eps(attribute_or<float>(info, "eps", 1e-6f))
    {
    }

    OrtStatusPtr compute(Ort::KernelContext ctx) const
    {
        const Ort::ConstValue q = optional_input(ctx, 0), k = optional_input(ctx, 1), v = optional_input(ctx, 2),
                              S0 = optional_input(ctx, 3), z0 = optional_input(ctx, 4);
        if (q == nullptr || k == nullptr || v == nullptr)
            return invalid(name, "q, k and v are required");
        const auto qs = shape_of(q), vs = shape_of(v);
        if (qs.size() != 4 || vs.size() != 4)
            return invalid(name, "q, k must be (B, H, L, E) and v (B, H, L, M)");
        const int64_t B = qs[0], H = qs[1], L = qs[2], E = qs[3], M = vs[3];
        if (shape_of(k) != qs)
            return invalid(name, "k must have q's shape (B, H, L, E)");
        if (vs[0] != B || vs[1] != H || vs[2] != L)
            return invalid(name, "v must be (B, H, L, M) with q's B, H, L");
        const bool has_S0 = count(S0) > 0, has_z0 = count(z0) > 0;
        if (has_S0 && count(S0) != static_cast<size_t>(B * H * E * M))
            return invalid(name, "S0 must be (B, H, E, M)");
        if (has_z0 && count(z0) != static_cast<size_t>(B * H * E))
            return invalid(name, "z0 must be (B, H, E)");
        std::vector<float> q_f, k_f, v_f, out_f;
        using acc_t = acc_type<T>;
        Ort::UnownedValue out = ctx.GetOutput(0, {B, H, L, M});
        Ort::UnownedValue S_last = ctx.GetOutput(1, {B, H, E, M});
        Ort::UnownedValue z_last = ctx.GetOutput(2, {B, H, E});
        const AttentionArgs<acc_t> args{B, H, L, E, M, eps, as_acc<T>(q, q_f), as_acc<T>(k, k_f), as_acc<T>(v, v_f),
            has_S0 ? S0.GetTensorData<acc_t>() : nullptr, has_z0 ? z0.GetTensorData<acc_t>() : nullptr,
            output_acc<T>(out, static_cast<size_t>(B * H * L * M), out_f), S_last.GetTensorMutableData<acc_t>(),
            z_last.GetTensorMutableData<acc_t>()};
        return run<T>(ctx, attention_forward<acc_t>, args, out, out_f);
    }
};

template <typename T> using CausalLinearAttentionOp = CpuOp<CausalLinearAttentionKernel, T>;
} // namespace rnnx_ort
