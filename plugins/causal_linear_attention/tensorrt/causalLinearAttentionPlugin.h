/*
 * CausalLinearAttention: causal linear attention with phi(x) = elu(x) + 1 as a TensorRT IPluginV3 plugin.
 *
 * Fields (runtime/contract/ops.py CAUSAL_LINEAR_ATTENTION, in this order): eps, num_heads (H, required),
 * time_major (0 / 1).
 * Inputs: always exactly six, at fixed positions (the TensorRT node layout of docs/ops.md; the exporter emits
 * no empty-name slots for this target), heads packed in the last axis:
 *   0 q, 1 k (B, L, H*E), 2 v (B, L, H*M) in fp32 / fp16 / bf16 -- (L, B, H*.) when time_major;
 *   3 S0 (B, H, E, M) and 4 z0 (B, H, E) in fp32 (zeros when the model gave no state);
 *   5 mask_pad (B, L) -- (L, B) when time_major -- int32, non-zero = pad (all false without padding).
 * E = q's last extent / H, M = v's last extent / H.
 * Outputs: out (d0, d1, H*M) like v in q's type, S_last (B, H, E, M) and z_last (B, H, E) fp32.
 * Outputs never alias inputs: the plugin declares no in-place I/O (no getAliasedInput), so S_last and z_last get
 * their own buffers; the runtime double-buffers state instead. Any input count but six is refused.
 */
#pragma once

#include "common/pluginBase.h"

#include <NvInferRuntime.h>

#include <vector>

namespace rnnx
{
namespace plugin
{

//! CausalLinearAttention's attributes, in field-table order (docs/ops.md, runtime/contract/ops.py).
struct CausalLinearAttentionParameters
{
    float eps{1e-6F};
    //! H; required (the 0 before parsing is refused by checkParameters).
    int32_t numHeads{0};
    //! 1: q, k, v, out (L, B, H*.) and mask_pad (L, B); 0: batch-first.
    int32_t timeMajor{0};
};

//! Positions of the inputs: fixed, every one always present.
struct CausalLinearAttentionInputs
{
    int32_t q{0};
    int32_t k{1};
    int32_t v{2};
    int32_t S0{3};
    int32_t z0{4};
    int32_t maskPad{5};
};

class CausalLinearAttentionPlugin
    : public PluginBase<CausalLinearAttentionPlugin, CausalLinearAttentionParameters, CausalLinearAttentionInputs>
{
public:
    //! The TensorRT node always lists all six inputs (q, k, v, S0, z0, mask_pad); three outputs.
    static constexpr PluginSignature kSIGNATURE{"CausalLinearAttention", 6, 3,
        "q, k, v, S0, z0, mask_pad; S0 / z0 zeros when there is no state, mask_pad all false without padding"};
    //! PluginBase::inputLayout without parameters: the layout does not depend on them.
    static bool inputLayout(
        int32_t nbInputs, CausalLinearAttentionInputs& inputs, char const* layer = nullptr) noexcept;
    using PluginBase::inputLayout;

    // No getWorkspaceSize of its own: PluginBase asks for none. The kernels use workspace only to copy z0 when
    // z_last aliases it, and TensorRT never aliases them here (the plugin declares no in-place I/O).
    RNNX_PLUGIN_HOOKS();
};

using CausalLinearAttentionPluginCreator = PluginCreator<CausalLinearAttentionPlugin>;

} // namespace plugin
} // namespace rnnx
