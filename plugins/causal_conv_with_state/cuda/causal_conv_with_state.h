// CUDA launcher of the causal convolution with state (causal_conv_with_state.cu):
// rnnx::kernels::causalConvWithStateForward.
// Launcher conventions (enqueue only, launch status returned, zero sizes valid): rnnx/kernel_types.h.
#pragma once

#include "rnnx/kernel_types.h"

namespace rnnx
{
namespace kernels
{

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
