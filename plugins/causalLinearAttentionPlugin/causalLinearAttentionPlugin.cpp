#include "causalLinearAttentionPlugin.h"

#include "rnnx/kernels.h"

#include <cmath>

namespace rnnx
{
namespace plugin
{
namespace
{

//! Field-table rows.
enum AttentionField : size_t
{
    kEPS = 0,
};

bool toKernelType(nvinfer1::DataType type, kernels::DataType& out) noexcept
{
    switch (type)
    {
    case nvinfer1::DataType::kFLOAT: out = kernels::DataType::kFLOAT; return true;
    case nvinfer1::DataType::kHALF: out = kernels::DataType::kHALF; return true;
    case nvinfer1::DataType::kBF16: out = kernels::DataType::kBF16; return true;
    default: return false;
    }
}

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

std::vector<FieldDesc> const& CausalLinearAttentionPlugin::fieldTable()
{
    static std::vector<FieldDesc> const table{
        {"eps", FieldKind::kFLOAT, 1e-6, false},
    };
    return table;
}

bool CausalLinearAttentionPlugin::fromFieldValues(
    std::vector<double> const& values, CausalLinearAttentionParameters& params) noexcept
{
    if (values.size() != fieldTable().size())
    {
        logError("CausalLinearAttention: wrong number of field values");
        return false;
    }
    float const eps = static_cast<float>(values[kEPS]);
    if (!(eps >= 0.F) || !std::isfinite(eps))
    {
        logError("CausalLinearAttention: eps must be finite and >= 0");
        return false;
    }
    params.eps = eps;
    return true;
}

bool CausalLinearAttentionPlugin::inputLayout(
    int32_t nbInputs, CausalLinearAttentionInputs& inputs, char const* layer) noexcept
{
    if (nbInputs != kNB_INPUTS)
    {
        logError(std::string(kPLUGIN_NAME) + (layer != nullptr ? " '" + std::string(layer) + "'" : std::string())
            + ": expected exactly " + std::to_string(kNB_INPUTS)
            + " inputs (q, k, v, S0, z0; S0 / z0 zeros when there is no state), got " + std::to_string(nbInputs));
        return false;
    }
    inputs = CausalLinearAttentionInputs{};
    return true;
}

CausalLinearAttentionPlugin::CausalLinearAttentionPlugin(
    std::string const& name, CausalLinearAttentionParameters const& params)
    : mName(name)
    , mParams(params)
{
}

nvinfer1::IPluginCapability* CausalLinearAttentionPlugin::getCapabilityInterface(
    nvinfer1::PluginCapabilityType type) noexcept
{
    switch (type)
    {
    case nvinfer1::PluginCapabilityType::kCORE: return static_cast<nvinfer1::IPluginV3OneCore*>(this);
    case nvinfer1::PluginCapabilityType::kBUILD: return static_cast<nvinfer1::IPluginV3OneBuild*>(this);
    case nvinfer1::PluginCapabilityType::kRUNTIME: return static_cast<nvinfer1::IPluginV3OneRuntime*>(this);
    }
    return nullptr;
}

nvinfer1::IPluginV3* CausalLinearAttentionPlugin::clone() noexcept
{
    try
    {
        auto* copy = new CausalLinearAttentionPlugin(mName, mParams);
        copy->mLayoutKnown = mLayoutKnown;
        copy->mLayout = mLayout;
        return copy;
    }
    catch (...)
    {
        logError("CausalLinearAttention: clone failed");
        return nullptr;
    }
}

char const* CausalLinearAttentionPlugin::getPluginName() const noexcept
{
    return kPLUGIN_NAME;
}

char const* CausalLinearAttentionPlugin::getPluginVersion() const noexcept
{
    return kPLUGIN_VERSION;
}

char const* CausalLinearAttentionPlugin::getPluginNamespace() const noexcept
{
    return kPLUGIN_NAMESPACE;
}

int32_t CausalLinearAttentionPlugin::getNbOutputs() const noexcept
{
    return kNB_OUTPUTS;
}

int32_t CausalLinearAttentionPlugin::getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs,
    nvinfer1::DataType const* inputTypes, int32_t nbInputs) const noexcept
{
    CausalLinearAttentionInputs layout;
    if (!inputLayout(nbInputs, layout, mName.c_str()))
    {
        return -1;
    }
    if (outputTypes == nullptr || inputTypes == nullptr || nbOutputs != kNB_OUTPUTS)
    {
        logError("CausalLinearAttention '" + mName + "': expected non-null descriptors and 3 outputs, got "
            + std::to_string(nbOutputs) + " outputs");
        return -1;
    }
    outputTypes[0] = inputTypes[layout.q];
    outputTypes[1] = nvinfer1::DataType::kFLOAT;
    outputTypes[2] = nvinfer1::DataType::kFLOAT;
    return 0;
}

int32_t CausalLinearAttentionPlugin::getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
    nvinfer1::DimsExprs const* /*shapeInputs*/, int32_t /*nbShapeInputs*/, nvinfer1::DimsExprs* outputs,
    int32_t nbOutputs, nvinfer1::IExprBuilder& /*exprBuilder*/) noexcept
{
    CausalLinearAttentionInputs layout;
    if (!inputLayout(nbInputs, layout, mName.c_str()))
    {
        return -1;
    }
    if (inputs == nullptr || outputs == nullptr || nbOutputs != kNB_OUTPUTS)
    {
        logError("CausalLinearAttention '" + mName + "': expected non-null descriptors and 3 outputs, got "
            + std::to_string(nbOutputs) + " outputs");
        return -1;
    }
    nvinfer1::DimsExprs const& q = inputs[layout.q];
    nvinfer1::DimsExprs const& v = inputs[layout.v];
    if (q.nbDims != 4 || inputs[layout.k].nbDims != 4 || v.nbDims != 4 || inputs[layout.S0].nbDims != 4
        || inputs[layout.z0].nbDims != 3)
    {
        logError("CausalLinearAttention '" + mName + "': q, k, v must be 4-D, S0 4-D, z0 3-D");
        return -1;
    }
    // The state outputs take the state inputs' shapes (S_last continues S0, z_last continues z0).
    outputs[0] = v;
    outputs[1] = inputs[layout.S0];
    outputs[2] = inputs[layout.z0];
    return 0;
}

bool CausalLinearAttentionPlugin::supportsFormatCombination(
    int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs, int32_t nbOutputs) noexcept
{
    CausalLinearAttentionInputs layout;
    if (inOut == nullptr || nbOutputs != kNB_OUTPUTS || pos < 0 || pos >= nbInputs + nbOutputs
        || !inputLayout(nbInputs, layout, mName.c_str()))
    {
        return false;
    }
    // q, k, v and out are activations; S0, z0, S_last and z_last state.
    bool const activation = pos == layout.q || pos == layout.k || pos == layout.v || pos == nbInputs;
    return supportsRole(activation ? TensorRole::kACTIVATION : TensorRole::kSTATE, inOut[pos].desc, inOut[0].desc);
}

int32_t CausalLinearAttentionPlugin::configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
    nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept
{
    CausalLinearAttentionInputs layout;
    if (!inputLayout(nbInputs, layout, mName.c_str()))
    {
        return -1;
    }
    if (in == nullptr || out == nullptr || nbOutputs != kNB_OUTPUTS)
    {
        logError("CausalLinearAttention '" + mName
            + "': configurePlugin expects non-null descriptors and 3 outputs, got " + std::to_string(nbOutputs)
            + " outputs");
        return -1;
    }
    mLayout = layout;
    mLayoutKnown = true;
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

bool CausalLinearAttentionPlugin::checkShapes(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs) const noexcept
{
    CausalLinearAttentionInputs layout;
    if (!inputLayout(nbInputs, layout, mName.c_str()))
    {
        return false;
    }
    if (in == nullptr)
    {
        logError("CausalLinearAttention '" + mName + "': no input descriptors");
        return false;
    }
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
        logError("CausalLinearAttention '" + mName + "': inconsistent shapes (q " + toString(q) + ", k " + toString(k)
            + ", v " + toString(v) + ")");
    }
    return ok;
}

int32_t CausalLinearAttentionPlugin::onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs,
    nvinfer1::PluginTensorDesc const* out, int32_t nbOutputs) noexcept
{
    if (out == nullptr || nbOutputs != kNB_OUTPUTS || !checkShapes(in, nbInputs))
    {
        return -1;
    }
    inputLayout(nbInputs, mLayout);
    mLayoutKnown = true;
    return 0;
}

int32_t CausalLinearAttentionPlugin::enqueue(nvinfer1::PluginTensorDesc const* inputDesc,
    nvinfer1::PluginTensorDesc const* outputDesc, void const* const* inputs, void* const* outputs, void* workspace,
    cudaStream_t stream) noexcept
{
    kernels::DataType type{};
    kernels::LinearAttentionParams params{};
    if (inputDesc == nullptr || outputDesc == nullptr || inputs == nullptr || outputs == nullptr || !mLayoutKnown
        || !toKernelType(inputDesc[mLayout.q].type, type)
        || !attentionSizes(inputDesc[mLayout.q].dims, inputDesc[mLayout.v].dims, mParams.eps, params))
    {
        logError("CausalLinearAttention '" + mName + "': enqueue before a valid onShapeChange / configurePlugin");
        return -1;
    }
    // The state inputs are always bound (zeros when the model gave none).
    cudaError_t const status = kernels::causalLinearAttentionForward(params, type, inputs[mLayout.q], inputs[mLayout.k],
        inputs[mLayout.v], static_cast<float const*>(inputs[mLayout.S0]), static_cast<float const*>(inputs[mLayout.z0]),
        outputs[0], static_cast<float*>(outputs[1]), static_cast<float*>(outputs[2]), workspace, stream);
    if (status != cudaSuccess)
    {
        logError("CausalLinearAttention '" + mName + "': kernel launch failed, cudaError " + std::to_string(status));
        return -1;
    }
    return 0;
}

nvinfer1::IPluginV3* CausalLinearAttentionPlugin::attachToContext(
    nvinfer1::IPluginResourceContext* /*context*/) noexcept
{
    return clone();
}

nvinfer1::PluginFieldCollection const* CausalLinearAttentionPlugin::getFieldsToSerialize() noexcept
{
    try
    {
        mSerialized.clear();
        mSerialized.emplace_back(fieldTable()[kEPS].name, &mParams.eps, nvinfer1::PluginFieldType::kFLOAT32, 1);
        mSerializedCollection.nbFields = static_cast<int32_t>(mSerialized.size());
        mSerializedCollection.fields = mSerialized.data();
        return &mSerializedCollection;
    }
    catch (...)
    {
        logError("CausalLinearAttention: getFieldsToSerialize failed");
        return nullptr;
    }
}

CausalLinearAttentionPluginCreator::CausalLinearAttentionPluginCreator()
    : mFields(fieldNames(CausalLinearAttentionPlugin::fieldTable()))
{
    mFieldCollection.nbFields = static_cast<int32_t>(mFields.size());
    mFieldCollection.fields = mFields.data();
}

char const* CausalLinearAttentionPluginCreator::getPluginName() const noexcept
{
    return CausalLinearAttentionPlugin::kPLUGIN_NAME;
}

char const* CausalLinearAttentionPluginCreator::getPluginVersion() const noexcept
{
    return kPLUGIN_VERSION;
}

char const* CausalLinearAttentionPluginCreator::getPluginNamespace() const noexcept
{
    return kPLUGIN_NAMESPACE;
}

nvinfer1::PluginFieldCollection const* CausalLinearAttentionPluginCreator::getFieldNames() noexcept
{
    return &mFieldCollection;
}

nvinfer1::IPluginV3* CausalLinearAttentionPluginCreator::createPlugin(
    char const* name, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase phase) noexcept
{
    try
    {
        std::vector<double> values;
        CausalLinearAttentionParameters params;
        bool const requireAll = phase == nvinfer1::TensorRTPhase::kRUNTIME;
        if (!parseFields(CausalLinearAttentionPlugin::kPLUGIN_NAME, CausalLinearAttentionPlugin::fieldTable(), fc,
                requireAll, values)
            || !CausalLinearAttentionPlugin::fromFieldValues(values, params))
        {
            return nullptr;
        }
        return new CausalLinearAttentionPlugin(name != nullptr ? name : "", params);
    }
    catch (...)
    {
        logError("CausalLinearAttention: createPlugin failed");
        return nullptr;
    }
}

} // namespace plugin
} // namespace rnnx
