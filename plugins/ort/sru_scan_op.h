// rnnx::SRUScan on the CPU execution provider, fp32, fp16, bf16 and fp64 I/O (fp32 state; fp64 for fp64).
//
// Reads the node layout the exporter writes for both targets, by position: U, x?, weight_c, bias, c0,
// mask_pad? (the tensorrt target's 1-element dummy x and all-false mask are accepted too), with the
// attributes of rnnx.models.ops.spec.SRU_SCAN. Tensor roles and dtypes: docs/ops.md. fp16 / bf16 inputs are
// staged to fp32 around the fp32 kernel (isa_kernels.h), which runs on ORT's intra-op thread pool.
#pragma once

#include "ort_op_support.h"

namespace rnnx_ort
{
template <typename T> struct SruScanKernel
{
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

    OrtStatusPtr ComputeV2(OrtKernelContext* context) const
    {
        return guarded([&] { return compute(Ort::KernelContext(context)); });
    }

    OrtStatusPtr compute(Ort::KernelContext ctx) const
    {
        constexpr const char* op = "SRUScan";
        const Ort::ConstValue U = optional_input(ctx, 0), x = optional_input(ctx, 1), w = optional_input(ctx, 2),
                              bias = optional_input(ctx, 3), c0 = optional_input(ctx, 4), mask = optional_input(ctx, 5);
        if (d <= 0 || (D != 1 && D != 2) || (k != 3 && k != 4))
            return invalid(op, "attributes hidden_size > 0, num_directions 1|2, num_matrices 3|4 expected");
        if (U == nullptr || w == nullptr || bias == nullptr || c0 == nullptr)
            return invalid(op, "U, weight_c, bias and c0 are required");
        const auto shape = shape_of(U);
        if (shape.size() != 3 || shape[2] != D * d * k)
            return invalid(op,
                "U must be (L, B, num_directions * hidden_size * num_matrices = " + std::to_string(D * d * k) + ")");
        const int64_t L = shape[0], B = shape[1], N = B * D * d;
        if (count(w) != static_cast<size_t>(2 * D * d) || count(bias) != static_cast<size_t>(2 * D * d))
            return invalid(op, "weight_c and bias must hold 2 * num_directions * hidden_size values");
        if (count(c0) != static_cast<size_t>(N))
            return invalid(op, "c0 must be (B, num_directions * hidden_size)");
        const bool reads_x = has_skip && k == 3;
        if (reads_x && count(x) != static_cast<size_t>(L * N))
            return invalid(
                op, "x must be (L, B, num_directions * hidden_size) when num_matrices is 3 with the skip term");
        std::string mask_error;
        std::vector<uint8_t> mask_staging;
        const uint8_t* mp = mask_bytes(mask, mask_staging, mask_error);
        if (!mask_error.empty())
            return invalid(op, mask_error);
        if (mp != nullptr && count(mask) != static_cast<size_t>(L * B))
            return invalid(op, "mask_pad must be (L, B)");
        std::vector<float> u_f, x_f, w_f, b_f, h_f;
        using acc_t = acc_type<T>;
        Ort::UnownedValue h = ctx.GetOutput(0, {L, B, D * d});
        Ort::UnownedValue c_last = ctx.GetOutput(1, {B, D * d});
        const SruArgs<acc_t> args{L, B, D, d, k, has_skip, use_tanh, scale_x, as_acc<T>(U, u_f),
            reads_x ? as_acc<T>(x, x_f) : nullptr, as_acc<T>(w, w_f), as_acc<T>(bias, b_f), c0.GetTensorData<acc_t>(),
            mp, output_acc<T>(h, static_cast<size_t>(L * N), h_f), c_last.GetTensorMutableData<acc_t>()};
        const ParallelFor parallel_for = ort_parallel_for(ctx);
        sru_forward(parallel_for, args);
        store<T>(h, h_f);
        return nullptr;
    }
};

// SRUScan for activation type T: U, x?, weight_c, bias in T, c0 in acc_type<T>, mask_pad? any of mask_bytes()'
// types;
// h in T, c_last in acc_type<T>.
template <typename T> struct SruScanOp : CpuOp<SruScanOp<T>, SruScanKernel<T>>
{
    const char* GetName() const
    {
        return "SRUScan";
    }
    size_t GetInputTypeCount() const
    {
        return 6;
    }
    ONNXTensorElementDataType GetInputType(size_t index) const
    {
        return index == 5 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED
            : index == 4  ? element_type<acc_type<T>>()
                          : element_type<T>();
    }
    OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t index) const
    {
        return index == 1 || index == 5 ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
    }
    size_t GetOutputTypeCount() const
    {
        return 2;
    }
    ONNXTensorElementDataType GetOutputType(size_t index) const
    {
        return index == 0 ? element_type<T>() : element_type<acc_type<T>>();
    }
};
} // namespace rnnx_ort
