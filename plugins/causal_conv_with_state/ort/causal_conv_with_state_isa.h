// CausalConvWithState's CPU entry points for the ONNX Runtime op (causal_conv_with_state_op.h):
// causal_conv_forward<acc_t>, whose builds (causal_conv_with_state_isa.cpp, one per instruction set) run
// ../cpu/causal_conv_with_state_kernel.h.
#pragma once

#include "isa_kernels.h"

namespace rnnx_ort
{
// rnnx::CausalConvWithState in the layouts of docs/ops.md, all in acc_t; bias, past_state and pad may be null.
template <typename acc_t> struct CausalConvArgs
{
    int64_t B, C, T, K;
    bool silu;
    const acc_t *input, *weight, *bias, *past_state;
    const uint8_t* pad;
    acc_t *out, *present_state;
};

// The avx512 build where the CPU runs it, else avx2, else base.
RNNX_ISA_ENTRY(causal_conv_forward, CausalConvArgs)
} // namespace rnnx_ort
