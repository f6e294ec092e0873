// rnnx_emu_causal_conv_with_state_forward: the C entry point of librnnx_kernels_emulated.so for this op's launcher
// (causal_conv_with_state.h), for tests driving the emulated kernel from Python (ctypes) on host memory. Compiled
// into the emulation library only (plugins/kernels/emulation); rnnx_emulation_c_api.h has the conventions.
#include "causal_conv_with_state/cuda/causal_conv_with_state.h"
#include "rnnx_emulation_c_api.h"

//! silu != 0: activation y * sigmoid(y); mask_int32 != 0: mask_pad is int32, else uint8. Tensors as in
//! causal_conv_with_state.h (causalConvWithStateForward).
RNNX_EMU_API int rnnx_emu_causal_conv_with_state_forward(int batch, int channels, int length, int kernel_size, int silu,
    int mask_int32, int dtype, const void* input, const void* weight, const void* bias, const float* past_state,
    const void* mask_pad, void* output, float* present_state)
{
    rnnx::kernels::DataType type;
    if (!rnnx::emu::toDataType(dtype, &type))
        return cudaErrorInvalidValue;
    const rnnx::kernels::CausalConvParams p{batch, channels, length, kernel_size, silu != 0,
        mask_int32 != 0 ? rnnx::kernels::MaskType::kINT32 : rnnx::kernels::MaskType::kUINT8};
    return rnnx::kernels::causalConvWithStateForward(
        p, type, input, weight, bias, past_state, mask_pad, output, present_state, nullptr);
}
