// rnnx_emu_linear_recurrence_forward: the C entry point of librnnx_kernels_emulated.so for this op's launcher
// (linear_recurrence.h), for tests driving the emulated kernels from Python (ctypes) on host memory. Compiled
// into the emulation library only (plugins/kernels/emulation); rnnx_emulation_c_api.h has the conventions.
#include "linear_recurrence/cuda/linear_recurrence.h"
#include "rnnx_emulation_c_api.h"

//! rule: rnnx::kernels::LinearRecurrenceRule (0 linear, 1 gated, 2 delta, 3 gated_delta); qk_l2_norm != 0: query
//! and key heads L2-normalised first; kernel: LinearRecurrenceKernel (0 auto, 1 recurrent, 2 chunked);
//! mask_int32 != 0: mask_pad is int32, else uint8.
//! Tensors as in linear_recurrence.h (linearRecurrenceForward).
RNNX_EMU_API int rnnx_emu_linear_recurrence_forward(int batch, int length, int q_heads, int kv_heads, int dim_k,
    int dim_v, int rule, int decay_per_key, int beta_per_head, float scale, int qk_l2_norm, int kernel, int mask_int32,
    int dtype, const void* query, const void* key, const void* value, const float* past_state, const void* decay,
    const void* beta, const void* mask_pad, void* output, float* present_state)
{
    rnnx::kernels::DataType type;
    if (!rnnx::emu::toDataType(dtype, &type))
        return cudaErrorInvalidValue;
    const rnnx::kernels::LinearRecurrenceParams p{batch, length, q_heads, kv_heads, dim_k, dim_v,
        static_cast<rnnx::kernels::LinearRecurrenceRule>(rule), decay_per_key != 0, beta_per_head != 0, scale,
        mask_int32 != 0 ? rnnx::kernels::MaskType::kINT32 : rnnx::kernels::MaskType::kUINT8,
        static_cast<rnnx::kernels::LinearRecurrenceKernel>(kernel), qk_l2_norm != 0};
    return rnnx::kernels::linearRecurrenceForward(
        p, type, query, key, value, past_state, decay, beta, mask_pad, output, present_state, nullptr);
}
