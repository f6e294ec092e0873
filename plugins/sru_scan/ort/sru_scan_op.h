// rnnx::SRUScan on the CPU execution provider, fp32, fp16, bf16 and fp64 I/O (fp32 state; fp64 for fp64).
//
// Reads the node layout the exporter writes for both targets, by position: U, x?, weight_c, bias, c0,
// mask_pad? (the tensorrt target's 1-element dummy x and all-false mask are accepted too), with the
// attributes of rnnx.runtime.contract.ops.SRU_SCAN. Tensor roles and dtypes: docs/ops.md. fp16 / bf16 inputs are
// staged to fp32 around the fp32 kernel (sru_scan_isa.h), which runs on ORT's intra-op thread pool.
#pragma once

#include "sru_scan_isa.h"
#include "ort_op_support.h"

namespace rnnx_ort
{
// SRUScan for activation type T: U, x?, weight_c, bias in T, c0 in acc_type<T>, mask_pad? any of mask_bytes()'
// types; h in T, c_last in acc_type<T>.
template <typename T> struct SruScanKernel
{
    //! The layout of rnnx domain version 1, unchanged since.
    static constexpr OpSignature<6, 2> signature{"SRUScan", 1,
        {{{Role::activation, false}, {Role::activation, true}, {Role::activation, false}, {Role::activation, false},
            {Role::state, false}, {Role::mask, true}}},
        {{Role::activation, Role::state}}};

    int64_t d, D, k;
    bool has_skip, use_tanh;
    double scale_x;

    explicit SruScanKernel(const OrtKernelInfo* info)
        : d(attribute_or<int64_t>(info, "hidden_size", 0))
        , D(attribute_or<int64_t>(info, "num_directions", 1))
        , k(attribute_or<int64_t>(info, "num_matrices", 3))
        , has_skip(attribute_or<int64_t>(info, "has_skip_term", 1) != 0)
        , use_tanh(attribute_or<int64_t>(info, "use_tanh", 0) != 0)
        , scale_x(attribute_or<float>(info, "scale_x", 1.0f))
    {
    }

    OrtStatusPtr compute(Ort::KernelContext ctx) const
    {
        const Ort::ConstValue U = optional_input(ctx, 0), x = optional_input(ctx, 1), w = optional_input(ctx, 2),
                              bias = optional_input(ctx, 3), c0 = optional_input(ctx, 4), mask = optional_input(ctx, 5);
        if (d <= 0 || (D != 1 && D != 2) || (k != 3 && k != 4))
            return invalid(signature.name, "attributes hidden_size > 0, num_directions 1|2, num_matrices 3|4 expected");
        if (U == nullptr || w == nullptr || bias == nullptr || c0 == nullptr)
            return invalid(signature.name, "U, weight_c, bias and c0 are required");
        const auto shape = shape_of(U);
        if (shape.size() != 3 || shape[2] != D * d * k)
            return invalid(signature.name,
                "U must be (L, B, num_directions * hidden_size * num_matrices = " + std::to_string(D * d * k) + ")");
        const int64_t L = shape[0], B = shape[1], N = B * D * d;
        if (count(w) != static_cast<size_t>(2 * D * d) || count(bias) != static_cast<size_t>(2 * D * d))
            return invalid(signature.name, "weight_c and bias must hold 2 * num_directions * hidden_size values");
        if (count(c0) != static_cast<size_t>(N))
            return invalid(signature.name, "c0 must be (B, num_directions * hidden_size)");
        const bool reads_x = has_skip && k == 3;
        if (reads_x && count(x) != static_cast<size_t>(L * N))
            return invalid(signature.name,
                "x must be (L, B, num_directions * hidden_size) when num_matrices is 3 with the skip term");
        PadMask pad;
        if (OrtStatusPtr status = pad.read(signature.name, mask, static_cast<size_t>(L * B), "(L, B)"))
            return status;
        std::vector<float> u_f, x_f, w_f, b_f, h_f;
        using acc_t = acc_type<T>;
        Ort::UnownedValue h = ctx.GetOutput(0, {L, B, D * d});
        Ort::UnownedValue c_last = ctx.GetOutput(1, {B, D * d});
        const SruArgs<acc_t> args{L, B, D, d, k, has_skip, use_tanh, scale_x, as_acc<T>(U, u_f),
            reads_x ? as_acc<T>(x, x_f) : nullptr, as_acc<T>(w, w_f), as_acc<T>(bias, b_f), c0.GetTensorData<acc_t>(),
            pad.bytes, output_acc<T>(h, static_cast<size_t>(L * N), h_f), c_last.GetTensorMutableData<acc_t>()};
        return run<T>(ctx, sru_forward<acc_t>, args, h, h_f);
    }
};

template <typename T> using SruScanOp = CpuOp<SruScanKernel, T>;
} // namespace rnnx_ort
