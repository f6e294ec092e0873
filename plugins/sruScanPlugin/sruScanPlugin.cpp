#include "sruScanPlugin.h"

#include "rnnx/kernels.h"

#include <cmath>
#include <new>

namespace rnnx
{
namespace plugin
{
namespace
{

//! Field-table rows; the order matches SruScanParameters and the table in fieldTable().
enum SruField : size_t
{
    kHIDDEN_SIZE = 0,
    kNUM_DIRECTIONS,
    kNUM_MATRICES,
    kHAS_SKIP_TERM,
    kUSE_TANH,
    kSCALE_X,
};

bool needsX(SruScanParameters const& p) noexcept
{
    return p.numMatrices == 3 && p.hasSkipTerm != 0;
}

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

} // namespace

std::vector<FieldDesc> const& SruScanPlugin::fieldTable()
{
    static std::vector<FieldDesc> const table{
        {"hidden_size", FieldKind::kINT, 0.0, true},
        {"num_directions", FieldKind::kINT, 1.0, false},
        {"num_matrices", FieldKind::kINT, 3.0, false},
        {"has_skip_term", FieldKind::kINT, 1.0, false},
        {"use_tanh", FieldKind::kINT, 0.0, false},
        {"scale_x", FieldKind::kFLOAT, 1.0, false},
    };
    return table;
}

bool SruScanPlugin::fromFieldValues(std::vector<double> const& values, SruScanParameters& params) noexcept
{
    if (values.size() != fieldTable().size())
    {
        logError("SRUScan: wrong number of field values");
        return false;
    }
    SruScanParameters p;
    p.hiddenSize = static_cast<int32_t>(values[kHIDDEN_SIZE]);
    p.numDirections = static_cast<int32_t>(values[kNUM_DIRECTIONS]);
    p.numMatrices = static_cast<int32_t>(values[kNUM_MATRICES]);
    p.hasSkipTerm = static_cast<int32_t>(values[kHAS_SKIP_TERM]);
    p.useTanh = static_cast<int32_t>(values[kUSE_TANH]);
    p.scaleX = static_cast<float>(values[kSCALE_X]);
    if (p.hiddenSize <= 0)
    {
        logError("SRUScan: hidden_size must be positive, got " + std::to_string(p.hiddenSize));
        return false;
    }
    if (p.numDirections != 1 && p.numDirections != 2)
    {
        logError("SRUScan: num_directions must be 1 or 2, got " + std::to_string(p.numDirections));
        return false;
    }
    if (p.numMatrices != 3 && p.numMatrices != 4)
    {
        logError("SRUScan: num_matrices must be 3 or 4, got " + std::to_string(p.numMatrices));
        return false;
    }
    if ((p.hasSkipTerm != 0 && p.hasSkipTerm != 1) || (p.useTanh != 0 && p.useTanh != 1))
    {
        logError("SRUScan: has_skip_term and use_tanh must be 0 or 1");
        return false;
    }
    if (static_cast<int64_t>(p.hiddenSize) * p.numDirections * p.numMatrices > INT32_MAX)
    {
        logError("SRUScan: hidden_size * num_directions * num_matrices overflows int32");
        return false;
    }
    params = p;
    return true;
}

bool SruScanPlugin::inputLayout(
    SruScanParameters const& params, int32_t nbInputs, SruScanInputs& inputs, char const* layer) noexcept
{
    if (nbInputs != kNB_INPUTS)
    {
        logError(std::string(kPLUGIN_NAME) + (layer != nullptr ? " '" + std::string(layer) + "'" : std::string())
            + ": expected exactly " + std::to_string(kNB_INPUTS)
            + " inputs (U, x, weight_c, bias, c0, mask_pad; x is a dummy unless num_matrices = 3 with "
              "has_skip_term), got "
            + std::to_string(nbInputs));
        return false;
    }
    SruScanInputs in;
    in.readsX = needsX(params);
    inputs = in;
    return true;
}

SruScanPlugin::SruScanPlugin(std::string const& name, SruScanParameters const& params)
    : mName(name)
    , mParams(params)
{
}

nvinfer1::IPluginCapability* SruScanPlugin::getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept
{
    switch (type)
    {
    case nvinfer1::PluginCapabilityType::kCORE: return static_cast<nvinfer1::IPluginV3OneCore*>(this);
    case nvinfer1::PluginCapabilityType::kBUILD: return static_cast<nvinfer1::IPluginV3OneBuild*>(this);
    case nvinfer1::PluginCapabilityType::kRUNTIME: return static_cast<nvinfer1::IPluginV3OneRuntime*>(this);
    }
    return nullptr;
}

nvinfer1::IPluginV3* SruScanPlugin::clone() noexcept
{
    try
    {
        auto* copy = new SruScanPlugin(mName, mParams);
        copy->mNbInputs = mNbInputs;
        return copy;
    }
    catch (...)
    {
        logError("SRUScan: clone failed");
        return nullptr;
    }
}

char const* SruScanPlugin::getPluginName() const noexcept
{
    return kPLUGIN_NAME;
}

char const* SruScanPlugin::getPluginVersion() const noexcept
{
    return kPLUGIN_VERSION;
}

char const* SruScanPlugin::getPluginNamespace() const noexcept
{
    return kPLUGIN_NAMESPACE;
}

int32_t SruScanPlugin::getNbOutputs() const noexcept
{
    return kNB_OUTPUTS;
}

int32_t SruScanPlugin::getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs,
    nvinfer1::DataType const* inputTypes, int32_t nbInputs) const noexcept
{
    SruScanInputs layout;
    if (!inputLayout(mParams, nbInputs, layout, mName.c_str()))
    {
        return -1;
    }
    if (outputTypes == nullptr || inputTypes == nullptr || nbOutputs != kNB_OUTPUTS)
    {
        logError("SRUScan '" + mName + "': expected non-null descriptors and 2 outputs, got "
            + std::to_string(nbOutputs) + " outputs");
        return -1;
    }
    outputTypes[0] = inputTypes[layout.U];
    outputTypes[1] = nvinfer1::DataType::kFLOAT;
    return 0;
}

int32_t SruScanPlugin::getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
    nvinfer1::DimsExprs const* /*shapeInputs*/, int32_t /*nbShapeInputs*/, nvinfer1::DimsExprs* outputs,
    int32_t nbOutputs, nvinfer1::IExprBuilder& exprBuilder) noexcept
{
    SruScanInputs layout;
    if (!inputLayout(mParams, nbInputs, layout, mName.c_str()))
    {
        return -1;
    }
    if (inputs == nullptr || outputs == nullptr || nbOutputs != kNB_OUTPUTS)
    {
        logError("SRUScan '" + mName + "': expected non-null descriptors and 2 outputs, got "
            + std::to_string(nbOutputs) + " outputs");
        return -1;
    }
    // x (position 1) is not looked at: a dummy of any shape unless needsX, checked at onShapeChange otherwise.
    if (inputs[layout.U].nbDims != 3 || inputs[layout.c0].nbDims != 2)
    {
        logError("SRUScan '" + mName + "': U must be (L, B, D*d*k) and c0 (B, D*d)");
        return -1;
    }
    auto const* width = exprBuilder.constant(static_cast<int64_t>(mParams.numDirections) * mParams.hiddenSize);
    outputs[0].nbDims = 3;
    outputs[0].d[0] = inputs[layout.U].d[0];
    outputs[0].d[1] = inputs[layout.U].d[1];
    outputs[0].d[2] = width;
    outputs[1] = inputs[layout.c0];
    return 0;
}

bool SruScanPlugin::supportsFormatCombination(
    int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs, int32_t nbOutputs) noexcept
{
    SruScanInputs layout;
    if (inOut == nullptr || nbOutputs != kNB_OUTPUTS || pos < 0 || pos >= nbInputs + nbOutputs
        || !inputLayout(mParams, nbInputs, layout, mName.c_str()))
    {
        return false;
    }
    // U, x (read or dummy, any shape), weight_c, bias and h are activations; c0 and c_last state.
    TensorRole role = TensorRole::kACTIVATION;
    if (pos == layout.c0 || pos == nbInputs + 1)
    {
        role = TensorRole::kSTATE;
    }
    else if (pos == layout.maskPad)
    {
        role = TensorRole::kMASK;
    }
    return supportsRole(role, inOut[pos].desc, inOut[0].desc);
}

int32_t SruScanPlugin::configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
    nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept
{
    SruScanInputs layout;
    if (!inputLayout(mParams, nbInputs, layout, mName.c_str()))
    {
        return -1;
    }
    if (in == nullptr || out == nullptr || nbOutputs != kNB_OUTPUTS)
    {
        logError("SRUScan '" + mName + "': configurePlugin expects non-null descriptors and 2 outputs, got "
            + std::to_string(nbOutputs) + " outputs");
        return -1;
    }
    mNbInputs = nbInputs;
    return 0;
}

size_t SruScanPlugin::getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* /*inputs*/, int32_t /*nbInputs*/,
    nvinfer1::DynamicPluginTensorDesc const* /*outputs*/, int32_t /*nbOutputs*/) const noexcept
{
    return 0;
}

bool SruScanPlugin::checkShapes(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs) const noexcept
{
    SruScanInputs layout;
    if (!inputLayout(mParams, nbInputs, layout, mName.c_str()))
    {
        return false;
    }
    if (in == nullptr)
    {
        logError("SRUScan '" + mName + "': no input descriptors");
        return false;
    }
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
        logError("SRUScan '" + mName + "': input shapes do not match hidden_size " + std::to_string(mParams.hiddenSize)
            + ", num_directions " + std::to_string(mParams.numDirections) + ", num_matrices "
            + std::to_string(mParams.numMatrices) + " (U " + toString(U) + ", c0 " + toString(in[layout.c0].dims)
            + ")");
    }
    return ok;
}

int32_t SruScanPlugin::onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs,
    nvinfer1::PluginTensorDesc const* out, int32_t nbOutputs) noexcept
{
    if (out == nullptr || nbOutputs != kNB_OUTPUTS || !checkShapes(in, nbInputs))
    {
        return -1;
    }
    mNbInputs = nbInputs;
    return 0;
}

int32_t SruScanPlugin::enqueue(nvinfer1::PluginTensorDesc const* inputDesc,
    nvinfer1::PluginTensorDesc const* outputDesc, void const* const* inputs, void* const* outputs, void* /*workspace*/,
    cudaStream_t stream) noexcept
{
    SruScanInputs layout;
    if (inputDesc == nullptr || outputDesc == nullptr || inputs == nullptr || outputs == nullptr
        || mNbInputs != kNB_INPUTS || !inputLayout(mParams, mNbInputs, layout, mName.c_str())
        || !checkShapes(inputDesc, mNbInputs))
    {
        logError("SRUScan '" + mName + "': enqueue before a valid onShapeChange / configurePlugin");
        return -1;
    }
    kernels::DataType type{};
    if (!toKernelType(inputDesc[layout.U].type, type))
    {
        logError("SRUScan '" + mName + "': unsupported activation type");
        return -1;
    }
    kernels::SruScanParams params{};
    params.length = static_cast<int>(inputDesc[layout.U].dims.d[0]);
    params.batch = static_cast<int>(inputDesc[layout.U].dims.d[1]);
    params.hidden_size = mParams.hiddenSize;
    params.num_directions = mParams.numDirections;
    params.num_matrices = mParams.numMatrices;
    params.has_skip_term = mParams.hasSkipTerm != 0;
    params.use_tanh = mParams.useTanh != 0;
    params.scale_x = mParams.scaleX;
    // x only when the attributes read it (else its binding is a dummy); the mask always.
    cudaError_t const status =
        kernels::sruScanForward(params, type, inputs[layout.U], layout.readsX ? inputs[layout.x] : nullptr,
            inputs[layout.weightC], inputs[layout.bias], static_cast<float const*>(inputs[layout.c0]),
            static_cast<uint8_t const*>(inputs[layout.maskPad]), outputs[0], static_cast<float*>(outputs[1]), stream);
    if (status != cudaSuccess)
    {
        logError("SRUScan '" + mName + "': kernel launch failed, cudaError " + std::to_string(status));
        return -1;
    }
    return 0;
}

nvinfer1::IPluginV3* SruScanPlugin::attachToContext(nvinfer1::IPluginResourceContext* /*context*/) noexcept
{
    return clone();
}

nvinfer1::PluginFieldCollection const* SruScanPlugin::getFieldsToSerialize() noexcept
{
    try
    {
        std::vector<FieldDesc> const& table = fieldTable();
        mSerialized.clear();
        mSerialized.emplace_back(table[kHIDDEN_SIZE].name, &mParams.hiddenSize, nvinfer1::PluginFieldType::kINT32, 1);
        mSerialized.emplace_back(
            table[kNUM_DIRECTIONS].name, &mParams.numDirections, nvinfer1::PluginFieldType::kINT32, 1);
        mSerialized.emplace_back(table[kNUM_MATRICES].name, &mParams.numMatrices, nvinfer1::PluginFieldType::kINT32, 1);
        mSerialized.emplace_back(
            table[kHAS_SKIP_TERM].name, &mParams.hasSkipTerm, nvinfer1::PluginFieldType::kINT32, 1);
        mSerialized.emplace_back(table[kUSE_TANH].name, &mParams.useTanh, nvinfer1::PluginFieldType::kINT32, 1);
        mSerialized.emplace_back(table[kSCALE_X].name, &mParams.scaleX, nvinfer1::PluginFieldType::kFLOAT32, 1);
        mSerializedCollection.nbFields = static_cast<int32_t>(mSerialized.size());
        mSerializedCollection.fields = mSerialized.data();
        return &mSerializedCollection;
    }
    catch (...)
    {
        logError("SRUScan: getFieldsToSerialize failed");
        return nullptr;
    }
}

SruScanPluginCreator::SruScanPluginCreator()
    : mFields(fieldNames(SruScanPlugin::fieldTable()))
{
    mFieldCollection.nbFields = static_cast<int32_t>(mFields.size());
    mFieldCollection.fields = mFields.data();
}

char const* SruScanPluginCreator::getPluginName() const noexcept
{
    return SruScanPlugin::kPLUGIN_NAME;
}

char const* SruScanPluginCreator::getPluginVersion() const noexcept
{
    return kPLUGIN_VERSION;
}

char const* SruScanPluginCreator::getPluginNamespace() const noexcept
{
    return kPLUGIN_NAMESPACE;
}

nvinfer1::PluginFieldCollection const* SruScanPluginCreator::getFieldNames() noexcept
{
    return &mFieldCollection;
}

nvinfer1::IPluginV3* SruScanPluginCreator::createPlugin(
    char const* name, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase phase) noexcept
{
    try
    {
        std::vector<double> values;
        SruScanParameters params;
        bool const requireAll = phase == nvinfer1::TensorRTPhase::kRUNTIME;
        if (!parseFields(SruScanPlugin::kPLUGIN_NAME, SruScanPlugin::fieldTable(), fc, requireAll, values)
            || !SruScanPlugin::fromFieldValues(values, params))
        {
            return nullptr;
        }
        return new SruScanPlugin(name != nullptr ? name : "", params);
    }
    catch (...)
    {
        logError("SRUScan: createPlugin failed");
        return nullptr;
    }
}

} // namespace plugin
} // namespace rnnx
