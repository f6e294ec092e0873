// rnnx::CausalLinearAttention on the CPU execution provider, fp32, fp16, bf16 and fp64 I/O (fp32 state; fp64 for fp64).
//
// Inputs by position: q, k (B, L, H*E), v (B, L, H*M), S0? (B, H, E, M), z0? (B, H, E), mask_pad? (B, L) — with
// time_major = 1, q, k, v, out are (L, B, H*.) and mask_pad (L, B); heads packed in the last axis; outputs out
// (B, L, H*M), S_last, z_last; attributes eps, num_heads, time_major (rnnx.runtime.contract.ops.
// CAUSAL_LINEAR_ATTENTION). The onnxruntime target's nodes leave absent states and mask out, the tensorrt target's
// give zeros and an all-false mask: both run. It runs on the linear recurrence's kernel (the op's one kernel set):
// the linear rule with phi = elu + 1 on q and k, scale 1 and the normaliser z
// (../../linear_recurrence/ort/linear_recurrence_isa.h); fp16 / bf16 inputs are staged to fp32 around it, parallel
// over (batch, head, tile of value columns) on ORT's intra-op thread pool.
#pragma once

#include "../../linear_recurrence/ort/linear_recurrence_isa.h"
#include "ort_op_support.h"

namespace rnnx_ort
{
// CausalLinearAttention for activation type T: q, k, v and out in T; S0?, z0?, S_last, z_last in acc_type<T>;
// mask_pad? any of mask_bytes()' types.
template <typename T> struct CausalLinearAttentionKernel
{
    //! rnnx domain version 2: heads packed, mask_pad (version 1 took (B, H, L, E)).
    static constexpr OpSignature<6, 3> signature{"CausalLinearAttention", 2,
        {{{Role::activation, false}, {Role::activation, false}, {Role::activation, false}, {Role::state, true},
            {Role::state, true}, {Role::mask, true}}},
        {{Role::activation, Role::state, Role::state}}};

    double eps;
    int64_t num_heads;
    bool time_major;

    explicit CausalLinearAttentionKernel(const OrtKernelInfo* info)
        : eps(attribute_or<float>(info, "eps", 1e-6f))
        , num_heads(attribute_or<int64_t>(info, "num_heads", 0))
        , time_major(attribute_or<int64_t>(info, "time_major", 0) != 0)
    {
    }

    OrtStatusPtr compute(Ort::KernelContext ctx) const
    {
        const Ort::ConstValue q = optional_input(ctx, 0), k = optional_input(ctx, 1), v = optional_input(ctx, 2),
                              S0 = optional_input(ctx, 3), z0 = optional_input(ctx, 4), mask = optional_input(ctx, 5);
        if (q == nullptr || k == nullptr || v == nullptr)
            return invalid(signature.name, "q, k and v are required");
        if (num_heads <= 0)
            return invalid(signature.name, "attribute num_heads must be positive");
        const auto qs = shape_of(q), vs = shape_of(v);
        const char* layout = time_major ? "(L, B, H*E)" : "(B, L, H*E)";
        if (qs.size() != 3 || vs.size() != 3)
            return invalid(signature.name, std::string("q, k, v must be 3-D ") + layout);
        if (qs[2] % num_heads != 0 || vs[2] % num_heads != 0)
            return invalid(signature.name, "the last axis of q, k and v must be a multiple of num_heads");
        const int64_t B = time_major ? qs[1] : qs[0], L = time_major ? qs[0] : qs[1], H = num_heads;
        const int64_t E = qs[2] / H, M = vs[2] / H;
        if (shape_of(k) != qs)
            return invalid(signature.name, "k must have q's shape");
        if (vs[0] != qs[0] || vs[1] != qs[1])
            return invalid(signature.name, "v must have q's leading two axes");
        const bool has_S0 = count(S0) > 0, has_z0 = count(z0) > 0;
        if (has_S0 && shape_of(S0) != std::vector<int64_t>{B, H, E, M})
            return invalid(signature.name, "S0 must be (B, H, E, M)");
        if (has_z0 && shape_of(z0) != std::vector<int64_t>{B, H, E})
            return invalid(signature.name, "z0 must be (B, H, E)");
        PadMask pad;
        if (OrtStatusPtr status = pad.read(signature.name, mask, {qs[0], qs[1]}, time_major ? "(L, B)" : "(B, L)"))
            return status;
        std::vector<float> q_f, k_f, v_f, out_f;
        using acc_t = acc_type<T>;
        Ort::UnownedValue out = ctx.GetOutput(0, {qs[0], qs[1], H * M});
        Ort::UnownedValue S_last = ctx.GetOutput(1, {B, H, E, M});
        Ort::UnownedValue z_last = ctx.GetOutput(2, {B, H, E});
        LinearRecurrenceArgs<acc_t> args{B, L, H, H, E, M, /*rule linear*/ 0, false, false, /*scale*/ 1.0,
            as_acc<T>(q, q_f), as_acc<T>(k, k_f), as_acc<T>(v, v_f), has_S0 ? S0.GetTensorData<acc_t>() : nullptr,
            nullptr, nullptr, pad.bytes, output_acc<T>(out, static_cast<size_t>(B * L * H * M), out_f),
            S_last.GetTensorMutableData<acc_t>(), false};
        args.time_major = time_major;
        args.feature_map = true;
        args.normalise = true;
        args.eps = eps;
        args.z_in = has_z0 ? z0.GetTensorData<acc_t>() : nullptr;
        args.z_out = z_last.GetTensorMutableData<acc_t>();
        return run<T>(ctx, linear_recurrence_forward<acc_t>, args, out, out_f);
    }
};

template <typename T> using CausalLinearAttentionOp = CpuOp<CausalLinearAttentionKernel, T>;
} // namespace rnnx_ort
