// C entry points of librnnx_kernels_emulated.so for tests driving the kernels from Python (ctypes) on host
// memory: the launchers of rnnx/kernels.h with plain arguments, the schedule and the counters.
// Every function returns the launcher's cudaError_t as an int (0 = cudaSuccess); after a failure,
// rnnx_emu_take_error_message() says what the emulation found.
#include <cstdint>
#include <cstring>
#include <string>

#include "rnnx/kernels.h"
#include "rnnx_cuda_emulation.h"

namespace
{

bool toDataType(int code, rnnx::kernels::DataType* type)
{
    switch (code)
    {
    case 0: *type = rnnx::kernels::DataType::kFLOAT; return true;
    case 1: *type = rnnx::kernels::DataType::kHALF; return true;
    case 2: *type = rnnx::kernels::DataType::kBF16; return true;
    default: return false;
    }
}

} // namespace

#define RNNX_EMU_API __attribute__((visibility("default")))

extern "C"
{

    //! dtype: 0 = fp32, 1 = fp16, 2 = bf16. Tensors as in rnnx/kernels.h (sruScanForward).
    RNNX_EMU_API int rnnx_emu_sru_scan_forward(int length, int batch, int hidden_size, int num_directions,
        int num_matrices, int has_skip_term, int use_tanh, float scale_x, int dtype, const void* U, const void* x,
        const void* weight_c, const void* bias, const float* c0, const uint8_t* mask_pad, void* h, float* c_last)
    {
        rnnx::kernels::DataType type;
        if (!toDataType(dtype, &type))
            return cudaErrorInvalidValue;
        const rnnx::kernels::SruScanParams p{length, batch, hidden_size, num_directions, num_matrices,
            has_skip_term != 0, use_tanh != 0, scale_x, rnnx::kernels::MaskType::kUINT8};
        return rnnx::kernels::sruScanForward(p, type, U, x, weight_c, bias, c0, mask_pad, h, c_last, nullptr);
    }

    RNNX_EMU_API size_t rnnx_emu_causal_linear_attention_workspace_size(
        int batch, int heads, int length, int dim_k, int dim_v, int dtype)
    {
        rnnx::kernels::DataType type;
        if (!toDataType(dtype, &type))
            return 0;
        const rnnx::kernels::LinearAttentionParams p{
            batch, heads, length, dim_k, dim_v, 0.f, false, rnnx::kernels::MaskType::kUINT8};
        return rnnx::kernels::causalLinearAttentionWorkspaceSize(p, type);
    }

    //! Tensors as in rnnx/kernels.h (causalLinearAttentionForward): heads packed, q (B, L, H*E), or (L, B, H*E)
    //! with time_major != 0; mask_pad (B, L) / (L, B) uint8 or nullptr.
    RNNX_EMU_API int rnnx_emu_causal_linear_attention_forward(int batch, int heads, int length, int dim_k, int dim_v,
        float eps, int time_major, int dtype, const void* q, const void* k, const void* v, const float* S0,
        const float* z0, const uint8_t* mask_pad, void* out, float* S_last, float* z_last, void* workspace)
    {
        rnnx::kernels::DataType type;
        if (!toDataType(dtype, &type))
            return cudaErrorInvalidValue;
        const rnnx::kernels::LinearAttentionParams p{
            batch, heads, length, dim_k, dim_v, eps, time_major != 0, rnnx::kernels::MaskType::kUINT8};
        return rnnx::kernels::causalLinearAttentionForward(
            p, type, q, k, v, S0, z0, mask_pad, out, S_last, z_last, workspace, nullptr);
    }

    //! rule: rnnx::kernels::LinearRecurrenceRule (0 linear, 1 gated, 2 delta, 3 gated_delta); kernel:
    //! LinearRecurrenceKernel (0 auto, 1 recurrent, 2 chunked); mask_int32 != 0: mask_pad is int32, else uint8.
    //! Tensors as in rnnx/kernels.h (linearRecurrenceForward).
    RNNX_EMU_API int rnnx_emu_linear_recurrence_forward(int batch, int length, int q_heads, int kv_heads, int dim_k,
        int dim_v, int rule, int decay_per_key, int beta_per_head, float scale, int kernel, int mask_int32, int dtype,
        const void* query, const void* key, const void* value, const float* past_state, const void* decay,
        const void* beta, const void* mask_pad, void* output, float* present_state)
    {
        rnnx::kernels::DataType type;
        if (!toDataType(dtype, &type))
            return cudaErrorInvalidValue;
        const rnnx::kernels::LinearRecurrenceParams p{batch, length, q_heads, kv_heads, dim_k, dim_v,
            static_cast<rnnx::kernels::LinearRecurrenceRule>(rule), decay_per_key != 0, beta_per_head != 0, scale,
            mask_int32 != 0 ? rnnx::kernels::MaskType::kINT32 : rnnx::kernels::MaskType::kUINT8,
            static_cast<rnnx::kernels::LinearRecurrenceKernel>(kernel)};
        return rnnx::kernels::linearRecurrenceForward(
            p, type, query, key, value, past_state, decay, beta, mask_pad, output, present_state, nullptr);
    }

    //! silu != 0: activation y * sigmoid(y); mask_int32 != 0: mask_pad is int32, else uint8. Tensors as in
    //! rnnx/kernels.h (causalConvWithStateForward).
    RNNX_EMU_API int rnnx_emu_causal_conv_with_state_forward(int batch, int channels, int length, int kernel_size,
        int silu, int mask_int32, int dtype, const void* input, const void* weight, const void* bias,
        const float* past_state, const void* mask_pad, void* output, float* present_state)
    {
        rnnx::kernels::DataType type;
        if (!toDataType(dtype, &type))
            return cudaErrorInvalidValue;
        const rnnx::kernels::CausalConvParams p{batch, channels, length, kernel_size, silu != 0,
            mask_int32 != 0 ? rnnx::kernels::MaskType::kINT32 : rnnx::kernels::MaskType::kUINT8};
        return rnnx::kernels::causalConvWithStateForward(
            p, type, input, weight, bias, past_state, mask_pad, output, present_state, nullptr);
    }

    //! schedule: 0 = in order, 1 = reversed, 2 = random (seeded).
    RNNX_EMU_API void rnnx_emu_set_schedule(int schedule, uint64_t seed)
    {
        rnnx::emu::setSchedule(static_cast<rnnx::emu::Schedule>(schedule), seed);
    }

    //! Writes the counters (rnnx::emu::Stats, in field order) into out[0..6].
    RNNX_EMU_API void rnnx_emu_stats(uint64_t* out)
    {
        const rnnx::emu::Stats s = rnnx::emu::stats();
        const uint64_t values[] = {s.launches, s.blocks, s.threads, s.block_barriers, s.warp_collectives, s.mma,
            s.max_shared_bytes, s.attribute_calls};
        std::memcpy(out, values, sizeof(values));
    }

    RNNX_EMU_API void rnnx_emu_reset_stats()
    {
        rnnx::emu::resetStats();
    }

    RNNX_EMU_API void rnnx_emu_forget_function_attributes()
    {
        rnnx::emu::forgetFunctionAttributes();
    }

    //! Copies the last failure's message into buffer (at most size bytes, NUL-terminated) and clears it.
    RNNX_EMU_API void rnnx_emu_take_error_message(char* buffer, size_t size)
    {
        const std::string message = rnnx::emu::takeLaunchErrorMessage();
        if (size == 0)
            return;
        std::strncpy(buffer, message.c_str(), size - 1);
        buffer[size - 1] = '\0';
    }

} // extern "C"
