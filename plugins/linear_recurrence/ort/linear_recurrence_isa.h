// LinearRecurrence's CPU entry points for the ONNX Runtime op (linear_recurrence_op.h):
// linear_recurrence_forward<acc_t>, whose builds (linear_recurrence_isa.cpp, one per instruction set) run
// ../cpu/linear_recurrence_kernel.h.
#pragma once

#include "isa_kernels.h"

namespace rnnx_ort
{
// rnnx::LinearRecurrence in the layouts of docs/ops.md, all in acc_t; rule 0..3 = linear, gated, delta, gated_delta;
// Hq and Hkv one a multiple of the other (key min(Hq, Hkv) heads, out max(Hq, Hkv) heads); past_state and pad may be
// null (zeros, no pads), decay / beta are null where the rule reads none.
template <typename acc_t> struct LinearRecurrenceArgs
{
    int64_t B, T, Hq, Hkv, dk, dv, rule;
    bool decay_per_key, beta_per_head;
    double scale; // resolved: never 0
    const acc_t *query, *key, *value, *past_state, *decay, *beta;
    const uint8_t* pad;
    acc_t *out, *present_state;
    bool qk_l2_norm; // each query / key head divided by its L2 norm first
    // rnnx's extensions for causal linear attention (../cpu/linear_recurrence_kernel.h): token rows (T, B, ...) and pad
    // (T, B); phi = elu + 1 on queries and keys; the linear rule's normaliser z (B, Hkv, dk), z_in null = zeros.
    bool time_major{false}, feature_map{false}, normalise{false};
    double eps{0.0};
    const acc_t* z_in{nullptr};
    acc_t* z_out{nullptr};
};

// The avx512 build where the CPU runs it, else avx2, else base.
RNNX_ISA_ENTRY(linear_recurrence_forward, LinearRecurrenceArgs)
} // namespace rnnx_ort
