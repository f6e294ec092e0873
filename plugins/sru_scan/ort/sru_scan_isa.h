// SRUScan's CPU entry points for the ONNX Runtime op (sru_scan_op.h): sru_forward<acc_t>, whose builds
// (sru_scan_isa.cpp, one per instruction set) run rnnx's torch CPU kernel of the scan (../cpu/sru_scan_kernel.h).
#pragma once

#include "isa_kernels.h"

namespace rnnx_ort
{
// rnnx::SRUScan in the layouts of docs/ops.md, all in acc_t (float or double); x and mask may be null.
template <typename acc_t> struct SruArgs
{
    int64_t L, B, D, d, k;
    bool has_skip, use_tanh;
    double scale_x;
    const acc_t *U, *x, *weight_c, *bias, *c0;
    const uint8_t* mask;
    acc_t *h, *c_last;
};

// The avx2 build where the CPU runs it, else base.
RNNX_ISA_ENTRY_AVX2(sru_forward, SruArgs)
} // namespace rnnx_ort
