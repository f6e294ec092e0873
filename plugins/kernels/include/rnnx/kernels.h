// CUDA kernels of the two rnnx recurrences, behind a plain C++ API.
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

} // namespace kernels
} // namespace rnnx
