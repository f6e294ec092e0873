/*
 * What every rnnx TensorRT plugin and creator has in common, as CRTP templates; an op's plugin
 * (plugins/<op>/tensorrt/) derives from them and keeps only what is its own: its fields, input layout, tensor
 * roles, output shapes, shape checks and kernel launch.
 *
 * PluginBase<Derived, Parameters, Inputs> is an IPluginV3 with the OneCore / OneBuild / OneRuntime capabilities:
 * capability dispatch, clone and attachToContext, name / version / namespace, the output count, output types
 * and supported formats from the tensors' roles, the input-count and descriptor checks of the build and runtime
 * calls, the input layout recorded by configurePlugin / onShapeChange, parameters from field values and the fields
 * to serialize (both through the op's field table), and error messages naming the plugin and its layer.
 * Derived provides (private members are reached through `friend` of its base):
 *
 *   static constexpr char const* kPLUGIN_NAME       the plugin name, = the ONNX op type
 *   static constexpr int32_t kNB_INPUTS, kNB_OUTPUTS
 *   static constexpr char const* kINPUT_NAMES       its inputs in order, for the input-count error
 *   static std::vector<Field<Parameters>> const& fields()             the field table
 *   static bool checkParameters(Parameters const&) noexcept           range checks, errors logged
 *   static bool inputLayout(Parameters const&, int32_t nbInputs, Inputs&, char const* layer) noexcept
 *   static TensorRole tensorRole(Inputs const&, int32_t pos) noexcept  pos: the inputs, then the outputs
 *   int32_t outputShapes(DimsExprs const* inputs, Inputs const&, DimsExprs* outputs, IExprBuilder&) noexcept
 *   bool checkShapes(PluginTensorDesc const* in, Inputs const&) const noexcept   extents vs the fields
 *   int32_t launch(inputDesc, inputs, outputs, workspace, stream) noexcept   enqueue, once configured
 *
 * and getWorkspaceSize when it needs device workspace (the base asks for none). PluginCreator<Plugin> is its
 * creator: the field list of its table and createPlugin. PluginIdentity gives both the name, version and namespace.
 */
#pragma once

#include "common/pluginCommon.h"
#include "rnnx/kernel_types.h"

#include <NvInferRuntime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace rnnx
{
namespace plugin
{

//! The kernels' type for an activation type; false for a type they do not take.
inline bool toKernelType(nvinfer1::DataType type, kernels::DataType& out) noexcept
{
    switch (type)
    {
    case nvinfer1::DataType::kFLOAT: out = kernels::DataType::kFLOAT; return true;
    case nvinfer1::DataType::kHALF: out = kernels::DataType::kHALF; return true;
    case nvinfer1::DataType::kBF16: out = kernels::DataType::kBF16; return true;
    default: return false;
    }
}

//! The kernels' element type for a pad mask's descriptor type: kINT32 (what supportsRole accepts and TensorRT
//! gives), or the one-byte kBOOL / kUINT8 (read as bytes, for callers other than TensorRT); false otherwise.
inline bool toKernelMaskType(nvinfer1::DataType type, kernels::MaskType& out) noexcept
{
    switch (type)
    {
    case nvinfer1::DataType::kINT32: out = kernels::MaskType::kINT32; return true;
    case nvinfer1::DataType::kBOOL:
    case nvinfer1::DataType::kUINT8: out = kernels::MaskType::kUINT8; return true;
    default: return false;
    }
}

//! One row of a plugin's field table and the member of its parameter struct holding the value: an int32_t
//! member makes a kINT field, a float member a kFLOAT field (serialized as kINT32 / kFLOAT32), an int32_t member
//! with a list of choices a kSTRING field (the member holds the index of the string; serialized as kCHAR, the
//! string's characters without a NUL).
template <typename Parameters> struct Field
{
    Field(char const* name, int32_t Parameters::* member, double defaultValue, bool required = false) noexcept
        : desc{name, FieldKind::kINT, defaultValue, required, {}}
        , intMember(member)
    {
    }
    Field(char const* name, float Parameters::* member, double defaultValue) noexcept
        : desc{name, FieldKind::kFLOAT, defaultValue, false, {}}
        , floatMember(member)
    {
    }
    //! A string field: one of `choices`, `defaultChoice` its default (an index into `choices`).
    Field(char const* name, int32_t Parameters::* member, std::vector<char const*> choices, int32_t defaultChoice)
        : desc{name, FieldKind::kSTRING, static_cast<double>(defaultChoice), false, std::move(choices)}
        , intMember(member)
    {
    }

    //! Stores a value parseFields read for this row (an int field's value is exactly an int32).
    void assign(Parameters& params, double value) const noexcept
    {
        if (intMember != nullptr)
        {
            params.*intMember = static_cast<int32_t>(value);
        }
        else
        {
            params.*floatMember = static_cast<float>(value);
        }
    }

    //! The member's address in `params`, the data of the serialized field (a string field: its choice's text).
    void const* data(Parameters const& params) const noexcept
    {
        if (desc.kind == FieldKind::kSTRING)
        {
            return choice(params);
        }
        if (intMember != nullptr)
        {
            return &(params.*intMember);
        }
        return &(params.*floatMember);
    }

    //! The serialized field's length: 1, or a string field's number of characters.
    int32_t length(Parameters const& params) const noexcept
    {
        return desc.kind == FieldKind::kSTRING ? static_cast<int32_t>(std::strlen(choice(params))) : 1;
    }

    //! A string field's text in `params` ("" for an index outside the choices, which checkParameters refuses).
    char const* choice(Parameters const& params) const noexcept
    {
        int32_t const index = params.*intMember;
        return index >= 0 && static_cast<size_t>(index) < desc.choices.size() ? desc.choices[index] : "";
    }

    FieldDesc desc;
    int32_t Parameters::* intMember{nullptr};
    float Parameters::* floatMember{nullptr};
};

//! The name (Plugin::kPLUGIN_NAME), version and namespace that a plugin's core capability and its creator both
//! report: Interface is IPluginV3OneCore or IPluginCreatorV3One.
template <typename Interface, typename Plugin> class PluginIdentity : public Interface
{
public:
    char const* getPluginName() const noexcept override
    {
        return Plugin::kPLUGIN_NAME;
    }

    char const* getPluginVersion() const noexcept override
    {
        return kPLUGIN_VERSION;
    }

    char const* getPluginNamespace() const noexcept override
    {
        return kPLUGIN_NAMESPACE;
    }
};

template <typename Derived, typename Parameters, typename Inputs>
class PluginBase : public nvinfer1::IPluginV3,
                   public PluginIdentity<nvinfer1::IPluginV3OneCore, Derived>,
                   public nvinfer1::IPluginV3OneBuild,
                   public nvinfer1::IPluginV3OneRuntime
{
public:
    using ParametersType = Parameters;

    //! The field table (names, kinds, defaults, in Derived::fields() order): what the creator reports and parses.
    static std::vector<FieldDesc> const& fieldTable()
    {
        static std::vector<FieldDesc> const table = []
        {
            std::vector<FieldDesc> rows;
            for (Field<Parameters> const& field : Derived::fields())
            {
                rows.push_back(field.desc);
            }
            return rows;
        }();
        return table;
    }

    //! Parameters from field values (parseFields order); false with an error logged when a value is out of range.
    static bool fromFieldValues(std::vector<double> const& values, Parameters& params) noexcept
    {
        std::vector<Field<Parameters>> const& fields = Derived::fields();
        if (values.size() != fields.size())
        {
            logPluginError("wrong number of field values");
            return false;
        }
        Parameters p;
        for (size_t row = 0; row < fields.size(); ++row)
        {
            fields[row].assign(p, values[row]);
        }
        if (!Derived::checkParameters(p))
        {
            return false;
        }
        params = p;
        return true;
    }

    PluginBase(std::string const& name, Parameters const& params)
        : mName(name)
        , mParams(params)
    {
    }
    ~PluginBase() override = default;
    PluginBase& operator=(PluginBase const&) = delete;

    Parameters const& parameters() const noexcept
    {
        return mParams;
    }

    // IPluginV3
    nvinfer1::IPluginCapability* getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept override
    {
        switch (type)
        {
        case nvinfer1::PluginCapabilityType::kCORE: return static_cast<nvinfer1::IPluginV3OneCore*>(this);
        case nvinfer1::PluginCapabilityType::kBUILD: return static_cast<nvinfer1::IPluginV3OneBuild*>(this);
        case nvinfer1::PluginCapabilityType::kRUNTIME: return static_cast<nvinfer1::IPluginV3OneRuntime*>(this);
        }
        return nullptr;
    }

    //! A copy with the same name, parameters and recorded input layout.
    nvinfer1::IPluginV3* clone() noexcept override
    {
        try
        {
            return new Derived(static_cast<Derived const&>(*this));
        }
        catch (...)
        {
            logPluginError("clone failed");
            return nullptr;
        }
    }

    // IPluginV3OneBuild
    int32_t getNbOutputs() const noexcept override
    {
        return Derived::kNB_OUTPUTS;
    }

    //! Activation outputs take the first input's type (as supportsRole requires); state outputs are fp32.
    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs, nvinfer1::DataType const* inputTypes,
        int32_t nbInputs) const noexcept override
    {
        Inputs layout;
        if (!acceptsIo(nbInputs, outputTypes != nullptr && inputTypes != nullptr, nbOutputs, "expected", layout))
        {
            return -1;
        }
        for (int32_t i = 0; i < nbOutputs; ++i)
        {
            bool const activation = Derived::tensorRole(layout, nbInputs + i) == TensorRole::kACTIVATION;
            outputTypes[i] = activation ? inputTypes[0] : nvinfer1::DataType::kFLOAT;
        }
        return 0;
    }

    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
        nvinfer1::DimsExprs const* /*shapeInputs*/, int32_t /*nbShapeInputs*/, nvinfer1::DimsExprs* outputs,
        int32_t nbOutputs, nvinfer1::IExprBuilder& exprBuilder) noexcept override
    {
        Inputs layout;
        if (!acceptsIo(nbInputs, inputs != nullptr && outputs != nullptr, nbOutputs, "expected", layout))
        {
            return -1;
        }
        return derived().outputShapes(inputs, layout, outputs, exprBuilder);
    }

    //! Linear format and a type allowed for the tensor's role (Derived::tensorRole).
    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
        int32_t nbOutputs) noexcept override
    {
        Inputs layout;
        if (inOut == nullptr || nbOutputs != Derived::kNB_OUTPUTS || pos < 0 || pos >= nbInputs + nbOutputs
            || !Derived::inputLayout(mParams, nbInputs, layout, mName.c_str()))
        {
            return false;
        }
        return supportsRole(Derived::tensorRole(layout, pos), inOut[pos].desc, inOut[0].desc);
    }

    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override
    {
        Inputs layout;
        if (!acceptsIo(nbInputs, in != nullptr && out != nullptr, nbOutputs, "configurePlugin expects", layout))
        {
            return -1;
        }
        recordLayout(layout);
        return 0;
    }

    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* /*inputs*/, int32_t /*nbInputs*/,
        nvinfer1::DynamicPluginTensorDesc const* /*outputs*/, int32_t /*nbOutputs*/) const noexcept override
    {
        return 0;
    }

    // IPluginV3OneRuntime
    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) noexcept override
    {
        Inputs layout;
        if (out == nullptr || nbOutputs != Derived::kNB_OUTPUTS || !validShapes(in, nbInputs, layout))
        {
            return -1;
        }
        recordLayout(layout);
        return 0;
    }

    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override
    {
        if (inputDesc == nullptr || outputDesc == nullptr || inputs == nullptr || outputs == nullptr || !mLayoutKnown)
        {
            return notConfigured();
        }
        return derived().launch(inputDesc, inputs, outputs, workspace, stream);
    }

    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* /*context*/) noexcept override
    {
        return clone();
    }

    //! Every field of the table, in its order, pointing at the parameters (kINT32 / kFLOAT32 / kCHAR).
    nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept override
    {
        try
        {
            mSerialized.clear();
            for (Field<Parameters> const& field : Derived::fields())
            {
                mSerialized.emplace_back(
                    field.desc.name, field.data(mParams), serializedType(field.desc.kind), field.length(mParams));
            }
            mSerializedCollection.nbFields = static_cast<int32_t>(mSerialized.size());
            mSerializedCollection.fields = mSerialized.data();
            return &mSerializedCollection;
        }
        catch (...)
        {
            logPluginError("getFieldsToSerialize failed");
            return nullptr;
        }
    }

protected:
    //! Copies name, parameters and the recorded layout; the serialized fields are rebuilt on demand.
    PluginBase(PluginBase const& other)
        : nvinfer1::IPluginV3(other)
        , PluginIdentity<nvinfer1::IPluginV3OneCore, Derived>(other)
        , nvinfer1::IPluginV3OneBuild(other)
        , nvinfer1::IPluginV3OneRuntime(other)
        , mName(other.mName)
        , mParams(other.mParams)
        , mLayoutKnown(other.mLayoutKnown)
        , mLayout(other.mLayout)
    {
    }

    //! "<plugin>: <message>" as an error.
    static void logPluginError(std::string const& message) noexcept
    {
        logLayerError(nullptr, message);
    }

    //! "<plugin> '<layer>': <message>" as an error ("<plugin>: <message>" without a layer).
    static void logLayerError(char const* layer, std::string const& message) noexcept
    {
        try
        {
            std::string const where = layer != nullptr ? " '" + std::string(layer) + "'" : std::string();
            logError(Derived::kPLUGIN_NAME + where + ": " + message);
        }
        catch (...)
        {
        }
    }

    //! "<plugin> '<this layer>': <message>" as an error.
    void logLayerError(std::string const& message) const noexcept
    {
        logLayerError(mName.c_str(), message);
    }

    //! True when `nbInputs` is kNB_INPUTS; else an error naming the plugin (and `layer`), the expected inputs and
    //! the given count is logged.
    static bool hasInputCount(int32_t nbInputs, char const* layer) noexcept
    {
        if (nbInputs == Derived::kNB_INPUTS)
        {
            return true;
        }
        logLayerError(layer,
            "expected exactly " + std::to_string(Derived::kNB_INPUTS) + " inputs (" + Derived::kINPUT_NAMES + "), got "
                + std::to_string(nbInputs));
        return false;
    }

    //! enqueue's answer before a valid onShapeChange / configurePlugin (logged).
    int32_t notConfigured() const noexcept
    {
        logLayerError("enqueue before a valid onShapeChange / configurePlugin");
        return -1;
    }

    //! enqueue's answer for a launcher's status: 0, or -1 with the CUDA error logged.
    int32_t launched(cudaError_t status) const noexcept
    {
        if (status != cudaSuccess)
        {
            logLayerError("kernel launch failed, cudaError " + std::to_string(status));
            return -1;
        }
        return 0;
    }

    std::string mName;
    Parameters mParams;
    //! Whether configurePlugin / onShapeChange accepted the inputs (mLayout); enqueue refuses to run before.
    bool mLayoutKnown{false};
    Inputs mLayout{};

private:
    Derived& derived() noexcept
    {
        return static_cast<Derived&>(*this);
    }

    Derived const& derived() const noexcept
    {
        return static_cast<Derived const&>(*this);
    }

    //! The input layout and the descriptors / output count a build call takes; `what` starts the error message.
    bool acceptsIo(int32_t nbInputs, bool described, int32_t nbOutputs, char const* what, Inputs& layout) const noexcept
    {
        if (!Derived::inputLayout(mParams, nbInputs, layout, mName.c_str()))
        {
            return false;
        }
        if (!described || nbOutputs != Derived::kNB_OUTPUTS)
        {
            logLayerError(std::string(what) + " non-null descriptors and " + std::to_string(Derived::kNB_OUTPUTS)
                + " outputs, got " + std::to_string(nbOutputs) + " outputs");
            return false;
        }
        return true;
    }

    //! The input layout, the input descriptors present and Derived::checkShapes; errors logged.
    bool validShapes(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, Inputs& layout) const noexcept
    {
        if (!Derived::inputLayout(mParams, nbInputs, layout, mName.c_str()))
        {
            return false;
        }
        if (in == nullptr)
        {
            logLayerError("no input descriptors");
            return false;
        }
        return derived().checkShapes(in, layout);
    }

    void recordLayout(Inputs const& layout) noexcept
    {
        mLayout = layout;
        mLayoutKnown = true;
    }

    std::vector<nvinfer1::PluginField> mSerialized;
    nvinfer1::PluginFieldCollection mSerializedCollection{};
};

//! The creator of a PluginBase plugin: its name, version and namespace, the field list of its table, and
//! createPlugin parsing the fields against that table (every field required when deserialising).
template <typename Plugin> class PluginCreator : public PluginIdentity<nvinfer1::IPluginCreatorV3One, Plugin>
{
public:
    PluginCreator()
        : mFields(fieldNames(Plugin::fieldTable()))
    {
        mFieldCollection.nbFields = static_cast<int32_t>(mFields.size());
        mFieldCollection.fields = mFields.data();
    }
    ~PluginCreator() override = default;

    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override
    {
        return &mFieldCollection;
    }

    //! nullptr (with an error logged) for missing / unknown / wrongly typed / out-of-range fields.
    nvinfer1::IPluginV3* createPlugin(
        char const* name, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase phase) noexcept override
    {
        try
        {
            std::vector<double> values;
            typename Plugin::ParametersType params;
            bool const requireAll = phase == nvinfer1::TensorRTPhase::kRUNTIME;
            if (!parseFields(Plugin::kPLUGIN_NAME, Plugin::fieldTable(), fc, requireAll, values)
                || !Plugin::fromFieldValues(values, params))
            {
                return nullptr;
            }
            return new Plugin(name != nullptr ? name : "", params);
        }
        catch (...)
        {
            logError(std::string(Plugin::kPLUGIN_NAME) + ": createPlugin failed");
            return nullptr;
        }
    }

private:
    std::vector<nvinfer1::PluginField> mFields;
    nvinfer1::PluginFieldCollection mFieldCollection{};
};

} // namespace plugin
} // namespace rnnx
