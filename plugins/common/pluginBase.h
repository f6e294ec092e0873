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
 *   static constexpr PluginSignature kSIGNATURE     its name, input / output counts and input names
 *   static std::vector<Field<Parameters>> const& fields()             the field table
 *   static bool checkParameters(Parameters const&) noexcept           range checks, errors logged
 *   static TensorRole tensorRole(Inputs const&, int32_t pos) noexcept  pos: the inputs, then the outputs
 *   int32_t outputShapes(DimsExprs const* inputs, Inputs const&, DimsExprs* outputs, IExprBuilder&)
 *   bool checkShapes(PluginTensorDesc const* in, Inputs const&) const   extents vs the fields
 *   int32_t launch(LaunchArgs const&) noexcept      enqueue, once configured and the shapes and types checked
 *
 * Inputs has a `maskPad` member (the pad mask's position); input 0 is an activation. outputShapes and checkShapes
 * may throw (the base logs the exception as a failure).
 *
 * and, where the base's default does not do: static Inputs inputsFor(Parameters const&) noexcept, the input layout
 * (every input at its fixed position, kSIGNATURE.nbInputs of them; the default is Inputs{}), and getWorkspaceSize when
 * it needs device workspace (the base asks for none). RNNX_PLUGIN_HOOKS() declares the base's constructors and the
 * hooks from `fields` on, so an op's class states only its constants. A string field's index is range-checked by the
 * base before checkParameters. PluginCreator<Plugin> is its creator: the field list of its table and createPlugin.
 * PluginIdentity gives both the name, version and namespace.
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

//! What names a plugin and the TensorRT node it runs: the plugin name (= the ONNX op type), how many inputs the
//! node lists (always all of them, at fixed positions) and outputs it has, and its inputs in order (with what
//! stands in for an absent one), for the input-count error.
struct PluginSignature
{
    char const* name;
    int32_t nbInputs;
    int32_t nbOutputs;
    char const* inputNames;
};

//! What enqueue hands an op's launch once the layout, shapes and types are checked: TensorRT's input descriptors
//! and bindings, the kernels' activation type (input 0's) and pad-mask element type, workspace and stream.
struct LaunchArgs
{
    nvinfer1::PluginTensorDesc const* inputDesc;
    kernels::DataType type;
    kernels::MaskType maskType;
    void const* const* inputs;
    void* const* outputs;
    void* workspace;
    cudaStream_t stream;

    //! Extent `axis` of input `pos` as the kernels' int (checkShapes bounds the extents the kernels take).
    int extent(int32_t pos, int32_t axis) const noexcept
    {
        return static_cast<int>(inputDesc[pos].dims.d[axis]);
    }

    //! Input `pos`'s binding as fp32 state.
    float const* stateInput(int32_t pos) const noexcept
    {
        return static_cast<float const*>(inputs[pos]);
    }

    //! Output `index`'s binding as fp32 state.
    float* stateOutput(int32_t index) const noexcept
    {
        return static_cast<float*>(outputs[index]);
    }

    //! The op's kernel parameter struct, value-initialised but for mask_type: the pad mask is read in its real
    //! element type (int32 from TensorRT).
    template <typename KernelParams> KernelParams kernelParams() const noexcept
    {
        KernelParams params{};
        params.mask_type = maskType;
        return params;
    }
};

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

    //! Whether a string field's index in `params` is one of its choices (fromFieldValues refuses one that is not).
    bool hasChoice(Parameters const& params) const noexcept
    {
        int32_t const index = params.*intMember;
        return index >= 0 && static_cast<size_t>(index) < desc.choices.size();
    }

    //! A string field's text in `params` ("" for an index outside the choices).
    char const* choice(Parameters const& params) const noexcept
    {
        return hasChoice(params) ? desc.choices[params.*intMember] : "";
    }

    FieldDesc desc;
    int32_t Parameters::* intMember{nullptr};
    float Parameters::* floatMember{nullptr};
};

//! The name (Plugin::kSIGNATURE.name), version and namespace that a plugin's core capability and its creator both
//! report: Interface is IPluginV3OneCore or IPluginCreatorV3One.
template <typename Interface, typename Plugin> class PluginIdentity : public Interface
{
public:
    char const* getPluginName() const noexcept override
    {
        return Plugin::kSIGNATURE.name;
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
    using InputsType = Inputs;

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
        for (Field<Parameters> const& field : fields)
        {
            if (field.desc.kind == FieldKind::kSTRING && !field.hasChoice(p))
            {
                logPluginError(
                    std::string(field.desc.name) + " index " + std::to_string(p.*field.intMember) + " is out of range");
                return false;
            }
        }
        if (!Derived::checkParameters(p))
        {
            return false;
        }
        params = p;
        return true;
    }

    //! The input layout for `params` (Derived::inputsFor). False when `nbInputs` is not exactly the signature's; then
    //! an error naming the plugin (and `layer` when given), the expected and the given count is logged.
    static bool inputLayout(
        Parameters const& params, int32_t nbInputs, Inputs& inputs, char const* layer = nullptr) noexcept
    {
        if (!hasInputCount(nbInputs, layer))
        {
            return false;
        }
        inputs = Derived::inputsFor(params);
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
        return Derived::kSIGNATURE.nbOutputs;
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
        try
        {
            return derived().outputShapes(inputs, layout, outputs, exprBuilder);
        }
        catch (...)
        {
            logLayerError("getOutputShapes failed");
            return -1;
        }
    }

    //! Linear format and a type allowed for the tensor's role (Derived::tensorRole).
    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
        int32_t nbOutputs) noexcept override
    {
        Inputs layout;
        if (inOut == nullptr || nbOutputs != Derived::kSIGNATURE.nbOutputs || pos < 0 || pos >= nbInputs + nbOutputs
            || !inputLayout(mParams, nbInputs, layout, mName.c_str()))
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
        if (out == nullptr || nbOutputs != Derived::kSIGNATURE.nbOutputs || !validShapes(in, nbInputs, layout))
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
        LaunchArgs args{inputDesc, {}, {}, inputs, outputs, workspace, stream};
        if (!launchTypes(inputDesc, args.type, args.maskType))
        {
            return -1;
        }
        return derived().launch(args);
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
            logError(Derived::kSIGNATURE.name + where + ": " + message);
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

    //! The default input layout: Inputs' own positions, whatever the parameters.
    static Inputs inputsFor(Parameters const& /*params*/) noexcept
    {
        return Inputs{};
    }

    //! tensorRole of a plugin whose tensors are activations but for one state input (`state`), the state output
    //! continuing it (output 1) and the pad mask (`maskPad`).
    static TensorRole stateOrMaskRole(int32_t pos, int32_t state, int32_t maskPad) noexcept
    {
        if (pos == state || pos == Derived::kSIGNATURE.nbInputs + 1)
        {
            return TensorRole::kSTATE;
        }
        return pos == maskPad ? TensorRole::kMASK : TensorRole::kACTIVATION;
    }

    //! True when `nbInputs` is the signature's; else an error naming the plugin (and `layer`), the expected inputs and
    //! the given count is logged.
    static bool hasInputCount(int32_t nbInputs, char const* layer) noexcept
    {
        PluginSignature const& signature = Derived::kSIGNATURE;
        if (nbInputs == signature.nbInputs)
        {
            return true;
        }
        logLayerError(layer,
            "expected exactly " + std::to_string(signature.nbInputs) + " inputs (" + signature.inputNames + "), got "
                + std::to_string(nbInputs));
        return false;
    }

    //! True when `value` > 0; else "<name> must be positive, got <value>" is logged (for checkParameters).
    static bool isPositive(char const* name, int32_t value) noexcept
    {
        return value > 0 || refuse(name, value, [] { return std::string("positive"); });
    }

    //! True when `value` is `first` or `second`; else "<name> must be <first> or <second>, got <value>" is logged.
    static bool isEither(char const* name, int32_t value, int32_t first, int32_t second) noexcept
    {
        return value == first || value == second
            || refuse(name, value, [&] { return std::to_string(first) + " or " + std::to_string(second); });
    }

    //! What enqueue checks before launch: the shapes (Derived::checkShapes) that configure time accepted, the
    //! kernels' type of the activations (input 0's, as getOutputDataTypes says) and the pad mask's element type
    //! (input Inputs::maskPad, int32 from TensorRT). False with the error logged.
    bool launchTypes(nvinfer1::PluginTensorDesc const* inputDesc, kernels::DataType& type,
        kernels::MaskType& maskType) const noexcept
    {
        int32_t const activation = 0;
        int32_t const maskPad = mLayout.maskPad;
        if (!shapesAccepted(inputDesc, mLayout))
        {
            notConfigured();
            return false;
        }
        if (!toKernelType(inputDesc[activation].type, type))
        {
            logLayerError("unsupported activation type");
            return false;
        }
        if (!toKernelMaskType(inputDesc[maskPad].type, maskType))
        {
            logLayerError("mask_pad (input " + std::to_string(maskPad) + ") must be int32, got DataType "
                + std::to_string(static_cast<int32_t>(inputDesc[maskPad].type)));
            return false;
        }
        return true;
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
        if (!inputLayout(mParams, nbInputs, layout, mName.c_str()))
        {
            return false;
        }
        if (!described || nbOutputs != Derived::kSIGNATURE.nbOutputs)
        {
            logLayerError(std::string(what) + " non-null descriptors and "
                + std::to_string(Derived::kSIGNATURE.nbOutputs) + " outputs, got " + std::to_string(nbOutputs)
                + " outputs");
            return false;
        }
        return true;
    }

    //! The input layout, the input descriptors present and Derived::checkShapes; errors logged.
    bool validShapes(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, Inputs& layout) const noexcept
    {
        if (!inputLayout(mParams, nbInputs, layout, mName.c_str()))
        {
            return false;
        }
        if (in == nullptr)
        {
            logLayerError("no input descriptors");
            return false;
        }
        return shapesAccepted(in, layout);
    }

    //! Derived::checkShapes, an exception logged as a refusal.
    bool shapesAccepted(nvinfer1::PluginTensorDesc const* in, Inputs const& layout) const noexcept
    {
        try
        {
            return derived().checkShapes(in, layout);
        }
        catch (...)
        {
            logLayerError("onShapeChange failed");
            return false;
        }
    }

    //! Logs "<name> must be <requirement()>, got <value>"; false.
    template <typename Requirement>
    static bool refuse(char const* name, int32_t value, Requirement requirement) noexcept
    {
        try
        {
            logPluginError(std::string(name) + " must be " + requirement() + ", got " + std::to_string(value));
        }
        catch (...)
        {
        }
        return false;
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
            if (!parseFields(Plugin::kSIGNATURE.name, Plugin::fieldTable(), fc, requireAll, values)
                || !Plugin::fromFieldValues(values, params))
            {
                return nullptr;
            }
            return new Plugin(name != nullptr ? name : "", params);
        }
        catch (...)
        {
            logError(std::string(Plugin::kSIGNATURE.name) + ": createPlugin failed");
            return nullptr;
        }
    }

private:
    std::vector<nvinfer1::PluginField> mFields;
    nvinfer1::PluginFieldCollection mFieldCollection{};
};

} // namespace plugin
} // namespace rnnx

//! Inside a PluginBase plugin's class, after its public members: the base's constructors
//! (public), then the hooks the base calls (private, the base a friend), as the list at the top of this file says.
#define RNNX_PLUGIN_HOOKS()                                                                                            \
public:                                                                                                                \
    using PluginBase::PluginBase;                                                                                      \
                                                                                                                       \
private:                                                                                                               \
    friend PluginBase;                                                                                                 \
    static std::vector<Field<ParametersType>> const& fields();                                                         \
    static bool checkParameters(ParametersType const& params) noexcept;                                                \
    static TensorRole tensorRole(InputsType const& layout, int32_t pos) noexcept;                                      \
    int32_t outputShapes(nvinfer1::DimsExprs const* inputs, InputsType const& layout, nvinfer1::DimsExprs* outputs,    \
        nvinfer1::IExprBuilder& exprBuilder);                                                                          \
    bool checkShapes(nvinfer1::PluginTensorDesc const* in, InputsType const& layout) const;                            \
    int32_t launch(LaunchArgs const& args) noexcept
