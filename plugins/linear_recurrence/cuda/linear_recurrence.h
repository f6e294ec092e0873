// CUDA launcher of the linear recurrence (linear_recurrence.cu): rnnx::kernels::linearRecurrenceForward.
// Launcher conventions (enqueue only, launch status returned, zero sizes valid): rnnx/kernel_types.h.
#pragma once

#include "rnnx/kernel_types.h"

namespace rnnx
{
namespace kernels
{

//! Update rule of the linear recurrence (ONNX opset 27 LinearAttention's update_rule).
enum class LinearRecurrenceRule
{
    kLINEAR,     //!< S_t = S_{t-1} + k_t v_t^T
    kGATED,      //!< S_t = a_t S_{t-1} + k_t v_t^T
    kDELTA,      //!< S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T
    kGATED_DELTA //!< S_t = a_t S_{t-1} + beta_t k_t (v_t - (a_t S_{t-1})^T k_t)^T
};

//! Which kernel linearRecurrenceForward runs.
enum class LinearRecurrenceKernel
{
    kAUTO,      //!< the recurrent kernel for length 1, else the chunked one
    kRECURRENT, //!< one token after the other (any length)
    kCHUNKED    //!< chunks of tokens, the state carried between them (any length)
};

//! Attributes of one linear recurrence call (docs/ops.md, "Linear recurrence"; the record LINEAR_RECURRENCE).
struct LinearRecurrenceParams
{
    int batch;                            //!< B
    int length;                           //!< T
    int q_heads;                          //!< H_q; H_q and H_kv one a multiple of the other
    int kv_heads;                         //!< H_kv, the number of states
    int dim_k;                            //!< d_k, head dim of query and key, 1..256
    int dim_v;                            //!< d_v, head dim of value, >= 1
    LinearRecurrenceRule rule;            //!< update rule
    bool decay_per_key;                   //!< decay is (B, T, H_kv*d_k), else (B, T, H_kv); gated rules only
    bool beta_per_head;                   //!< beta is (B, T, H_kv), else (B, T, 1); delta rules only
    float scale;                          //!< output scale; 0 means 1/sqrt(d_k)
    MaskType mask_type{MaskType::kUINT8}; //!< element type of mask_pad (ignored without one)
    LinearRecurrenceKernel kernel{LinearRecurrenceKernel::kAUTO}; //!< which kernel runs
    bool qk_l2_norm{false}; //!< divide each query and key head by sqrt(sum(x^2) + kQK_L2_NORM_EPS) first, in fp32
};

//! Linear recurrence (ONNX opset 27 LinearAttention plus rnnx's pad mask, grouped value and qk_l2_norm), from
//! past_state to present_state. Heads are packed in the last axis: element (b, t, h, e) of query is
//! query[(b*T + t)*H_q*d_k + h*d_k + e]. H_k = min(H_q, H_kv) key heads, H_o = max(H_q, H_kv) output heads:
//! grouped query (H_q = G H_kv): query head h reads state h / G and gives output head h; grouped value
//! (H_kv = R H_q): state s reads query and key head s / R and gives output head s. With params.qk_l2_norm each
//! query and key head (d_k values) is divided by sqrt(sum(x^2) + kQK_L2_NORM_EPS) first
//! (linear_recurrence/linear_recurrence_constants.h). All arithmetic and the state are fp32.
//!
//!   query          (B, T, H_q*d_k)   act dtype
//!   key            (B, T, H_k*d_k)   act dtype
//!   value          (B, T, H_kv*d_v)  act dtype
//!   past_state     (B, H_kv, d_k, d_v) fp32, nullptr = zeros
//!   decay          (B, T, H_kv) or (B, T, H_kv*d_k) act dtype, log space (a_t = exp(decay)); gated rules only
//!                  (else ignored, may be nullptr)
//!   beta           (B, T, H_kv) or (B, T, 1) act dtype; delta rules only (else ignored, may be nullptr)
//!   mask_pad       (B, T) params.mask_type, non-zero = pad step: the state is carried (its key, value, decay
//!                  and beta are ignored) and its output is read from the carried state; nullptr = none
//!   output         (B, T, H_o*d_v)   act dtype, scale * S_t^T q_t per query head (grouped query) or per state
//!                  (grouped value)
//!   present_state  (B, H_kv, d_k, d_v) fp32; may alias past_state exactly (in place)
//!
//! Kernels (params.kernel): the recurrent kernel (one block per (b, kv head, 32 columns of d_v), the fp32 state
//! tile in shared memory, one token after the other, every query head of the block's state read per token) and the
//! chunked kernel (same blocks; chunks of up to 32 tokens whose intra-chunk terms are fp32 matrices in shared
//! memory, the delta rules by a unit-lower-triangular forward substitution per chunk). Both read and write the
//! state once per call and need no workspace. Returns cudaErrorInvalidValue for negative sizes, d_k outside
//! 1..256, d_v < 1, H_q and H_kv not positive with one a multiple of the other (both 0 is an empty call), a missing
//! tensor the rule needs, or an unknown enum.
cudaError_t linearRecurrenceForward(const LinearRecurrenceParams& params, DataType type, const void* query,
    const void* key, const void* value, const float* past_state, const void* decay, const void* beta,
    const void* mask_pad, void* output, float* present_state, cudaStream_t stream);

} // namespace kernels
} // namespace rnnx
