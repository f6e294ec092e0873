/*
 * Shared pieces of the rnnx TensorRT plugins: logging, the field tables that describe each plugin's
 * attributes, parsing of PluginFieldCollections against such a table, and tensor checks.
 */
#pragma once

#include <NvInferRuntime.h>
#include <NvInferVersion.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#define RNNX_PLUGIN_STRINGIFY_EXPANDED(x) #x
//! `x` after macro expansion, as a string literal (NV_TENSORRT_MAJOR -> "10").
#define RNNX_PLUGIN_STRINGIFY(x) RNNX_PLUGIN_STRINGIFY_EXPANDED(x)
//! What precedes the header version in kTENSORRT_HEADERS_MARKER (rnnx.plugins.library_tensorrt_version reads it).
#define RNNX_TENSORRT_HEADERS_MARKER_PREFIX "rnnx-trt-plugins:tensorrt-headers="

namespace rnnx
{
namespace plugin
{

//! Soname of the TensorRT library of the headers compiled against: "libnvinfer.so.<NV_TENSORRT_MAJOR>". A build
//! serves one TensorRT major (TensorRT 11 changed the registry's and the logger's vtables), so the library only
//! uses TensorRT's registry and logger from a library of that major (findLoadedTensorRtSymbol checks the major of
//! where it finds them).
constexpr char const* kTENSORRT_SONAME{"libnvinfer.so." RNNX_PLUGIN_STRINGIFY(NV_TENSORRT_MAJOR)};

//! "rnnx-trt-plugins:tensorrt-headers=<major>.<minor>.<patch>" of the headers compiled against, NUL-terminated:
//! kept in both plugin libraries (rnnx_trt_plugins_tensorrt_version() returns its version part), so that a
//! library's TensorRT major can be read from its bytes without loading it (rnnx.plugins.library_tensorrt_version).
constexpr char kTENSORRT_HEADERS_MARKER[]{RNNX_TENSORRT_HEADERS_MARKER_PREFIX RNNX_PLUGIN_STRINGIFY(
    NV_TENSORRT_MAJOR) "." RNNX_PLUGIN_STRINGIFY(NV_TENSORRT_MINOR) "." RNNX_PLUGIN_STRINGIFY(NV_TENSORRT_PATCH)};
//! Length of RNNX_TENSORRT_HEADERS_MARKER_PREFIX: kTENSORRT_HEADERS_MARKER + this is "<major>.<minor>.<patch>".
constexpr size_t kTENSORRT_HEADERS_MARKER_PREFIX_LENGTH{sizeof(RNNX_TENSORRT_HEADERS_MARKER_PREFIX) - 1};

//! The TensorRT major of a getInferLibVersion() value: (major * 100 + minor) * 100 + patch from TensorRT 10 on
//! (100000 and above), major * 1000 + minor * 100 + patch before (8601 is 8.6.1); -1 for a negative value.
int32_t decodeInferLibMajor(int32_t version) noexcept;

//! The oldest TensorRT major rnnx's plugins are built for (the V3 plugin interfaces; docs/tensorrt.md's gate).
constexpr int32_t kMIN_TENSORRT_MAJOR{10};

//! Empty when `foundMajor`, the major of the TensorRT library that `symbol` was found in (-1: it reports none), is
//! NV_TENSORRT_MAJOR; else the one line saying that the symbol is not used: it names both majors and the command
//! that builds the plugins for the found major (or, below kMIN_TENSORRT_MAJOR, that rnnx needs a newer TensorRT). The
//! library's interfaces (registry, logger) are those of the headers compiled against, whose vtables differ between
//! TensorRT majors, so another major's are never called.
std::string tensorRtMajorMismatch(char const* symbol, int32_t foundMajor);

//! `symbol` of the TensorRT library in this process, looked up (never loaded: RTLD_NOLOAD) in the global scope
//! when `globalScopeFirst`, then in an already loaded kTENSORRT_SONAME, then "libnvinfer.so"; the first scope that
//! has `symbol` decides. nullptr when none has it, and when that scope's TensorRT major (getInferLibMajorVersion,
//! else getInferLibVersion decoded, looked up in the same scope) is not NV_TENSORRT_MAJOR: then
//! tensorRtMajorMismatch's line goes to stderr (no TensorRT logger can be used then), once per process and symbol.
void* findLoadedTensorRtSymbol(char const* symbol, bool globalScopeFirst = false) noexcept;

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

//! Kind of value a field holds. Ints arrive as kINT32 or kINT64, floats as kFLOAT32 or kFLOAT64, strings as kCHAR
//! (how TensorRT's ONNX parser passes a STRING attribute: its characters, a trailing NUL allowed).
enum class FieldKind : int32_t
{
    kINT = 0,
    kFLOAT = 1,
    //! One of a fixed list of strings (FieldDesc::choices); its value is the index in that list.
    kSTRING = 2,
};

//! One row of a plugin's field table: the ONNX attribute name, its kind and default.
struct FieldDesc
{
    char const* name;
    FieldKind kind;
    //! The default value; for kSTRING the index of the default in `choices`.
    double defaultValue;
    //! Required fields have no usable default (hidden_size).
    bool required;
    //! kSTRING only: the accepted strings (update_rule's "linear", "gated", ...), in the order of their indices.
    std::vector<char const*> choices{};
};

//! The PluginField type a field is serialized with and reported as by getFieldNames() (kINT32, kFLOAT32, kCHAR).
nvinfer1::PluginFieldType serializedType(FieldKind kind) noexcept;

//! The field list a creator reports: one PluginField (name, no data, serialized type, length 1) per table row.
std::vector<nvinfer1::PluginField> fieldNames(std::vector<FieldDesc> const& table);

//! Reads `fc` against `table` into `values` (one per row, in table order, ints exactly representable).
//!
//! Errors (logged, returns false): a null name or data, a length other than 1 (a kSTRING field: a negative length),
//! a type the row's kind does not accept, a non-finite float, an int outside int32, a string not among the row's
//! choices, a field given twice, a name not in the table, a required field missing, or, with `requireAll`
//! (deserialisation), any field missing. A kSTRING field's value is the index of its string in the choices.
//! plugin_version / plugin_namespace are accepted as kCHAR when they carry kPLUGIN_VERSION ("2") / "rnnx".
bool parseFields(char const* pluginName, std::vector<FieldDesc> const& table, nvinfer1::PluginFieldCollection const* fc,
    bool requireAll, std::vector<double>& values) noexcept;

//! What a plugin tensor holds; decides the types it may have.
enum class TensorRole : int32_t
{
    //! fp32, fp16 or bf16, the same type as the op's first input.
    kACTIVATION = 0,
    //! Recurrent state, always fp32.
    kSTATE = 1,
    //! Pad mask: int32, non-zero = pad (TensorRT has no bool / uint8 plugin tensors; see supportsRole).
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
