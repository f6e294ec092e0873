// rnnx_emu_causal_linear_attention_{workspace_size,forward}: the C entry points of librnnx_kernels_emulated.so for
// this op's launcher (causal_linear_attention.h), for tests driving the emulated kernels from Python (ctypes) on
// host memory. Compiled into the emulation library only (plugins/kernels/emulation); rnnx_emulation_c_api.h has
// the conventions.
#include "causal_linear_attention/cuda/causal_linear_attention.h"
#include "rnnx_emulation_c_api.h"

#include <cstddef>
#include <cstdint>

//! Bytes of workspace causal_linear_attention_forward needs for these sizes; 0 for an unknown dtype.
RNNX_EMU_API size_t rnnx_emu_causal_linear_attention_workspace_size(
    int batch, int heads, int length, int dim_k, int dim_v, int dtype)
{
    rnnx::kernels::DataType type;
    if (!rnnx::emu::toDataType(dtype, &type))
        return 0;
    const rnnx::kernels::LinearAttentionParams p{
        batch, heads, length, dim_k, dim_v, 0.f, false, rnnx::kernels::MaskType::kUINT8};
    return rnnx::kernels::causalLinearAttentionWorkspaceSize(p, type);
}

//! Tensors as in causal_linear_attention.h (causalLinearAttentionForward): heads packed, q (B, L, H*E), or
//! (L, B, H*E) with time_major != 0; mask_pad (B, L) / (L, B) uint8 or nullptr.
RNNX_EMU_API int rnnx_emu_causal_linear_attention_forward(int batch, int heads, int length, int dim_k, int dim_v,
    float eps, int time_major, int dtype, const void* q, const void* k, const void* v, const float* S0, const float* z0,
    const uint8_t* mask_pad, void* out, float* S_last, float* z_last, void* workspace)
{
    rnnx::kernels::DataType type;
    if (!rnnx::emu::toDataType(dtype, &type))
        return cudaErrorInvalidValue;
    const rnnx::kernels::LinearAttentionParams p{
        batch, heads, length, dim_k, dim_v, eps, time_major != 0, rnnx::kernels::MaskType::kUINT8};
    return rnnx::kernels::causalLinearAttentionForward(
        p, type, q, k, v, S0, z0, mask_pad, out, S_last, z_last, workspace, nullptr);
}
