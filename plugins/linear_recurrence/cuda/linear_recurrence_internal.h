// Internal interface between the linear recurrence's kernel files: linear_recurrence.cu (the launcher, the recurrent
// and the chunked kernel) and linear_recurrence_mma.cu (the linear rule's chunked MMA kernel). What every kernel reads:
// the launch's sizes and options (RecurrenceProblem), its tensors (RecurrenceTensors) and where a token's row is.
#pragma once

#include "linear_recurrence/cuda/linear_recurrence.h"
#include "type_utils.cuh"

namespace rnnx
{
namespace kernels
{
namespace detail
{

//! The launch's sizes and options, the scale resolved (linearRecurrenceForward's params).
struct RecurrenceProblem
{
    int B, T, Hq, Hkv, dk, dv, Dg; // Dg: decay entries per kv head and token (0 = no decay)
    int Hk, Ho;                    // key heads min(Hq, Hkv), output heads max(Hq, Hkv)
    int G, R;                      // query heads per state (Hq / Hkv or 1), states per key head (Hkv / Hq or 1)
    bool delta, beta_per_head, qk_l2_norm;
    bool elu_plus_one; // the feature map x -> elu(x) + 1 on query and key
    bool time_major;   // token t of batch row b is row t*B + b, else b*T + t
    bool normalised;   // a normaliser: z carried, outputs divided by (scale z^T q + eps)
    float scale, eps;
    MaskType mask_type;
};

//! The launch's tensors in the activation type T (layouts in linear_recurrence.h); z_in / z_out only with a
//! normaliser (z_in nullptr = zeros; it never aliases z_out when several column tiles read it).
template <typename T> struct RecurrenceTensors
{
    const T* q;
    const T* k;
    const T* v;
    const float* S_in;
    const T* decay;
    const T* beta;
    const void* mask;
    T* out;
    float* S_out;
    const float* z_in;
    float* z_out;
};

//! Row of token t of batch row b among the rows of query, key, value, output, decay, beta and mask_pad:
//! b*T + t, or t*B + b when time_major.
__device__ __forceinline__ size_t tokenRow(const RecurrenceProblem& p, int b, int t)
{
    return p.time_major ? static_cast<size_t>(t) * p.B + b : static_cast<size_t>(b) * p.T + t;
}

//! A query or key element as the kernels use it: x, or elu(x) + 1 with the feature map.
__device__ __forceinline__ float featureMap(const RecurrenceProblem& p, float x)
{
    return p.elu_plus_one ? phi(x) : x;
}

//! Whether the chunked MMA kernel runs these params: the linear rule, H_q == H_kv, d_k and d_v in {32, 64, 128},
//! no qk_l2_norm.
bool chunkedMmaEligible(const LinearRecurrenceParams& params);

//! Column tiles the chunked MMA kernel splits d_v into for these head dims and activation type.
int chunkedMmaTiles(int dk, int dv, DataType type);

//! Launches the chunked MMA kernel (eligible problems only) on `stream`; returns the launch status.
template <typename T>
cudaError_t launchChunkedMma(const RecurrenceProblem& p, const RecurrenceTensors<T>& x, cudaStream_t stream);

} // namespace detail
} // namespace kernels
} // namespace rnnx
