/*
 * LinearRecurrence: the linear recurrence of ONNX opset 27's LinearAttention (update rules linear, gated, delta,
 * gated_delta) with rnnx's pad mask and fp32 state, as a TensorRT IPluginV3 plugin (docs/ops.md, "Linear
 * recurrence").
 *
 * Fields (runtime/contract/ops.py LINEAR_RECURRENCE, in this order): q_num_heads (H_q, required), kv_num_heads
 * (H_kv, required; H_q and H_kv one a multiple of the other), update_rule (a string, kCHAR: linear | gated | delta |
 * gated_delta, default gated_delta), scale (0 means 1/sqrt(d_k)), qk_l2_norm (0 or 1, default 0: each query and key
 * head divided by sqrt(sum(x^2) + 1e-6) first).
 * Groupings: H_k = min(H_q, H_kv) key heads, H_o = max(H_q, H_kv) output heads; grouped query (H_q = G H_kv): query
 * head h reads state h / G; grouped value (H_kv = R H_q): state s reads query and key head s / R, output head s.
 * Inputs: always exactly seven, at fixed positions (the TensorRT node layout of docs/ops.md; the exporter emits no
 * empty-name slots for this target), heads packed in the last axis:
 *   0 query (B, T, H_q*d_k), 1 key (B, T, H_k*d_k), 2 value (B, T, H_kv*d_v) in fp32 / fp16 / bf16;
 *   3 past_state (B, H_kv, d_k, d_v) fp32 (zeros when the model has none);
 *   4 decay (B, T, H_kv) per head or (B, T, H_kv*d_k) per key dim, log space, activation type: read by the gated
 *     rules only; for linear / delta it is a dummy (the exporter passes zeros (B, T, H_kv)) of any shape, never
 *     shape-checked or read;
 *   5 beta (B, T, H_kv) or (B, T, 1), activation type: read by the delta rules only; for linear / gated a dummy
 *     (zeros (B, T, 1)) of any shape;
 *   6 mask_pad (B, T) int32, non-zero = pad (all zeros without padding).
 * d_k = query's last extent / H_q, d_v = value's / H_kv, both 1..256 (the kernels' limit for d_k; larger head dims
 * are refused).
 * Outputs: output (B, T, H_o*d_v) in query's type, present_state (B, H_kv, d_k, d_v) fp32, in its own buffer (no
 * in-place I/O: IPluginV3OneBuild, no getAliasedInput; the runtime double-buffers state). No workspace.
 */
#pragma once

#include "common/pluginBase.h"
#include "linear_recurrence/cuda/linear_recurrence.h"

#include <NvInferRuntime.h>

#include <vector>

namespace rnnx
{
namespace plugin
{

//! LinearRecurrence's attributes, in field-table order (docs/ops.md, runtime/contract/ops.py).
struct LinearRecurrenceParameters
{
    //! H_q; required (the 0 before parsing is refused by checkParameters).
    int32_t qNumHeads{0};
    //! H_kv; required, a divisor or a multiple of H_q.
    int32_t kvNumHeads{0};
    //! Index of the update rule in LinearRecurrencePlugin::kUPDATE_RULES (= kernels::LinearRecurrenceRule's order).
    int32_t updateRule{3};
    //! Output scale; 0 means 1/sqrt(d_k).
    float scale{0.F};
    //! 1: each query and key head is divided by its L2 norm first (kernels::LinearRecurrenceParams::qk_l2_norm).
    int32_t qkL2Norm{0};
};

//! Positions of the inputs (fixed, every one always present) and which of decay / beta the update rule reads.
struct LinearRecurrenceInputs
{
    int32_t query{0};
    int32_t key{1};
    int32_t value{2};
    int32_t pastState{3};
    int32_t decay{4};
    int32_t beta{5};
    int32_t maskPad{6};
    //! gated / gated_delta: decay is read (else a dummy of any shape).
    bool readsDecay{true};
    //! delta / gated_delta: beta is read (else a dummy of any shape).
    bool readsBeta{true};
};

class LinearRecurrencePlugin
    : public PluginBase<LinearRecurrencePlugin, LinearRecurrenceParameters, LinearRecurrenceInputs>
{
public:
    //! The TensorRT node always lists all seven inputs; two outputs.
    static constexpr PluginSignature kSIGNATURE{"LinearRecurrence", 7, 2,
        "query, key, value, past_state, decay, beta, mask_pad; past_state zeros when there is no state, decay / beta "
        "zero dummies for the rules that do not read them, mask_pad all zeros without padding"};
    //! update_rule's strings, in the order of kernels::LinearRecurrenceRule.
    static std::vector<char const*> const& updateRules();
    //! The largest head dim (d_k and d_v) the plugin takes: the kernels' limit for d_k.
    static constexpr int64_t kMAX_HEAD_DIM{kernels::kLINEAR_RECURRENCE_MAX_DIM_K};

    //! The fixed input positions, with decay / beta read as update_rule says.
    static LinearRecurrenceInputs inputsFor(LinearRecurrenceParameters const& params) noexcept;

    // No getWorkspaceSize of its own: PluginBase asks for none, and the kernels need none.
    RNNX_PLUGIN_HOOKS();
};

using LinearRecurrencePluginCreator = PluginCreator<LinearRecurrencePlugin>;

} // namespace plugin
} // namespace rnnx
