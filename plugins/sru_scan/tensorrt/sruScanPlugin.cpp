#include "sruScanPlugin.h"

#include "common/exprChecks.h"
#include "sru_scan/cuda/sru_scan.h"
#include "common/pluginRegistry.h"

namespace rnnx
{
namespace plugin
{
namespace
{

bool needsX(SruScanParameters const& p) noexcept
{
    return p.numMatrices == 3 && p.hasSkipTerm != 0;
}

} // namespace

std::vector<Field<SruScanParameters>> const& SruScanPlugin::fields()
{
    static std::vector<Field<SruScanParameters>> const table{
        {"hidden_size", &SruScanParameters::hiddenSize, 0.0, true},
        {"num_directions", &SruScanParameters::numDirections, 1.0},
        {"num_matrices", &SruScanParameters::numMatrices, 3.0},
        {"has_skip_term", &SruScanParameters::hasSkipTerm, 1.0},
        {"use_tanh", &SruScanParameters::useTanh, 0.0},
        {"scale_x", &SruScanParameters::scaleX, 1.0},
    };
    return table;
}

bool SruScanPlugin::checkParameters(SruScanParameters const& p) noexcept
{
    if (!isPositive("hidden_size", p.hiddenSize) || !isEither("num_directions", p.numDirections, 1, 2)
        || !isEither("num_matrices", p.numMatrices, 3, 4))
    {
        return false;
    }
    if ((p.hasSkipTerm != 0 && p.hasSkipTerm != 1) || (p.useTanh != 0 && p.useTanh != 1))
    {
        logPluginError("has_skip_term and use_tanh must be 0 or 1");
        return false;
    }
    if (static_cast<int64_t>(p.hiddenSize) * p.numDirections * p.numMatrices > INT32_MAX)
    {
        logPluginError("hidden_size * num_directions * num_matrices overflows int32");
        return false;
    }
    return true;
}

SruScanInputs SruScanPlugin::inputsFor(SruScanParameters const& params) noexcept
{
    SruScanInputs in;
    in.readsX = needsX(params);
    return in;
}

TensorRole SruScanPlugin::tensorRole(SruScanInputs const& layout, int32_t pos) noexcept
{
    // U, x (read or dummy, any shape), weight_c, bias and h are activations; c0 and c_last state.
    return stateOrMaskRole(pos, layout.c0, layout.maskPad);
}

int32_t SruScanPlugin::outputShapes(nvinfer1::DimsExprs const* inputs, SruScanInputs const& layout,
    nvinfer1::DimsExprs* outputs, nvinfer1::IExprBuilder& exprBuilder)
{
    nvinfer1::DimsExprs const& U = inputs[layout.U];
    nvinfer1::DimsExprs const& c0 = inputs[layout.c0];
    if (U.nbDims != 3 || c0.nbDims != 2)
    {
        logLayerError("U must be (L, B, D*d*k) and c0 (B, D*d)");
        return -1;
    }
    // Extents known at build time (constants) must fit the fields and each other; symbolic ones are checked on
    // the concrete shapes by onShapeChange (checkShapes).
    int64_t const widthValue = static_cast<int64_t>(mParams.numDirections) * mParams.hiddenSize;
    int64_t const weightVolume = constantVolume(inputs[layout.weightC]);
    int64_t const biasVolume = constantVolume(inputs[layout.bias]);
    nvinfer1::DimsExprs const& mask = inputs[layout.maskPad];
    bool ok = dimMayBe(U.d[2], widthValue * mParams.numMatrices) && dimMayBe(c0.d[1], widthValue)
        && dimsMayMatch(c0.d[0], U.d[1]) && (weightVolume < 0 || weightVolume == 2 * widthValue)
        && (biasVolume < 0 || biasVolume == 2 * widthValue);
    // mask_pad holds L*B elements ((L, B) as the exporter writes it).
    int64_t const maskVolume = constantVolume(mask);
    if (ok && mask.nbDims == 2)
    {
        ok = dimsMayMatch(mask.d[0], U.d[0]) && dimsMayMatch(mask.d[1], U.d[1]);
    }
    else if (ok && maskVolume >= 0 && isConstantDim(U.d[0]) && isConstantDim(U.d[1]))
    {
        ok = maskVolume == U.d[0]->getConstantValue() * U.d[1]->getConstantValue();
    }
    // x (position 1): (L, B, D*d) when read; otherwise a dummy of any shape, not looked at.
    if (ok && layout.readsX)
    {
        nvinfer1::DimsExprs const& x = inputs[layout.x];
        ok = x.nbDims == 3 && dimsMayMatch(x.d[0], U.d[0]) && dimsMayMatch(x.d[1], U.d[1])
            && dimMayBe(x.d[2], widthValue);
    }
    if (!ok)
    {
        logLayerError("input extents known at build time do not match hidden_size " + std::to_string(mParams.hiddenSize)
            + ", num_directions " + std::to_string(mParams.numDirections) + ", num_matrices "
            + std::to_string(mParams.numMatrices) + ": expected U (L, B, "
            + std::to_string(widthValue * mParams.numMatrices) + "), x (L, B, " + std::to_string(widthValue)
            + ") when read, weight_c / bias " + std::to_string(2 * widthValue) + " elements, c0 (B, "
            + std::to_string(widthValue) + "), mask_pad (L, B)");
        return -1;
    }
    auto const* width = exprBuilder.constant(widthValue);
    outputs[0].nbDims = 3;
    outputs[0].d[0] = U.d[0];
    outputs[0].d[1] = U.d[1];
    outputs[0].d[2] = width;
    outputs[1] = c0;
    return 0;
}

bool SruScanPlugin::checkShapes(nvinfer1::PluginTensorDesc const* in, SruScanInputs const& layout) const
{
    nvinfer1::Dims const& U = in[layout.U].dims;
    int64_t const width = static_cast<int64_t>(mParams.numDirections) * mParams.hiddenSize;
    bool ok = U.nbDims == 3 && U.d[2] == width * mParams.numMatrices;
    ok = ok && in[layout.c0].dims.nbDims == 2 && in[layout.c0].dims.d[0] == U.d[1] && in[layout.c0].dims.d[1] == width;
    ok = ok && volume(in[layout.weightC].dims) == 2 * width && volume(in[layout.bias].dims) == 2 * width;
    if (ok && layout.readsX)
    {
        nvinfer1::Dims const& x = in[layout.x].dims;
        ok = x.nbDims == 3 && x.d[0] == U.d[0] && x.d[1] == U.d[1] && x.d[2] == width;
    }
    // Otherwise x is a dummy of any shape: not checked, never read.
    ok = ok && volume(in[layout.maskPad].dims) == U.d[0] * U.d[1];
    if (!ok)
    {
        logLayerError("input shapes do not match hidden_size " + std::to_string(mParams.hiddenSize)
            + ", num_directions " + std::to_string(mParams.numDirections) + ", num_matrices "
            + std::to_string(mParams.numMatrices) + " (U " + toString(U) + ", c0 " + toString(in[layout.c0].dims)
            + ")");
    }
    return ok;
}

int32_t SruScanPlugin::launch(LaunchArgs const& args) noexcept
{
    auto params = args.kernelParams<kernels::SruScanParams>();
    params.length = args.extent(mLayout.U, 0);
    params.batch = args.extent(mLayout.U, 1);
    params.hidden_size = mParams.hiddenSize;
    params.num_directions = mParams.numDirections;
    params.num_matrices = mParams.numMatrices;
    params.has_skip_term = mParams.hasSkipTerm != 0;
    params.use_tanh = mParams.useTanh != 0;
    params.scale_x = mParams.scaleX;
    // x only when the attributes read it (else its binding is a dummy); the mask always.
    void const* const* in = args.inputs;
    return launched(kernels::sruScanForward(params, args.type, in[mLayout.U], mLayout.readsX ? in[mLayout.x] : nullptr,
        in[mLayout.weightC], in[mLayout.bias], args.stateInput(mLayout.c0), in[mLayout.maskPad], args.outputs[0],
        args.stateOutput(1), args.stream));
}

RNNX_REGISTER_PLUGIN_CREATOR(SruScanPluginCreator);

} // namespace plugin
} // namespace rnnx
