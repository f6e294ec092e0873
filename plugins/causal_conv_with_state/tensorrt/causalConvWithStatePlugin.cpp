#include "causalConvWithStatePlugin.h"

#include "common/exprChecks.h"
#include "causal_conv_with_state/cuda/causal_conv_with_state.h"
#include "common/pluginRegistry.h"

#include <string>

namespace rnnx
{
namespace plugin
{

static_assert(
    CausalConvWithStatePlugin::kSIGNATURE.nbInputs <= InputExtents::kMAX_INPUTS, "InputExtents holds every input");
namespace
{

char const* const kEXPECTED_INPUT{"(B, C, T)"};
char const* const kEXPECTED_WEIGHT{"(C, 1, K) with input's C and K >= 1"};
char const* const kEXPECTED_BIAS{"(C) with input's C"};
char const* const kEXPECTED_STATE{"(B, C, K-1) with input's B, C and weight's K"};
char const* const kEXPECTED_MASK{"(B, T) with input's B, T"};

//! Checks the five inputs' extents (Extents in input order) against each other: only the known ones, at build
//! time; at run time (`runTime`) also that input's extents and K fit the kernels' int. False with `error` naming
//! the first wrong tensor, what it is and what was expected.
bool checkExtents(Extents const* in, CausalConvWithStateInputs const& layout, bool runTime, std::string& error)
{
    Extents const& x = in[layout.input];
    Extents const& w = in[layout.weight];
    Extents const& bias = in[layout.bias];
    Extents const& S = in[layout.pastState];
    Extents const& mask = in[layout.maskPad];
    auto const fitsInt = [runTime](Extents const& e, int32_t i)
    { return !runTime || (e.value(i) >= 0 && e.value(i) <= INT32_MAX); };
    if (x.rank() != 3 || !fitsInt(x, 0) || !fitsInt(x, 1) || !fitsInt(x, 2))
    {
        return wrongInput(error, "input", layout.input, x, kEXPECTED_INPUT);
    }
    if (w.rank() != 3 || !w.mayMatch(0, x, 1) || !w.mayBe(1, 1) || !w.mayBeMultipleOf(2, 1) || !fitsInt(w, 2))
    {
        return wrongInput(error, "weight", layout.weight, w, kEXPECTED_WEIGHT);
    }
    if (bias.rank() != 1 || !bias.mayMatch(0, x, 1))
    {
        return wrongInput(error, "bias", layout.bias, bias, kEXPECTED_BIAS);
    }
    if (S.rank() != 3 || !S.mayMatch(0, x, 0) || !S.mayMatch(1, x, 1)
        || (S.known(2) && w.known(2) && S.value(2) + 1 != w.value(2)))
    {
        return wrongInput(error, "past_state", layout.pastState, S, kEXPECTED_STATE);
    }
    if (mask.rank() != 2 || !mask.mayMatch(0, x, 0) || !mask.mayMatch(1, x, 2))
    {
        return wrongInput(error, "mask_pad", layout.maskPad, mask, kEXPECTED_MASK);
    }
    return true;
}

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

bool CausalConvWithStatePlugin::checkParameters(CausalConvWithStateParameters const& /*params*/) noexcept
{
    // activation, the one field, is a string field: PluginBase refuses an index outside its choices.
    return true;
}

TensorRole CausalConvWithStatePlugin::tensorRole(CausalConvWithStateInputs const& layout, int32_t pos) noexcept
{
    // input, weight, bias and output are activations; past_state and present_state state; mask_pad the mask.
    return stateOrMaskRole(pos, layout.pastState, layout.maskPad);
}

int32_t CausalConvWithStatePlugin::outputShapes(nvinfer1::DimsExprs const* inputs,
    CausalConvWithStateInputs const& layout, nvinfer1::DimsExprs* outputs, nvinfer1::IExprBuilder& /*exprBuilder*/)
{
    // Extents known at build time (constants) must agree; symbolic ones are checked on the concrete shapes by
    // onShapeChange (checkShapes, the same checks).
    std::string error;
    if (!checkExtents(InputExtents(inputs, kSIGNATURE.nbInputs).data(), layout, false, error))
    {
        logLayerError(error + " (extents known at build time)");
        return -1;
    }
    // output is input's shape; present_state continues past_state: its shape.
    outputs[0] = inputs[layout.input];
    outputs[1] = inputs[layout.pastState];
    return 0;
}

bool CausalConvWithStatePlugin::checkShapes(
    nvinfer1::PluginTensorDesc const* in, CausalConvWithStateInputs const& layout) const
{
    std::string error;
    if (!checkExtents(InputExtents(in, kSIGNATURE.nbInputs).data(), layout, true, error))
    {
        logLayerError(error);
        return false;
    }
    return true;
}

int32_t CausalConvWithStatePlugin::launch(LaunchArgs const& args) noexcept
{
    auto params = args.kernelParams<kernels::CausalConvParams>();
    params.batch = args.extent(mLayout.input, 0);
    params.channels = args.extent(mLayout.input, 1);
    params.length = args.extent(mLayout.input, 2);
    params.kernel_size = args.extent(mLayout.weight, 2);
    params.silu = mParams.activation != 0; // silu and swish: y * sigmoid(y)
    // Every input is bound: bias and state zeros when the model has none, the mask all zeros without padding.
    void const* const* in = args.inputs;
    return launched(kernels::causalConvWithStateForward(params, args.type, in[mLayout.input], in[mLayout.weight],
        in[mLayout.bias], args.stateInput(mLayout.pastState), in[mLayout.maskPad], args.outputs[0], args.stateOutput(1),
        args.stream));
}

RNNX_REGISTER_PLUGIN_CREATOR(CausalConvWithStatePluginCreator);

} // namespace plugin
} // namespace rnnx
