// rnnx::causal_conv_with_state's part of the PyTorch CUDA binding (plugins/torch/binding.cpp; conventions in
// binding_support.h): causal_conv_with_state, a thin wrapper of causalConvWithStateForward
// (../cuda/causal_conv_with_state.h). Not called by the Python op yet (models/ops/causal_conv_with_state runs its
// torch implementation).
#include "binding_support.h"
#include "causal_conv_with_state/cuda/causal_conv_with_state.h"

namespace
{
using namespace rnnx::torch_binding;

//! input (B, C, T), weight (C, 1, K), bias (C) or None, output (B, C, T), all in input's dtype; past_state
//! (B, C, K-1) fp32 or None, present_state the same (may be past_state); mask_pad (B, T) uint8 / bool / int32 or
//! None. silu: activation y * sigmoid(y), else none.
void causalConvWithState(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
    const c10::optional<at::Tensor>& past_state, const c10::optional<at::Tensor>& mask_pad, at::Tensor output,
    at::Tensor present_state, bool silu, int64_t stream)
{
    const auto act = input.scalar_type();
    checkTensors(act, {{input, "input"}, {weight, "weight"}, {output, "output"}});
    checkTensor(present_state, "present_state", at::kFloat);
    TORCH_CHECK(input.dim() == 3, "rnnx CUDA kernels: input must be (B, C, T), got ", input.sizes());
    const int64_t B = input.size(0), C = input.size(1), T = input.size(2);
    TORCH_CHECK(weight.dim() == 3 && weight.size(0) == C && weight.size(1) == 1 && weight.size(2) >= 1,
        "rnnx CUDA kernels: weight has shape ", weight.sizes(), " but expected (C=", C, ", 1, K >= 1)");
    const int64_t K = weight.size(2);
    TORCH_CHECK(output.sizes() == input.sizes(), "rnnx CUDA kernels: output has shape ", output.sizes(),
        " but expected input's ", input.sizes());
    checkOptionalSizes(bias, "bias", {C}, "(C=", C, ")");
    checkStates(past_state, present_state, B * C * (K - 1), "(B=", B, ", C=", C, ", K-1=", K - 1, ")");
    rnnx::kernels::CausalConvParams p{};
    p.batch = static_cast<int>(B);
    p.channels = static_cast<int>(C);
    p.length = static_cast<int>(T);
    p.kernel_size = static_cast<int>(K);
    p.silu = silu;
    const void* mask = batchTimeMaskPtr(mask_pad, B, T, &p.mask_type);
    checkStatus(rnnx::kernels::causalConvWithStateForward(p, dataType(input), input.data_ptr(), weight.data_ptr(),
                    optionalPtr<void>(bias, "bias", act), optionalPtr<float>(past_state, "past_state", at::kFloat),
                    mask, output.data_ptr(), present_state.data_ptr<float>(), toStream(stream)),
        "causalConvWithStateForward");
}
} // namespace

RNNX_TORCH_FUNCTION(causal_conv_with_state, causalConvWithState,
    "Depthwise causal convolution with state forward (rnnx::kernels::causalConvWithStateForward)", py::arg("input"),
    py::arg("weight"), py::arg("bias"), py::arg("past_state"), py::arg("mask_pad"), py::arg("output"),
    py::arg("present_state"), py::arg("silu"), py::arg("stream"));
