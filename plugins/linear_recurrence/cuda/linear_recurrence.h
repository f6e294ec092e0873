// CUDA launcher of the linear recurrence (linear_recurrence.cu: the launcher, the recurrent and the chunked kernel;
// linear_recurrence_mma.cu: the linear rule's tensor-core chunked kernel): rnnx::kernels::linearRecurrenceForward and
// its workspace size. Causal linear attention (causal_linear_attention/cuda/causal_linear_attention.h) runs on it.
// Launcher conventions (enqueue only, launch status returned, zero sizes valid): rnnx/kernel_types.h.
#pragma once

#include "rnnx/kernel_types.h"

namespace rnnx
{
namespace kernels
{

//! The largest d_k (head dim of query and key) the kernels take: the recurrent kernel's state tile in shared memory.
constexpr int kLINEAR_RECURRENCE_MAX_DIM_K = 256;

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
    kAUTO,       //!< the recurrent kernel for length <= 1, else kCHUNKED_MMA where eligible, else kCHUNKED
    kRECURRENT,  //!< one token after the other (any length)
    kCHUNKED,    //!< chunks of tokens, the state carried between them (any length)
    kCHUNKED_MMA //!< chunks with tensor-core matmuls (any length), where eligible (linearRecurrenceForward)
};

//! Feature map applied to every query and key element on load, in fp32 (before qk_l2_norm when both are set).
enum class LinearRecurrenceFeatureMap
{
    kNONE,        //!< x
    kELU_PLUS_ONE //!< elu(x) + 1: x + 1 for x > 0, exp(x) otherwise (positive everywhere)
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
    LinearRecurrenceFeatureMap feature_map{LinearRecurrenceFeatureMap::kNONE}; //!< on query and key, in fp32
    //! query, key, value, output, decay and beta are (T, B, H*.) and mask_pad (T, B): token t of batch row b is row
    //! t*B + b of them, instead of b*T + t
    bool time_major{false};
};

//! The normaliser of linear attention (causal linear attention is the linear rule with one): besides the state S
//! (d_k x d_v) each kv head carries z (d_k), z_t = z_{t-1} + k_t at a non-pad step (k after the feature map and
//! qk_l2_norm; a pad step carries z), and each output is divided by its query's dot product with z:
//!   output_t = scale * S_t^T q_t / (scale * z_t^T q_t + eps)
//! which is the linear rule on [v | 1] (z the state's extra column) followed by o[:d_v] / (o[d_v] + eps).
struct LinearRecurrenceNormaliser
{
    const float* z_in; //!< (B, H_kv, d_k) fp32, nullptr = zeros
    float* z_out;      //!< (B, H_kv, d_k) fp32; may alias z_in exactly (in place)
    float eps;         //!< added to the denominator
    //! linearRecurrenceWorkspaceSize() bytes, 16-byte aligned: a copy of z_in, used only when z_out aliases z_in and
    //! the kernel splits d_v into several column tiles (every tile reads z_in, one writes z_out); nullptr refuses
    //! that case with cudaErrorInvalidValue
    void* workspace;
};

//! Bytes of device workspace linearRecurrenceForward needs: 0 without a normaliser, else a copy of z_in
//! (B * H_kv * d_k fp32, rounded up to 256 bytes) for an in-place call (LinearRecurrenceNormaliser::workspace).
//! Always allocate at least this much; it does not depend on the length nor on the kernel.
size_t linearRecurrenceWorkspaceSize(const LinearRecurrenceParams& params, DataType type, bool normalised);

//! Linear recurrence (ONNX opset 27 LinearAttention plus rnnx's pad mask, grouped value, qk_l2_norm, a feature map
//! and a normaliser), from past_state to present_state. Heads are packed in the last axis: element (b, t, h, e) of
//! query is query[(row*H_q + h)*d_k + e] with row = b*T + t, or t*B + b when params.time_major (every other tensor
//! with a token axis likewise). H_k = min(H_q, H_kv) key heads, H_o = max(H_q, H_kv) output heads:
//! grouped query (H_q = G H_kv): query head h reads state h / G and gives output head h; grouped value
//! (H_kv = R H_q): state s reads query and key head s / R and gives output head s. Each query and key element is
//! mapped by params.feature_map first, and with params.qk_l2_norm each query and key head (d_k values) is then
//! divided by sqrt(sum(x^2) + kQK_L2_NORM_EPS) (linear_recurrence/linear_recurrence_constants.h). All arithmetic and
//! the state are fp32.
//!
//!   query          (B, T, H_q*d_k)   act dtype; (T, B, H_q*d_k) when time_major (so are all (B, T, .) below)
//!   key            (B, T, H_k*d_k)   act dtype
//!   value          (B, T, H_kv*d_v)  act dtype
//!   past_state     (B, H_kv, d_k, d_v) fp32, nullptr = zeros
//!   decay          (B, T, H_kv) or (B, T, H_kv*d_k) act dtype, log space (a_t = exp(decay)); gated rules only
//!                  (else ignored, may be nullptr)
//!   beta           (B, T, H_kv) or (B, T, 1) act dtype; delta rules only (else ignored, may be nullptr)
//!   mask_pad       (B, T) params.mask_type, non-zero = pad step: the state is carried (its key, value, decay
//!                  and beta are ignored) and its output is read from the carried state; nullptr = none
//!   output         (B, T, H_o*d_v)   act dtype, scale * S_t^T q_t per query head (grouped query) or per state
//!                  (grouped value); divided by (scale * z_t^T q_t + eps) with a normaliser
//!   present_state  (B, H_kv, d_k, d_v) fp32; may alias past_state exactly (in place)
//!   normaliser     nullptr = none; else z_in / z_out (B, H_kv, d_k) fp32, eps and workspace
//!                  (LinearRecurrenceNormaliser); the linear rule only
//!
//! Kernels (params.kernel): the recurrent kernel (one block per (b, kv head, 32 columns of d_v), the fp32 state
//! tile in shared memory, one token after the other, every query head of the block's state read per token), the
//! chunked kernel (same blocks; chunks of up to 32 tokens whose intra-chunk terms are fp32 matrices in shared
//! memory, the delta rules by a unit-lower-triangular forward substitution per chunk) and the chunked MMA kernel,
//! eligible for the linear rule with H_q == H_kv, d_k and d_v in {32, 64, 128} and no qk_l2_norm: one block per
//! (b, head, column tile), chunks of 64 tokens (32 for fp32), the in-chunk matmuls Q K^T, A V and the state update
//! K^T V on tensor cores for fp16 / bf16 (WMMA, fp32 accumulation; fp32 activations use fp32 FMA), Q S, the
//! normaliser and the state in fp32, the fp32 state carried between chunks. The fp16 / bf16 copy of A that the
//! tensor cores take holds scale * A, or scale * A / den with a normaliser (in [0, 1] for positive features such as
//! elu + 1's: no overflow); z sums k in fp32 from the inputs, not from their activation-type copy. kAUTO runs the
//! recurrent kernel for T <= 1, else the chunked MMA kernel where eligible, else the chunked kernel. Each reads and
//! writes the state once per call; a normaliser's z is computed by every column tile and written by the first. T == 0
//! copies past_state to present_state (zeros without one), and z_in to z_out. Returns cudaErrorInvalidValue for
//! negative sizes, d_k outside 1..256, d_v < 1, H_q and H_kv not positive with one a multiple of the other (both 0 is
//! an empty call), a missing tensor the rule needs (T > 0), a normaliser with another rule or without z_out,
//! kCHUNKED_MMA where it is not eligible, an in-place normaliser without the workspace it needs, or an unknown enum.
cudaError_t linearRecurrenceForward(const LinearRecurrenceParams& params, DataType type, const void* query,
    const void* key, const void* value, const float* past_state, const void* decay, const void* beta,
    const void* mask_pad, void* output, float* present_state, cudaStream_t stream,
    const LinearRecurrenceNormaliser* normaliser = nullptr);

} // namespace kernels
} // namespace rnnx
