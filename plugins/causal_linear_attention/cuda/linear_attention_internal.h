// Internal interface between the causal linear attention prefill and decode files.
#pragma once

#include <cstddef>
#include <cstdint>

#include "causal_linear_attention/cuda/causal_linear_attention.h"

namespace rnnx
{
namespace kernels
{
namespace detail
{

//! Where the tokens of one (batch row b, head h) lie in the packed layout: q, k (B, L, H*E), v, out (B, L, H*M)
//! and mask_pad (B, L), or (L, B, ...) and (L, B) when time_major. Token t is row `row0 + t * rowStep` of the
//! (B*L) or (L*B) rows: mask_pad[row], q[row * H*E + h*E + e], v[row * H*M + h*M + m].
struct TokenRows
{
    size_t row0;
    size_t rowStep;

    __host__ __device__ static TokenRows of(const LinearAttentionParams& p, int b)
    {
        return p.time_major ? TokenRows{static_cast<size_t>(b), static_cast<size_t>(p.batch)}
                            : TokenRows{static_cast<size_t>(b) * p.length, 1};
    }

    __host__ __device__ size_t row(int t) const
    {
        return row0 + static_cast<size_t>(t) * rowStep;
    }
};

//! One recurrence step for token t of every (batch, head): reads q, k, v (and mask_pad) at position t of
//! sequences of length params.length in the packed layout of causal_linear_attention.h, the state (S_in, z_in) (nullptr
//! = zeros), writes out at position t and the new state (S_out, z_out), which may alias (S_in, z_in) exactly. A pad
//! step copies the state and still writes out. Any E >= 1 and M >= 1.
cudaError_t launchLinearAttentionStep(const LinearAttentionParams& params, DataType type, int t, const void* q,
    const void* k, const void* v, const float* S_in, const float* z_in, const void* mask_pad, void* out, float* S_out,
    float* z_out, cudaStream_t stream);

} // namespace detail
} // namespace kernels
} // namespace rnnx
