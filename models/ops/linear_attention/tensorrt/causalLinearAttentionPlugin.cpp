#include "causalLinearAttentionPlugin.h"

#include "rnnx/kernels.h"

#include <cmath>

namespace rnnx
{
namespace plugin
{
namespace
{

//! Kernel sizes from q (B, H, L, E) and v (B, H, L, M) dims; false when a rank or extent is off.
bool attentionSizes(nvinfer1::Dims const& q, nvinfer1::Dims const& v, float eps, kernels::LinearAttentionParams& p)
{
    if (q.nbDims != 4 || v.nbDims != 4)
    {
        return false;
    }
    for (int32_t i = 0; i < 4; ++i)
    {
        if (q.d[i] < 0 || v.d[i] < 0 || q.d[i] > INT32_MAX || v.d[i] > INT32_MAX)
        {
            return false;
        }
    }
    p.batch = static_cast<int>(q.d[0]);
    p.heads = static_cast<int>(q.d[1]);
    p.length = static_cast<int>(q.d[2]);
    p.dim_k = static_cast<int>(q.d[3]);
    p.dim_v = static_cast<int>(v.d[3]);
    p.eps = eps;
    return true;
}

} // namespace

std::vector<Field<CausalLinearAttentionParameters>> const& CausalLinearAttentionPlugin::fields()
{
    static std::vector<Field<CausalLinearAttentionParameters>> const table{
        {"eps", &CausalLinearAttentionParameters::eps, 1e-6},
    };
    return table;
}

bool CausalLinearAttentionPlugin::checkParameters(CausalLinearAttentionParameters const& params) noexcept
{
    if (!(params.eps >= 0.F) || !std::isfinite(params.eps))
    {
        logPluginError("eps must be finite and >= 0");
        return false;
    }
    return true;
}

bool CausalLinearAttentionPlugin::inputLayout(
    int32_t nbInputs, CausalLinearAttentionInputs& inputs, char const* layer) noexcept
{
    if (!hasInputCount(nbInputs, layer))
    {
        return false;
    }
    inputs = CausalLinearAttentionInputs{};
    return true;
}

bool CausalLinearAttentionPlugin::inputLayout(CausalLinearAttentionParameters const& /*params*/, int32_t nbInputs,
    CausalLinearAttentionInputs& inputs, char const* layer) noexcept
{
    return inputLayout(nbInputs, inputs, layer);
}

TensorRole CausalLinearAttentionPlugin::tensorRole(CausalLinearAttentionInputs const& layout, int32_t pos) noexcept
{
    // q, k, v and out are activations; S0, z0, S_last and z_last state.
    bool const activation = pos == layout.q || pos == layout.k || pos == layout.v || pos == kNB_INPUTS;
    return activation ? TensorRole::kACTIVATION : TensorRole::kSTATE;
}

int32_t CausalLinearAttentionPlugin::outputShapes(nvinfer1::DimsExprs const* inputs,
    CausalLinearAttentionInputs const& layout, nvinfer1::DimsExprs* outputs,
    nvinfer1::IExprBuilder& /*exprBuilder*/) noexcept
{
    nvinfer1::DimsExprs const& q = inputs[layout.q];
    nvinfer1::DimsExprs const& v = inputs[layout.v];
    if (q.nbDims != 4 || inputs[layout.k].nbDims != 4 || v.nbDims != 4 || inputs[layout.S0].nbDims != 4
        || inputs[layout.z0].nbDims != 3)
    {
        logLayerError("q, k, v must be 4-D, S0 4-D, z0 3-D");
        return -1;
    }
    // The state outputs take the state inputs' shapes (S_last continues S0, z_last continues z0).
    outputs[0] = v;
    outputs[1] = inputs[layout.S0];
    outputs[2] = inputs[layout.z0];
    return 0;
}

size_t CausalLinearAttentionPlugin::getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
    nvinfer1::DynamicPluginTensorDesc const* /*outputs*/, int32_t /*nbOutputs*/) const noexcept
{
    kernels::DataType type{};
    kernels::LinearAttentionParams params{};
    CausalLinearAttentionInputs const layout;
    if (inputs == nullptr || nbInputs != kNB_INPUTS || !toKernelType(inputs[layout.q].desc.type, type)
        || !attentionSizes(inputs[layout.q].max, inputs[layout.v].max, mParams.eps, params))
    {
        return 0;
    }
    return kernels::causalLinearAttentionWorkspaceSize(params, type);
}

bool CausalLinearAttentionPlugin::checkShapes(
    nvinfer1::PluginTensorDesc const* in, CausalLinearAttentionInputs const& layout) const noexcept
{
    nvinfer1::Dims const& q = in[layout.q].dims;
    nvinfer1::Dims const& k = in[layout.k].dims;
    nvinfer1::Dims const& v = in[layout.v].dims;
    bool ok = q.nbDims == 4 && k.nbDims == 4 && v.nbDims == 4;
    for (int32_t i = 0; ok && i < 4; ++i)
    {
        ok = k.d[i] == q.d[i] && (i == 3 || v.d[i] == q.d[i]);
    }
    if (ok)
    {
        nvinfer1::Dims const& S = in[layout.S0].dims;
        ok = S.nbDims == 4 && S.d[0] == q.d[0] && S.d[1] == q.d[1] && S.d[2] == q.d[3] && S.d[3] == v.d[3];
    }
    if (ok)
    {
        nvinfer1::Dims const& z = in[layout.z0].dims;
        ok = z.nbDims == 3 && z.d[0] == q.d[0] && z.d[1] == q.d[1] && z.d[2] == q.d[3];
    }
    if (!ok)
    {
        logLayerError("inconsistent shapes (q " + toString(q) + ", k " + toString(k) + ", v " + toString(v) + ")");
    }
    return ok;
}

int32_t CausalLinearAttentionPlugin::launch(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs,
    void* const* outputs, void* workspace, cudaStream_t stream) noexcept
{
    kernels::DataType type{};
    kernels::LinearAttentionParams params{};
    if (!toKernelType(inputDesc[mLayout.q].type, type)
        || !attentionSizes(inputDesc[mLayout.q].dims, inputDesc[mLayout.v].dims, mParams.eps, params))
    {
        return notConfigured();
    }
    // The state inputs are always bound (zeros when the model gave none).
    return launched(kernels::causalLinearAttentionForward(params, type, inputs[mLayout.q], inputs[mLayout.k],
        inputs[mLayout.v], static_cast<float const*>(inputs[mLayout.S0]), static_cast<float const*>(inputs[mLayout.z0]),
        outputs[0], static_cast<float*>(outputs[1]), static_cast<float*>(outputs[2]), workspace, stream));
}

} // namespace plugin
} // namespace rnnx
