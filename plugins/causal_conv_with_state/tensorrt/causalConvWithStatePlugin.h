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
    static constexpr char const* kPLUGIN_NAME{"CausalConvWithState"};
    static constexpr int32_t kNB_OUTPUTS{2};
    //! The TensorRT node always lists all five inputs.
    static constexpr int32_t kNB_INPUTS{5};
    static constexpr char const* kINPUT_NAMES{
        "input, weight, bias, past_state, mask_pad; bias / past_state zeros when the model has none, mask_pad all "
        "zeros without padding"};
    //! activation's strings: none, silu, swish (silu and swish are the same function).
    static std::vector<char const*> const& activations();

    static bool inputLayout(CausalConvWithStateParameters const& params, int32_t nbInputs,
        CausalConvWithStateInputs& inputs, char const* layer) noexcept;

    using PluginBase::PluginBase;

    // No getWorkspaceSize of its own: PluginBase asks for none, and the kernels need none.

private:
    friend class PluginBase<CausalConvWithStatePlugin, CausalConvWithStateParameters, CausalConvWithStateInputs>;

    //! The field table: the single place CausalConvWithState's fields are listed.
    static std::vector<Field<CausalConvWithStateParameters>> const& fields();
    static bool checkParameters(CausalConvWithStateParameters const& params) noexcept;
    static TensorRole tensorRole(CausalConvWithStateInputs const& layout, int32_t pos) noexcept;
    int32_t outputShapes(nvinfer1::DimsExprs const* inputs, CausalConvWithStateInputs const& layout,
        nvinfer1::DimsExprs* outputs, nvinfer1::IExprBuilder& exprBuilder) noexcept;
    //! Checks the input descriptors' ranks / extents against each other; logs what is wrong.
    bool checkShapes(nvinfer1::PluginTensorDesc const* in, CausalConvWithStateInputs const& layout) const noexcept;
    int32_t launch(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs, void* const* outputs,
        void* workspace, cudaStream_t stream) noexcept;
};

using CausalConvWithStatePluginCreator = PluginCreator<CausalConvWithStatePlugin>;

} // namespace plugin
} // namespace rnnx
