// CUDA launcher of the SRU scan (sru_scan.cu): rnnx::kernels::sruScanForward.
// Launcher conventions (enqueue only, launch status returned, zero sizes valid): rnnx/kernel_types.h.
#pragma once

#include "rnnx/kernel_types.h"

namespace rnnx
{
namespace kernels
{

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

} // namespace kernels
} // namespace rnnx
