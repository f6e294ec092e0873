// rnnx::CausalConvWithState on the CPU execution provider, fp32, fp16, bf16 and fp64 I/O (fp32 state; fp64 for
// fp64).
//
// Inputs by position: input (B, C, T), weight (C, 1, K), bias? (C,), past_state? (B, C, K-1), mask_pad? (B, T);
// outputs output (B, C, T), present_state (B, C, K-1); attribute activation, none | silu | swish
// (rnnx.runtime.contract.ops.CAUSAL_CONV_WITH_STATE). An absent optional input may be an empty name or left out at the
// end; an absent or empty bias / past_state is zeros, an absent or empty mask no pads. fp16 / bf16 inputs are staged
// to fp32 around the fp32 kernel (causal_conv_with_state_isa.h), parallel over (batch, channel) on ORT's intra-op
// thread pool.
#pragma once

#include "causal_conv_with_state_isa.h"
#include "ort_op_support.h"

namespace rnnx_ort
{
// CausalConvWithState for activation type T: input, weight, bias?, output in T; past_state?, present_state in
// acc_type<T>; mask_pad? any of mask_bytes()' types.
template <typename T> struct CausalConvWithStateKernel
{
    //! New in rnnx domain version 2.
    static constexpr OpSignature<5, 2> signature{"CausalConvWithState", 2,
        {{{Role::activation, false}, {Role::activation, false}, {Role::activation, true}, {Role::state, true},
            {Role::mask, true}}},
        {{Role::activation, Role::state}}};

    std::string activation;

    explicit CausalConvWithStateKernel(const OrtKernelInfo* info)
        : activation(attribute_or<std::string>(info, "activation", "none"))
    {
    }

    OrtStatusPtr compute(Ort::KernelContext ctx) const
    {
        const Ort::ConstValue x = optional_input(ctx, 0), w = optional_input(ctx, 1), bias = optional_input(ctx, 2),
                              S0 = optional_input(ctx, 3), mask = optional_input(ctx, 4);
        if (x == nullptr || w == nullptr)
            return invalid(signature.name, "input and weight are required");
        if (activation != "none" && activation != "silu" && activation != "swish")
            return invalid(signature.name, "activation must be none, silu or swish, got '" + activation + "'");
        const auto xs = shape_of(x), ws = shape_of(w);
        if (xs.size() != 3)
            return invalid(signature.name, "input must be 3-D (B, C, T)");
        const int64_t B = xs[0], C = xs[1], Tn = xs[2];
        if (ws.size() != 3 || ws[0] != C || ws[1] != 1 || ws[2] < 1)
            return invalid(signature.name, "weight must be (C, 1, K) with C = " + std::to_string(C) + " and K >= 1");
        const int64_t K = ws[2];
        const bool has_bias = count(bias) > 0, has_S0 = count(S0) > 0;
        if (has_bias && shape_of(bias) != std::vector<int64_t>{C})
            return invalid(signature.name, "bias must be (C,) with C = " + std::to_string(C));
        if (has_S0 && shape_of(S0) != std::vector<int64_t>{B, C, K - 1})
            return invalid(signature.name,
                "past_state must be (B, C, K-1) = (" + std::to_string(B) + ", " + std::to_string(C) + ", "
                    + std::to_string(K - 1) + ")");
        PadMask pad;
        if (OrtStatusPtr status = pad.read(signature.name, mask, {B, Tn}, "(B, T)", true))
            return status;
        std::vector<float> x_f, w_f, b_f, out_f;
        using acc_t = acc_type<T>;
        Ort::UnownedValue out = ctx.GetOutput(0, {B, C, Tn});
        Ort::UnownedValue present = ctx.GetOutput(1, {B, C, K - 1});
        const CausalConvArgs<acc_t> args{B, C, Tn, K, activation != "none", as_acc<T>(x, x_f), as_acc<T>(w, w_f),
            has_bias ? as_acc<T>(bias, b_f) : nullptr, has_S0 ? S0.GetTensorData<acc_t>() : nullptr, pad.bytes,
            output_acc<T>(out, static_cast<size_t>(B * C * Tn), out_f), present.GetTensorMutableData<acc_t>()};
        return run<T>(ctx, causal_conv_forward<acc_t>, args, out, out_f);
    }
};

template <typename T> using CausalConvWithStateOp = CpuOp<CausalConvWithStateKernel, T>;
} // namespace rnnx_ort
