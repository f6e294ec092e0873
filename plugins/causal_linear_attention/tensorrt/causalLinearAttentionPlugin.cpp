#include "causalLinearAttentionPlugin.h"

#include "common/exprChecks.h"
#include "causal_linear_attention/cuda/causal_linear_attention.h"
#include "linear_recurrence/cuda/linear_recurrence.h"
#include "common/pluginRegistry.h"

#include <cmath>

namespace rnnx
{
namespace plugin
{
namespace
{

//! Kernel sizes from q (B, L, H*E) and v (B, L, H*M) dims -- (L, B, H*.) when time_major -- and the parameters;
//! false when a rank or extent is off or a last extent is not a multiple of num_heads.
bool attentionSizes(nvinfer1::Dims const& q, nvinfer1::Dims const& v, CausalLinearAttentionParameters const& params,
    kernels::LinearAttentionParams& p)
{
    if (q.nbDims != 3 || v.nbDims != 3 || params.numHeads <= 0)
    {
        return false;
    }
    for (int32_t i = 0; i < 3; ++i)
    {
        if (q.d[i] < 0 || v.d[i] < 0 || q.d[i] > INT32_MAX || v.d[i] > INT32_MAX)
        {
            return false;
        }
    }
    if (q.d[2] % params.numHeads != 0 || v.d[2] % params.numHeads != 0)
    {
        return false;
    }
    bool const timeMajor = params.timeMajor != 0;
    p.batch = static_cast<int>(timeMajor ? q.d[1] : q.d[0]);
    p.heads = params.numHeads;
    p.length = static_cast<int>(timeMajor ? q.d[0] : q.d[1]);
    p.dim_k = static_cast<int>(q.d[2] / params.numHeads);
    p.dim_v = static_cast<int>(v.d[2] / params.numHeads);
    p.eps = params.eps;
    p.time_major = timeMajor;
    return true;
}

} // namespace

std::vector<Field<CausalLinearAttentionParameters>> const& CausalLinearAttentionPlugin::fields()
{
    static std::vector<Field<CausalLinearAttentionParameters>> const table{
        {"eps", &CausalLinearAttentionParameters::eps, 1e-6},
        {"num_heads", &CausalLinearAttentionParameters::numHeads, 0.0, true},
        {"time_major", &CausalLinearAttentionParameters::timeMajor, 0.0},
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
    return isPositive("num_heads", params.numHeads) && isEither("time_major", params.timeMajor, 0, 1);
}

bool CausalLinearAttentionPlugin::inputLayout(
    int32_t nbInputs, CausalLinearAttentionInputs& inputs, char const* layer) noexcept
{
    return inputLayout(CausalLinearAttentionParameters{}, nbInputs, inputs, layer);
}

TensorRole CausalLinearAttentionPlugin::tensorRole(CausalLinearAttentionInputs const& layout, int32_t pos) noexcept
{
    // q, k, v and out are activations; mask_pad the mask; S0, z0, S_last and z_last state.
    if (pos == layout.maskPad)
    {
        return TensorRole::kMASK;
    }
    bool const activation = pos == layout.q || pos == layout.k || pos == layout.v || pos == kSIGNATURE.nbInputs;
    return activation ? TensorRole::kACTIVATION : TensorRole::kSTATE;
}

int32_t CausalLinearAttentionPlugin::outputShapes(nvinfer1::DimsExprs const* inputs,
    CausalLinearAttentionInputs const& layout, nvinfer1::DimsExprs* outputs, nvinfer1::IExprBuilder& /*exprBuilder*/)
{
    nvinfer1::DimsExprs const& q = inputs[layout.q];
    nvinfer1::DimsExprs const& k = inputs[layout.k];
    nvinfer1::DimsExprs const& v = inputs[layout.v];
    nvinfer1::DimsExprs const& S0 = inputs[layout.S0];
    nvinfer1::DimsExprs const& z0 = inputs[layout.z0];
    nvinfer1::DimsExprs const& mask = inputs[layout.maskPad];
    if (q.nbDims != 3 || k.nbDims != 3 || v.nbDims != 3 || S0.nbDims != 4 || z0.nbDims != 3 || mask.nbDims != 2)
    {
        logLayerError("q, k, v must be 3-D (heads packed), S0 4-D, z0 3-D, mask_pad 2-D");
        return -1;
    }
    // Extents known at build time (constants) must agree; symbolic ones are checked on the concrete shapes by
    // onShapeChange (checkShapes). q, k (d0, d1, H*E), v (d0, d1, H*M), mask_pad (d0, d1), S0 (B, H, E, M),
    // z0 (B, H, E), with B = d1 when time_major, else d0.
    int64_t const H = mParams.numHeads;
    nvinfer1::IDimensionExpr const* batch = mParams.timeMajor != 0 ? q.d[1] : q.d[0];
    bool ok = dimMayBeMultipleOf(q.d[2], H) && dimMayBeMultipleOf(v.d[2], H);
    for (int32_t i = 0; i < 3; ++i)
    {
        ok = ok && dimsMayMatch(k.d[i], q.d[i]) && (i == 2 || dimsMayMatch(v.d[i], q.d[i]));
    }
    ok = ok && dimsMayMatch(mask.d[0], q.d[0]) && dimsMayMatch(mask.d[1], q.d[1]);
    ok = ok && dimsMayMatch(S0.d[0], batch) && dimMayBe(S0.d[1], H) && dimTimesMayMatch(S0.d[2], H, q.d[2])
        && dimTimesMayMatch(S0.d[3], H, v.d[2]);
    ok = ok && dimsMayMatch(z0.d[0], batch) && dimMayBe(z0.d[1], H) && dimTimesMayMatch(z0.d[2], H, q.d[2])
        && dimsMayMatch(z0.d[2], S0.d[2]) && dimsMayMatch(z0.d[0], S0.d[0]);
    if (!ok)
    {
        std::string const axes = mParams.timeMajor != 0 ? "(L, B, " : "(B, L, ";
        logLayerError("input extents known at build time do not match num_heads " + std::to_string(H) + ", time_major "
            + std::to_string(mParams.timeMajor) + ": expected q, k " + axes + "H*E), v " + axes
            + "H*M) with H*E and H*M multiples of " + std::to_string(H) + ", mask_pad q's two leading extents, S0 (B, "
            + std::to_string(H) + ", E, M), z0 (B, " + std::to_string(H) + ", E)");
        return -1;
    }
    if (q.d[2]->isConstant() && q.d[2]->getConstantValue() / H > kernels::kLINEAR_RECURRENCE_MAX_DIM_K)
    {
        logLayerError("q's head dim E = " + std::to_string(q.d[2]->getConstantValue() / H) + " exceeds "
            + std::to_string(kernels::kLINEAR_RECURRENCE_MAX_DIM_K) + ", the largest the kernels take");
        return -1;
    }
    // out is (d0, d1, H*M), v's shape; the state outputs take the state inputs' shapes (S_last continues S0,
    // z_last continues z0).
    outputs[0] = v;
    outputs[1] = S0;
    outputs[2] = z0;
    return 0;
}

bool CausalLinearAttentionPlugin::checkShapes(
    nvinfer1::PluginTensorDesc const* in, CausalLinearAttentionInputs const& layout) const
{
    nvinfer1::Dims const& q = in[layout.q].dims;
    nvinfer1::Dims const& k = in[layout.k].dims;
    nvinfer1::Dims const& v = in[layout.v].dims;
    nvinfer1::Dims const& mask = in[layout.maskPad].dims;
    kernels::LinearAttentionParams p{};
    bool ok = k.nbDims == 3 && attentionSizes(q, v, mParams, p);
    for (int32_t i = 0; ok && i < 3; ++i)
    {
        ok = k.d[i] == q.d[i] && (i == 2 || v.d[i] == q.d[i]);
    }
    if (ok)
    {
        nvinfer1::Dims const& S = in[layout.S0].dims;
        ok = S.nbDims == 4 && S.d[0] == p.batch && S.d[1] == p.heads && S.d[2] == p.dim_k && S.d[3] == p.dim_v;
    }
    if (ok)
    {
        nvinfer1::Dims const& z = in[layout.z0].dims;
        ok = z.nbDims == 3 && z.d[0] == p.batch && z.d[1] == p.heads && z.d[2] == p.dim_k;
    }
    // mask_pad has q's two leading axes: (B, L), or (L, B) when time_major.
    ok = ok && mask.nbDims == 2 && mask.d[0] == q.d[0] && mask.d[1] == q.d[1];
    if (ok && p.dim_k > kernels::kLINEAR_RECURRENCE_MAX_DIM_K)
    {
        logLayerError("q " + toString(q) + ": head dim E = " + std::to_string(p.dim_k) + " exceeds "
            + std::to_string(kernels::kLINEAR_RECURRENCE_MAX_DIM_K)
            + ", the largest the kernels take (the linear recurrence's, linear_recurrence/cuda/linear_recurrence.h)");
        return false;
    }
    if (!ok)
    {
        logLayerError("inconsistent shapes for num_heads " + std::to_string(mParams.numHeads) + ", time_major "
            + std::to_string(mParams.timeMajor) + " (q " + toString(q) + ", k " + toString(k) + ", v " + toString(v)
            + ", S0 " + toString(in[layout.S0].dims) + ", z0 " + toString(in[layout.z0].dims) + ", mask_pad "
            + toString(mask) + ")");
    }
    return ok;
}

int32_t CausalLinearAttentionPlugin::launch(LaunchArgs const& args) noexcept
{
    auto params = args.kernelParams<kernels::LinearAttentionParams>();
    if (!attentionSizes(args.inputDesc[mLayout.q].dims, args.inputDesc[mLayout.v].dims, mParams, params))
    {
        return notConfigured();
    }
    // Every input is bound: the state (zeros when the model gave none) and the mask (all false without padding;
    // int32 from TensorRT, read as such). No workspace: the kernels need one only to copy z0 when z_last aliases
    // z0, and TensorRT gives z_last its own buffer (the plugin declares no in-place I/O), so the plugin asks for
    // none (PluginBase::getWorkspaceSize) and passes nullptr (the kernel refuses an aliased z0 without workspace).
    void const* const* in = args.inputs;
    return launched(kernels::causalLinearAttentionForward(params, args.type, in[mLayout.q], in[mLayout.k],
        in[mLayout.v], args.stateInput(mLayout.S0), args.stateInput(mLayout.z0), in[mLayout.maskPad], args.outputs[0],
        args.stateOutput(1), args.stateOutput(2), nullptr, args.stream));
}

RNNX_REGISTER_PLUGIN_CREATOR(CausalLinearAttentionPluginCreator);

} // namespace plugin
} // namespace rnnx
