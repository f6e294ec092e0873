// rnnx_emu_linear_recurrence_{workspace_size,forward}: the C entry points of librnnx_kernels_emulated.so for this op's
// launcher (linear_recurrence.h), for tests driving the emulated kernels from Python (ctypes) on host memory. Compiled
// into the emulation library only (plugins/kernels/emulation); rnnx_emulation_c_api.h has the conventions.
#include "linear_recurrence/cuda/linear_recurrence.h"
#include "rnnx_emulation_c_api.h"

#include <cstddef>

//! Bytes of workspace linear_recurrence_forward needs with a normaliser for these sizes (0 without one).
RNNX_EMU_API size_t rnnx_emu_linear_recurrence_workspace_size(
    int batch, int kv_heads, int dim_k, int normalised, int dtype)
{
    rnnx::kernels::DataType type;
    if (!rnnx::emu::toDataType(dtype, &type))
        return 0;
    rnnx::kernels::LinearRecurrenceParams p{};
    p.batch = batch;
    p.kv_heads = kv_heads;
    p.dim_k = dim_k;
    return rnnx::kernels::linearRecurrenceWorkspaceSize(p, type, normalised != 0);
}

//! rule: rnnx::kernels::LinearRecurrenceRule (0 linear, 1 gated, 2 delta, 3 gated_delta); qk_l2_norm != 0: query
//! and key heads L2-normalised first; kernel: LinearRecurrenceKernel (0 auto, 1 recurrent, 2 chunked, 3 chunked_mma);
//! mask_int32 != 0: mask_pad is int32, else uint8; feature_map: LinearRecurrenceFeatureMap (0 none, 1 elu + 1);
//! time_major != 0: (T, B, .) token tensors and a (T, B) mask; normalised != 0: the normaliser (z_in, z_out, eps,
//! workspace), else those four are ignored.
//! Tensors as in linear_recurrence.h (linearRecurrenceForward).
RNNX_EMU_API int rnnx_emu_linear_recurrence_forward(int batch, int length, int q_heads, int kv_heads, int dim_k,
    int dim_v, int rule, int decay_per_key, int beta_per_head, float scale, int qk_l2_norm, int kernel, int mask_int32,
    int feature_map, int time_major, int dtype, const void* query, const void* key, const void* value,
    const float* past_state, const void* decay, const void* beta, const void* mask_pad, void* output,
    float* present_state, int normalised, const float* z_in, float* z_out, float eps, void* workspace)
{
    rnnx::kernels::DataType type;
    if (!rnnx::emu::toDataType(dtype, &type))
        return cudaErrorInvalidValue;
    const rnnx::kernels::LinearRecurrenceParams p{batch, length, q_heads, kv_heads, dim_k, dim_v,
        static_cast<rnnx::kernels::LinearRecurrenceRule>(rule), decay_per_key != 0, beta_per_head != 0, scale,
        mask_int32 != 0 ? rnnx::kernels::MaskType::kINT32 : rnnx::kernels::MaskType::kUINT8,
        static_cast<rnnx::kernels::LinearRecurrenceKernel>(kernel), qk_l2_norm != 0,
        static_cast<rnnx::kernels::LinearRecurrenceFeatureMap>(feature_map), time_major != 0};
    const rnnx::kernels::LinearRecurrenceNormaliser normaliser{z_in, z_out, eps, workspace};
    return rnnx::kernels::linearRecurrenceForward(p, type, query, key, value, past_state, decay, beta, mask_pad, output,
        present_state, nullptr, normalised != 0 ? &normaliser : nullptr);
}
