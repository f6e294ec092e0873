#include "causalConvWithStatePlugin.h"

#include "common/exprChecks.h"
#include "causal_conv_with_state/cuda/causal_conv_with_state.h"
#include "common/pluginRegistry.h"

#include <string>

namespace rnnx
{
namespace plugin
{
namespace
{

//! "(2, ?, 64)": the constant extents of `e`, "?" for the symbolic ones.
std::string text(nvinfer1::DimsExprs const& e)
{
    std::string s = "(";
    for (int32_t i = 0; i < e.nbDims && i < nvinfer1::Dims::MAX_DIMS; ++i)
    {
        s += (i > 0 ? ", " : "") + (isConstantDim(e.d[i]) ? std::to_string(e.d[i]->getConstantValue()) : "?");
    }
    return s + ")";
}

//! "<tensor> (input <pos>) is <got>, expected <expected>".
std::string wrongInput(char const* tensor, int32_t pos, std::string const& got, char const* expected)
{
    return std::string(tensor) + " (input " + std::to_string(pos) + ") is " + got + ", expected " + expected;
}

char const* const kEXPECTED_INPUT{"(B, C, T)"};
char const* const kEXPECTED_WEIGHT{"(C, 1, K) with input's C and K >= 1"};
char const* const kEXPECTED_BIAS{"(C) with input's C"};
char const* const kEXPECTED_STATE{"(B, C, K-1) with input's B, C and weight's K"};
char const* const kEXPECTED_MASK{"(B, T) with input's B, T"};

} // namespace

std::vector<char const*> const& CausalConvWithStatePlugin::activations()
{
    static std::vector<char const*> const names{"none", "silu", "swish"};
    return names;
}

std::vector<Field<CausalConvWithStateParameters>> const& CausalConvWithStatePlugin::fields()
{
    static std::vector<Field<CausalConvWithStateParameters>> const table{
        {"activation", &CausalConvWithStateParameters::activation, activations(), 0},
    };
    return table;
}

bool CausalConvWithStatePlugin::checkParameters(CausalConvWithStateParameters const& p) noexcept
{
    if (p.activation < 0 || static_cast<size_t>(p.activation) >= activations().size())
    {
        logPluginError("activation index " + std::to_string(p.activation) + " is out of range");
        return false;
    }
    return true;
}

bool CausalConvWithStatePlugin::inputLayout(CausalConvWithStateParameters const& /*params*/, int32_t nbInputs,
    CausalConvWithStateInputs& inputs, char const* layer) noexcept
{
    if (!hasInputCount(nbInputs, layer))
    {
        return false;
    }
    inputs = CausalConvWithStateInputs{};
    return true;
}

TensorRole CausalConvWithStatePlugin::tensorRole(CausalConvWithStateInputs const& layout, int32_t pos) noexcept
{
    // input, weight, bias and output are activations; past_state and present_state state; mask_pad the mask.
    if (pos == layout.pastState || pos == kNB_INPUTS + 1)
    {
        return TensorRole::kSTATE;
    }
    return pos == layout.maskPad ? TensorRole::kMASK : TensorRole::kACTIVATION;
}

int32_t CausalConvWithStatePlugin::outputShapes(nvinfer1::DimsExprs const* inputs,
    CausalConvWithStateInputs const& layout, nvinfer1::DimsExprs* outputs,
    nvinfer1::IExprBuilder& /*exprBuilder*/) noexcept
{
    try
    {
        nvinfer1::DimsExprs const& x = inputs[layout.input];
        nvinfer1::DimsExprs const& w = inputs[layout.weight];
        nvinfer1::DimsExprs const& bias = inputs[layout.bias];
        nvinfer1::DimsExprs const& S = inputs[layout.pastState];
        nvinfer1::DimsExprs const& mask = inputs[layout.maskPad];
        // Extents known at build time (constants) must agree; symbolic ones are checked on the concrete shapes by
        // onShapeChange (checkShapes).
        std::string error;
        if (x.nbDims != 3)
        {
            error = wrongInput("input", layout.input, text(x), kEXPECTED_INPUT);
        }
        else if (w.nbDims != 3 || !dimsMayMatch(w.d[0], x.d[1]) || !dimMayBe(w.d[1], 1)
            || !dimMayBeMultipleOf(w.d[2], 1))
        {
            error = wrongInput("weight", layout.weight, text(w), kEXPECTED_WEIGHT);
        }
        else if (bias.nbDims != 1 || !dimsMayMatch(bias.d[0], x.d[1]))
        {
            error = wrongInput("bias", layout.bias, text(bias), kEXPECTED_BIAS);
        }
        else if (S.nbDims != 3 || !dimsMayMatch(S.d[0], x.d[0]) || !dimsMayMatch(S.d[1], x.d[1])
            || (isConstantDim(S.d[2]) && isConstantDim(w.d[2])
                && S.d[2]->getConstantValue() + 1 != w.d[2]->getConstantValue()))
        {
            error = wrongInput("past_state", layout.pastState, text(S), kEXPECTED_STATE);
        }
        else if (mask.nbDims != 2 || !dimsMayMatch(mask.d[0], x.d[0]) || !dimsMayMatch(mask.d[1], x.d[2]))
        {
            error = wrongInput("mask_pad", layout.maskPad, text(mask), kEXPECTED_MASK);
        }
        if (!error.empty())
        {
            logLayerError(error + " (extents known at build time)");
            return -1;
        }
        // output is input's shape; present_state continues past_state: its shape.
        outputs[0] = x;
        outputs[1] = S;
        return 0;
    }
    catch (...)
    {
        logLayerError("getOutputShapes failed");
        return -1;
    }
}

bool CausalConvWithStatePlugin::checkShapes(
    nvinfer1::PluginTensorDesc const* in, CausalConvWithStateInputs const& layout) const noexcept
{
    try
    {
        nvinfer1::Dims const& x = in[layout.input].dims;
        nvinfer1::Dims const& w = in[layout.weight].dims;
        nvinfer1::Dims const& bias = in[layout.bias].dims;
        nvinfer1::Dims const& S = in[layout.pastState].dims;
        nvinfer1::Dims const& mask = in[layout.maskPad].dims;
        std::string error;
        bool const xOk = x.nbDims == 3 && x.d[0] >= 0 && x.d[1] >= 0 && x.d[2] >= 0 && x.d[0] <= INT32_MAX
            && x.d[1] <= INT32_MAX && x.d[2] <= INT32_MAX;
        if (!xOk)
        {
            error = wrongInput("input", layout.input, toString(x), kEXPECTED_INPUT);
        }
        else if (w.nbDims != 3 || w.d[0] != x.d[1] || w.d[1] != 1 || w.d[2] < 1 || w.d[2] > INT32_MAX)
        {
            error = wrongInput("weight", layout.weight, toString(w), kEXPECTED_WEIGHT);
        }
        else if (bias.nbDims != 1 || bias.d[0] != x.d[1])
        {
            error = wrongInput("bias", layout.bias, toString(bias), kEXPECTED_BIAS);
        }
        else if (S.nbDims != 3 || S.d[0] != x.d[0] || S.d[1] != x.d[1] || S.d[2] + 1 != w.d[2])
        {
            error = wrongInput("past_state", layout.pastState, toString(S), kEXPECTED_STATE);
        }
        else if (mask.nbDims != 2 || mask.d[0] != x.d[0] || mask.d[1] != x.d[2])
        {
            error = wrongInput("mask_pad", layout.maskPad, toString(mask), kEXPECTED_MASK);
        }
        if (!error.empty())
        {
            logLayerError(error);
            return false;
        }
        return true;
    }
    catch (...)
    {
        logLayerError("onShapeChange failed");
        return false;
    }
}

int32_t CausalConvWithStatePlugin::launch(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs,
    void* const* outputs, void* /*workspace*/, cudaStream_t stream) noexcept
{
    if (!checkShapes(inputDesc, mLayout))
    {
        return notConfigured();
    }
    kernels::DataType type{};
    if (!toKernelType(inputDesc[mLayout.input].type, type))
    {
        logLayerError("unsupported activation type");
        return -1;
    }
    kernels::CausalConvParams params{};
    if (!toKernelMaskType(inputDesc[mLayout.maskPad].type, params.mask_type))
    {
        logLayerError("mask_pad (input 4) must be int32, got DataType "
            + std::to_string(static_cast<int32_t>(inputDesc[mLayout.maskPad].type)));
        return -1;
    }
    nvinfer1::Dims const& x = inputDesc[mLayout.input].dims;
    params.batch = static_cast<int>(x.d[0]);
    params.channels = static_cast<int>(x.d[1]);
    params.length = static_cast<int>(x.d[2]);
    params.kernel_size = static_cast<int>(inputDesc[mLayout.weight].dims.d[2]);
    params.silu = mParams.activation != 0; // silu and swish: y * sigmoid(y)
    // Every input is bound: bias and state zeros when the model has none, the mask all zeros without padding.
    return launched(kernels::causalConvWithStateForward(params, type, inputs[mLayout.input], inputs[mLayout.weight],
        inputs[mLayout.bias], static_cast<float const*>(inputs[mLayout.pastState]), inputs[mLayout.maskPad], outputs[0],
        static_cast<float*>(outputs[1]), stream));
}

RNNX_REGISTER_PLUGIN_CREATOR(CausalConvWithStatePluginCreator);

} // namespace plugin
} // namespace rnnx
