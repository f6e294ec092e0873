/*
 * Shared pieces of the rnnx TensorRT plugins: logging, the field tables that describe each plugin's
 * attributes, parsing of PluginFieldCollections against such a table, and tensor checks.
 */
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rnnx
{
namespace plugin
{

//! Namespace and version every rnnx plugin carries (runtime/contract/ops.py: PLUGIN_NAMESPACE, PLUGIN_VERSION).
constexpr char const* kPLUGIN_NAMESPACE{"rnnx"};
constexpr char const* kPLUGIN_VERSION{"2"};
//! Node attributes the ONNX parser may hand over as fields; accepted (value checked) and otherwise ignored.
constexpr char const* kPLUGIN_VERSION_FIELD{"plugin_version"};
constexpr char const* kPLUGIN_NAMESPACE_FIELD{"plugin_namespace"};

using Severity = nvinfer1::ILogger::Severity;

//! Where messages go instead of a TensorRT logger (tests count errors with it); nullptr restores the default.
using LogSink = void (*)(Severity severity, char const* message);
void setLogSink(LogSink sink) noexcept;
//! The finder a TensorRT loader hands over through the exported setLoggerFinder().
void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept;
//! Sends a message to the sink, else the finder's logger, else TensorRT's global logger, else stderr (errors only).
void log(Severity severity, std::string const& message) noexcept;
void logError(std::string const& message) noexcept;

//! Kind of value a field holds. Ints arrive as kINT32 or kINT64, floats as kFLOAT32 or kFLOAT64.
enum class FieldKind : int32_t
{
    kINT = 0,
    kFLOAT = 1,
};

//! One row of a plugin's field table: the ONNX attribute name, its kind and default.
struct FieldDesc
{
    char const* name;
    FieldKind kind;
    double defaultValue;
    //! Required fields have no usable default (hidden_size).
    bool required;
};

//! The PluginField type a field is serialized with and reported as by getFieldNames().
nvinfer1::PluginFieldType serializedType(FieldKind kind) noexcept;

//! The field list a creator reports: one PluginField (name, no data, serialized type, length 1) per table row.
std::vector<nvinfer1::PluginField> fieldNames(std::vector<FieldDesc> const& table);

//! Reads `fc` against `table` into `values` (one per row, in table order, ints exactly representable).
//!
//! Errors (logged, returns false): a null name or data, a length other than 1, a type the row's kind does not
//! accept, a non-finite float, an int outside int32, a field given twice, a name not in the table, a required
//! field missing, or, with `requireAll` (deserialisation), any field missing. plugin_version / plugin_namespace
//! are accepted as kCHAR when they carry kPLUGIN_VERSION ("2") / "rnnx".
bool parseFields(char const* pluginName, std::vector<FieldDesc> const& table, nvinfer1::PluginFieldCollection const* fc,
    bool requireAll, std::vector<double>& values) noexcept;

//! What a plugin tensor holds; decides the types it may have.
enum class TensorRole : int32_t
{
    //! fp32, fp16 or bf16, the same type as the op's first input.
    kACTIVATION = 0,
    //! Recurrent state, always fp32.
    kSTATE = 1,
    //! Pad mask: bool or uint8, non-zero = pad.
    kMASK = 2,
};

//! supportsFormatCombination for one tensor: linear format and a type allowed for `role`.
bool supportsRole(
    TensorRole role, nvinfer1::PluginTensorDesc const& desc, nvinfer1::PluginTensorDesc const& firstInput) noexcept;

//! Whether `type` is an activation type the kernels take (fp32, fp16, bf16).
bool isActivationType(nvinfer1::DataType type) noexcept;

//! Product of the first `nbDims` extents of `dims`, or -1 when any of them is negative.
int64_t volume(nvinfer1::Dims const& dims) noexcept;

//! "(a, b, c)" for messages.
std::string toString(nvinfer1::Dims const& dims);

} // namespace plugin
} // namespace rnnx
