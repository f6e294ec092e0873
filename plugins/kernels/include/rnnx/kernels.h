// CUDA kernels of the rnnx ops (SRU scan, causal linear attention, linear recurrence, causal convolution with
// state), behind a plain C++ API.
//
// The TensorRT plugins (plugins/) and the PyTorch CUDA binding (plugins/torch/) both call these
// launchers, so the same kernels run in TensorRT, in PyTorch and in the tests and benchmarks.
// The maths, layouts and mask semantics are those of docs/ops.md; every tensor is dense and
// contiguous (row-major in the shape order given below). Activations are fp32, fp16 or bf16
// (DataType); recurrent state is fp32 in every precision and all arithmetic is fp32.
//
// Every launcher only enqueues work on `stream` (no synchronisation, no allocation) and returns
// the launch status: cudaErrorInvalidValue for arguments it does not support, else the result of
// cudaGetLastError() after the launch. Sizes of zero are valid and launch nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace rnnx
{
namespace kernels
{

//! Element type of the activation tensors (inputs and outputs other than the state).
enum class DataType
{
    kFLOAT,
    kHALF,
    kBF16
};

//! Element type of a pad mask (mask_pad). Either way an element is a pad step when it is non-zero; the kernels
//! read it in this type. The PyTorch binding passes uint8 (torch.bool / torch.uint8 storage); the TensorRT
//! plugins pass what TensorRT gives them, which is int32: TensorRT does not support kBOOL or kUINT8 plugin
//! tensors (PluginTensorDesc::type, NvInferRuntimePlugin.h), so the TensorRT export casts every mask to int32.
enum class MaskType
{
    kUINT8, //!< one byte per element: uint8 or bool
    kINT32  //!< int32
};

//! Attributes of one SRU scan (docs/ops.md, "SRU scan").
struct SruScanParams
{
    int length;                           //!< L, time steps
    int batch;                            //!< B
    int hidden_size;                      //!< d, per direction
    int num_directions;                   //!< D: 1, or 2 (the second direction walks t from L-1 down to 0)
    int num_matrices;                     //!< k: 3 (x~, f, r) or 4 (x~, f, r, x')
    bool has_skip_term;                   //!< h gets the highway term (1 - r) * x'
    bool use_tanh;                        //!< g = tanh, else identity
    float scale_x;                        //!< x' = scale_x * x when k = 3
    MaskType mask_type{MaskType::kUINT8}; //!< element type of mask_pad (ignored without a mask)
};

//! SRU elementwise recurrence, one thread per (batch, direction, hidden unit) column.
//!
//!   U        (L, B, D*d*k) act dtype, laid out (L, B, D, d, k): x~, f, r[, x'] interleave
//!   x        (L, B, D*d)   act dtype; read only when k = 3 and has_skip_term (else may be nullptr)
//!   weight_c (2*D*d)       act dtype, [v_f (D, d); v_r (D, d)]
//!   bias     (2*D*d)       act dtype, [b_f (D, d); b_r (D, d)]
//!   c0       (B, D*d)      fp32 initial cell state, nullptr = zeros
//!   mask_pad (L, B)        params.mask_type (uint8 / bool or int32), non-zero = pad step: c carried, h = 0;
//!                          nullptr = none
//!   h        (L, B, D*d)   act dtype, output
//!   c_last   (B, D*d)      fp32 final cell state; may alias c0 exactly (state updated in place)
//!
//! Only the final c is written (no per-step state). Returns cudaErrorInvalidValue for
//! num_matrices not in {3, 4}, num_directions not in {1, 2}, negative sizes, a mask_type not in
//! MaskType, or a missing x that the configuration needs.
cudaError_t sruScanForward(const SruScanParams& params, DataType type, const void* U, const void* x,
    const void* weight_c, const void* bias, const float* c0, const void* mask_pad, void* h, float* c_last,
    cudaStream_t stream);

//! Attributes of one causal linear attention call (docs/ops.md, "Causal linear attention").
struct LinearAttentionParams
{
    int batch;       //!< B
    int heads;       //!< H, packed in the last axis of q, k, v and out
    int length;      //!< L; L == 1 runs the decode kernel
    int dim_k;       //!< E, head dim of q and k
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
//! L >= 2 runs the chunked prefill kernel when E and M are both in {32, 64, 128}: 64-token chunks,
//! the in-chunk matmuls phi(Q) phi(K)^T, A V and the state update K^T V on tensor cores for
//! fp16 / bf16 (fp32 accumulation; fp32 activations use fp32 FMA), phi(Q) S in fp32, the fp32
//! state carried between chunks. Other head dims run the decode kernel once per token (slow but
//! exact). L == 1 runs the decode kernel. Returns cudaErrorInvalidValue for non-positive head dims,
//! negative sizes or a mask_type not in MaskType.
cudaError_t causalLinearAttentionForward(const LinearAttentionParams& params, DataType type, const void* q,
    const void* k, const void* v, const float* S0, const float* z0, const void* mask_pad, void* out, float* S_last,
    float* z_last, void* workspace, cudaStream_t stream);

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
    int q_heads;                          //!< H_q, a multiple of kv_heads
    int kv_heads;                         //!< H_kv
    int dim_k;                            //!< d_k, head dim of query and key, 1..256
    int dim_v;                            //!< d_v, head dim of value, >= 1
    LinearRecurrenceRule rule;            //!< update rule
    bool decay_per_key;                   //!< decay is (B, T, H_kv*d_k), else (B, T, H_kv); gated rules only
    bool beta_per_head;                   //!< beta is (B, T, H_kv), else (B, T, 1); delta rules only
    float scale;                          //!< output scale; 0 means 1/sqrt(d_k)
    MaskType mask_type{MaskType::kUINT8}; //!< element type of mask_pad (ignored without one)
    LinearRecurrenceKernel kernel{LinearRecurrenceKernel::kAUTO}; //!< which kernel runs
};

//! Linear recurrence (ONNX opset 27 LinearAttention plus rnnx's pad mask), from past_state to present_state.
//! Heads are packed in the last axis: element (b, t, h, e) of query is query[(b*T + t)*H_q*d_k + h*d_k + e].
//! Query head h reads kv head h / (H_q / H_kv). All arithmetic and the state are fp32.
//!
//!   query          (B, T, H_q*d_k)   act dtype
//!   key            (B, T, H_kv*d_k)  act dtype
//!   value          (B, T, H_kv*d_v)  act dtype
//!   past_state     (B, H_kv, d_k, d_v) fp32, nullptr = zeros
//!   decay          (B, T, H_kv) or (B, T, H_kv*d_k) act dtype, log space (a_t = exp(decay)); gated rules only
//!                  (else ignored, may be nullptr)
//!   beta           (B, T, H_kv) or (B, T, 1) act dtype; delta rules only (else ignored, may be nullptr)
//!   mask_pad       (B, T) params.mask_type, non-zero = pad step: the state is carried (its key, value, decay
//!                  and beta are ignored) and its output is read from the carried state; nullptr = none
//!   output         (B, T, H_q*d_v)   act dtype, scale * S_t^T q_t per query head
//!   present_state  (B, H_kv, d_k, d_v) fp32; may alias past_state exactly (in place)
//!
//! Kernels (params.kernel): the recurrent kernel (one block per (b, kv head, 32 columns of d_v), the fp32 state
//! tile in shared memory, one token after the other, every query head of the group read per token) and the
//! chunked kernel (same blocks; chunks of up to 32 tokens whose intra-chunk terms are fp32 matrices in shared
//! memory, the delta rules by a unit-lower-triangular forward substitution per chunk). Both read and write the
//! state once per call and need no workspace. Returns cudaErrorInvalidValue for negative sizes, d_k outside
//! 1..256, d_v < 1, H_q not a positive multiple of H_kv, a missing tensor the rule needs, or an unknown enum.
cudaError_t linearRecurrenceForward(const LinearRecurrenceParams& params, DataType type, const void* query,
    const void* key, const void* value, const float* past_state, const void* decay, const void* beta,
    const void* mask_pad, void* output, float* present_state, cudaStream_t stream);

//! Attributes of one causal convolution with state (docs/ops.md; the record CAUSAL_CONV_WITH_STATE).
struct CausalConvParams
{
    int batch;                            //!< B
    int channels;                         //!< C
    int length;                           //!< T
    int kernel_size;                      //!< K >= 1 (the state holds K-1 inputs)
    bool silu;                            //!< activation y * sigmoid(y), else none
    MaskType mask_type{MaskType::kUINT8}; //!< element type of mask_pad (ignored without one)
};

//! Depthwise causal convolution along time, channels first, with a carried window of the last K-1 inputs.
//!
//!   input          (B, C, T)   act dtype
//!   weight         (C, 1, K)   act dtype
//!   bias           (C)         act dtype, nullptr = zeros
//!   past_state     (B, C, K-1) fp32, the K-1 inputs before input[..., 0]; nullptr = zeros
//!   mask_pad       (B, T) params.mask_type, non-zero = pad step: output 0, the window does not move;
//!                  nullptr = none
//!   output         (B, C, T)   act dtype, y = act(bias[c] + sum_j weight[c, 0, j] x[t - (K-1) + j]) over the
//!                  steps that are not pads
//!   present_state  (B, C, K-1) fp32, the last K-1 inputs that are not pads; may alias past_state exactly
//!
//! Two launches on `stream`: the outputs, one thread per (b, c, t), then the state, one thread per (b, c).
//! Returns cudaErrorInvalidValue for negative sizes, K < 1 or an unknown mask type.
cudaError_t causalConvWithStateForward(const CausalConvParams& params, DataType type, const void* input,
    const void* weight, const void* bias, const float* past_state, const void* mask_pad, void* output,
    float* present_state, cudaStream_t stream);

} // namespace kernels
} // namespace rnnx
