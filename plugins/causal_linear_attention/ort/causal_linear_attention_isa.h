// CausalLinearAttention's CPU entry points for the ONNX Runtime op (causal_linear_attention_op.h):
// attention_forward<acc_t>, whose builds (causal_linear_attention_isa.cpp, one per instruction set) run
// ../cpu/causal_linear_attention_kernel.h.
#pragma once

#include "isa_kernels.h"

namespace rnnx_ort
{
// rnnx::CausalLinearAttention in the layouts of docs/ops.md, all in acc_t; S0 and z0 may be null (zeros).
template <typename acc_t> struct AttentionArgs
{
    int64_t B, H, L, E, M;
    double eps;
    bool time_major;
    const acc_t *q, *k, *v, *S0, *z0;
    const uint8_t* pad;
    acc_t *out, *S_last, *z_last;
};

// The avx2 build where the CPU runs it, else base.
RNNX_ISA_ENTRY_AVX2(attention_forward, AttentionArgs)
} // namespace rnnx_ort
