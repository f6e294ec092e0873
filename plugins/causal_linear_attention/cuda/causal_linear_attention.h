// CUDA launcher of causal linear attention (causal_linear_attention.cu, on the linear recurrence's kernels,
// linear_recurrence/cuda/linear_recurrence.h): rnnx::kernels::causalLinearAttentionForward and its workspace size.
// Launcher conventions (enqueue only, launch status returned, zero sizes valid): rnnx/kernel_types.h.
#pragma once

#include "rnnx/kernel_types.h"

namespace rnnx
{
namespace kernels
{

//! Attributes of one causal linear attention call (docs/ops.md, "Causal linear attention").
struct LinearAttentionParams
{
    int batch;       //!< B
    int heads;       //!< H, packed in the last axis of q, k, v and out
    int length;      //!< L
    int dim_k;       //!< E, head dim of q and k, 1..256
    int dim_v;       //!< M, head dim of v
    float eps;       //!< added to the denominator phi(q)^T z
    bool time_major; //!< q, k, v, out are (L, B, H*.) and mask_pad (L, B); else (B, L, H*.) and (B, L)
    MaskType mask_type{MaskType::kUINT8}; //!< element type of mask_pad (ignored without a mask)
};

//! Bytes of device workspace causalLinearAttentionForward needs (a copy of z0, used when z_last
//! aliases z0). Always allocate at least this much; it does not depend on L.
size_t causalLinearAttentionWorkspaceSize(const LinearAttentionParams& params, DataType type);

//! Causal linear attention with phi(x) = elu(x) + 1, from the state (S0, z0) to (S_last, z_last).
//! The heads are packed in the last axis: element (b, t, h, e) of q is q[b, t, h*E + e], or
//! q[t, b, h*E + e] when time_major (k, v and out likewise).
//!
//!   q, k      (B, L, H*E)   act dtype; (L, B, H*E) when time_major
//!   v         (B, L, H*M)   act dtype; (L, B, H*M) when time_major
//!   S0        (B, H, E, M)  fp32, nullptr = zeros
//!   z0        (B, H, E)     fp32, nullptr = zeros
//!   mask_pad  (B, L)        params.mask_type (uint8 / bool or int32), non-zero = pad step; (L, B) when
//!                           time_major; nullptr = none.
//!                           At a pad step S and z are carried unchanged (its k and v are ignored, as if
//!                           phi(k) = 0 and v = 0) and out is still phi(q)^T S / (phi(q)^T z + eps).
//!   out       (B, L, H*M)   act dtype; (L, B, H*M) when time_major
//!   S_last    (B, H, E, M)  fp32; may alias S0 exactly (in place)
//!   z_last    (B, H, E)     fp32; may alias z0 exactly (in place)
//!   workspace               causalLinearAttentionWorkspaceSize() bytes, 16-byte aligned
//!
//! It is linearRecurrenceForward (linear_recurrence.h) with the linear rule, H_q = H_kv = H, scale 1, the feature
//! map elu + 1, params.time_major, and the normaliser (z0, z_last, eps, workspace): z is the state's ones column.
//! So its kernels are the linear recurrence's, picked by kAUTO: L == 1 the recurrent kernel; L >= 2 the chunked MMA
//! kernel when E and M are both in {32, 64, 128} (fp16 / bf16: 64-token chunks, the in-chunk matmuls
//! phi(Q) phi(K)^T, A V and the state update K^T V on tensor cores with fp32 accumulation; fp32: 32-token chunks,
//! fp32 FMA; phi(Q) S, the normaliser and the state in fp32), else the chunked kernel (chunks of up to 32 tokens,
//! fp32). L == 0 copies S0 / z0 to S_last / z_last (zeros where absent). Returns cudaErrorInvalidValue for negative
//! sizes, E outside 1..256, M < 1, a mask_type not in MaskType, or z_last aliasing z0 without the workspace when M is
//! split into several column tiles.
cudaError_t causalLinearAttentionForward(const LinearAttentionParams& params, DataType type, const void* q,
    const void* k, const void* v, const float* S0, const float* z0, const void* mask_pad, void* out, float* S_last,
    float* z_last, void* workspace, cudaStream_t stream);

} // namespace kernels
} // namespace rnnx
