/*
 * CausalConvWithState: depthwise causal convolution along time with a carried state (ONNX opset 27's
 * CausalConvWithState with rnnx's pad mask and fp32 state) as a TensorRT IPluginV3 plugin (docs/ops.md, "Causal
 * convolution with state").
 *
 * Field (runtime/contract/ops.py CAUSAL_CONV_WITH_STATE): activation (a string, kCHAR: none | silu | swish, default
 * none; silu and swish are both y * sigmoid(y)).
 * Inputs: always exactly five, at fixed positions (the TensorRT node layout of docs/ops.md; the exporter emits no
 * empty-name slots for this target):
 *   0 input (B, C, T), channels first, fp32 / fp16 / bf16;
 *   1 weight (C, 1, K) and 2 bias (C) in input's type (bias zeros when the model has none);
 *   3 past_state (B, C, K-1) fp32, the last K-1 inputs before (zeros when the model has none);
 *   4 mask_pad (B, T) int32, non-zero = pad (all zeros without padding).
 * Outputs: output (B, C, T) in input's type, present_state (B, C, K-1) fp32, in its own buffer (no in-place I/O:
 * IPluginV3OneBuild, no getAliasedInput; the runtime double-buffers state). No workspace.
 */
#pragma once

#include "common/pluginBase.h"

#include <NvInferRuntime.h>

#include <vector>

namespace rnnx
{
namespace plugin
{

//! CausalConvWithState's attribute (docs/ops.md, runtime/contract/ops.py).
struct CausalConvWithStateParameters
{
    //! Index of the activation in CausalConvWithStatePlugin::activations(): 0 none, 1 silu, 2 swish.
    int32_t activation{0};
};

//! Positions of the inputs: fixed, every one always present.
struct CausalConvWithStateInputs
{
    int32_t input{0};
    int32_t weight{1};
    int32_t bias{2};
    int32_t pastState{3};
    int32_t maskPad{4};
};

class CausalConvWithStatePlugin
    : public PluginBase<CausalConvWithStatePlugin, CausalConvWithStateParameters, CausalConvWithStateInputs>
{
public:
    //! The TensorRT node always lists all five inputs; two outputs.
    static constexpr PluginSignature kSIGNATURE{"CausalConvWithState", 5, 2,
        "input, weight, bias, past_state, mask_pad; bias / past_state zeros when the model has none, mask_pad all "
        "zeros without padding"};
    //! activation's strings: none, silu, swish (silu and swish are the same function).
    static std::vector<char const*> const& activations();

    // No getWorkspaceSize of its own: PluginBase asks for none, and the kernels need none.
    RNNX_PLUGIN_HOOKS();
};

using CausalConvWithStatePluginCreator = PluginCreator<CausalConvWithStatePlugin>;

} // namespace plugin
} // namespace rnnx
