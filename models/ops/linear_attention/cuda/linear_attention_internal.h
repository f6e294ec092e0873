// Internal interface between the causal linear attention prefill and decode files.
#pragma once

#include "rnnx/kernels.h"

namespace rnnx
{
namespace kernels
{
namespace detail
{

//! One recurrence step for token t of every (batch, head): reads q, k, v at position t of
//! sequences of length params.length, the state (S_in, z_in) (nullptr = zeros), writes out at
//! position t and the new state (S_out, z_out), which may alias (S_in, z_in) exactly.
//! Any E >= 1 and M >= 1.
cudaError_t launchLinearAttentionStep(const LinearAttentionParams& params, DataType type, int t, const void* q,
    const void* k, const void* v, const float* S_in, const float* z_in, void* out, float* S_out, float* z_out,
    cudaStream_t stream);

} // namespace detail
} // namespace kernels
} // namespace rnnx
