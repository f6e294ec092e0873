#include "pluginCommon.h"
#include "pluginRegistry.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>

namespace rnnx
{
namespace plugin
{
namespace
{

std::atomic<LogSink> gLogSink{nullptr};
std::atomic<nvinfer1::ILoggerFinder*> gLoggerFinder{nullptr};

using GetLoggerFn = nvinfer1::ILogger* (*)();

//! TensorRT's global logger when libnvinfer of the major compiled against is in the process (looked up, never
//! linked; findLoadedTensorRtSymbol refuses another major's). The symbol is looked up in libnvinfer itself (already
//! loaded: RTLD_NOLOAD), never in the global scope, where "getLogger" may be some other library's function (and
//! where a Python process's RTLD_LOCAL libnvinfer is not).
nvinfer1::ILogger* globalTensorRtLogger() noexcept
{
    auto const fn = reinterpret_cast<GetLoggerFn>(findLoadedTensorRtSymbol("getLogger"));
    return fn != nullptr ? fn() : nullptr;
}

//! The TensorRT major of the library `scope` finds getInferLibMajorVersion / getInferLibVersion in, -1 when neither.
int32_t tensorRtMajorOf(void* scope) noexcept
{
    using VersionFn = int32_t (*)();
    if (auto const major = reinterpret_cast<VersionFn>(dlsym(scope, "getInferLibMajorVersion")))
    {
        return major();
    }
    auto const packed = reinterpret_cast<VersionFn>(dlsym(scope, "getInferLibVersion"));
    return packed != nullptr ? decodeInferLibMajor(packed()) : -1;
}

//! tensorRtMajorMismatch's line on stderr, once per process for each symbol (the logger lookup runs per message).
void reportMismatchOnce(char const* symbol, int32_t major) noexcept
{
    static std::mutex mutex;
    static std::set<std::string> reported;
    try
    {
        std::lock_guard<std::mutex> const lock(mutex);
        if (reported.insert(symbol).second)
        {
            std::fprintf(stderr, "%s\n", tensorRtMajorMismatch(symbol, major).c_str());
        }
    }
    catch (...)
    {
    }
}

bool isIntType(nvinfer1::PluginFieldType type) noexcept
{
    return type == nvinfer1::PluginFieldType::kINT32 || type == nvinfer1::PluginFieldType::kINT64;
}

bool isFloatType(nvinfer1::PluginFieldType type) noexcept
{
    return type == nvinfer1::PluginFieldType::kFLOAT32 || type == nvinfer1::PluginFieldType::kFLOAT64;
}

//! Reads a field the ONNX parser passes as kCHAR (plugin_version / plugin_namespace): `length` chars, NUL allowed.
bool checkStringField(char const* pluginName, nvinfer1::PluginField const& field, char const* expected) noexcept
{
    if (field.type != nvinfer1::PluginFieldType::kCHAR || field.data == nullptr || field.length < 0)
    {
        logError(std::string(pluginName) + ": field '" + field.name + "' must be a kCHAR string");
        return false;
    }
    std::string value(static_cast<char const*>(field.data), static_cast<size_t>(field.length));
    value = value.substr(0, value.find('\0'));
    if (value != expected)
    {
        logError(
            std::string(pluginName) + ": field '" + field.name + "' is '" + value + "', expected '" + expected + "'");
        return false;
    }
    return true;
}

//! A field's single value as Wide: stored as Narrow when its type is `narrowType` (kINT32, kFLOAT32), else as Wide.
template <typename Narrow, typename Wide>
Wide readScalar(nvinfer1::PluginField const& field, nvinfer1::PluginFieldType narrowType) noexcept
{
    if (field.type == narrowType)
    {
        Narrow narrow{};
        std::memcpy(&narrow, field.data, sizeof(narrow));
        return static_cast<Wide>(narrow);
    }
    Wide wide{};
    std::memcpy(&wide, field.data, sizeof(wide));
    return wide;
}

//! A kSTRING field: kCHAR, `length` characters up to the first NUL, one of the row's choices -> its index.
bool readChoice(std::string const& where, FieldDesc const& desc, nvinfer1::PluginField const& field, double& value)
{
    if (field.type != nvinfer1::PluginFieldType::kCHAR || field.data == nullptr || field.length < 0)
    {
        logError(where + " must be a kCHAR string, got PluginFieldType "
            + std::to_string(static_cast<int32_t>(field.type)) + " of length " + std::to_string(field.length));
        return false;
    }
    std::string text(static_cast<char const*>(field.data), static_cast<size_t>(field.length));
    text = text.substr(0, text.find('\0'));
    std::string expected;
    for (size_t i = 0; i < desc.choices.size(); ++i)
    {
        if (text == desc.choices[i])
        {
            value = static_cast<double>(i);
            return true;
        }
        expected += (i > 0 ? " | " : "") + std::string(desc.choices[i]);
    }
    logError(where + " is '" + text + "', expected one of " + expected);
    return false;
}

bool readValue(char const* pluginName, FieldDesc const& desc, nvinfer1::PluginField const& field, double& value)
{
    std::string const where = std::string(pluginName) + ": field '" + desc.name + "'";
    if (desc.kind == FieldKind::kSTRING)
    {
        return readChoice(where, desc, field, value);
    }
    if (field.data == nullptr || field.length != 1)
    {
        logError(where + " must hold exactly one value (length " + std::to_string(field.length) + ")");
        return false;
    }
    if (desc.kind == FieldKind::kINT)
    {
        if (!isIntType(field.type))
        {
            logError(where + " must be kINT32 or kINT64, got PluginFieldType "
                + std::to_string(static_cast<int32_t>(field.type)));
            return false;
        }
        int64_t const v = readScalar<int32_t, int64_t>(field, nvinfer1::PluginFieldType::kINT32);
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        {
            logError(where + " is out of the int32 range: " + std::to_string(v));
            return false;
        }
        value = static_cast<double>(v);
        return true;
    }
    if (!isFloatType(field.type))
    {
        logError(where + " must be kFLOAT32 or kFLOAT64, got PluginFieldType "
            + std::to_string(static_cast<int32_t>(field.type)));
        return false;
    }
    value = readScalar<float, double>(field, nvinfer1::PluginFieldType::kFLOAT32);
    if (!std::isfinite(value) || std::fabs(value) > std::numeric_limits<float>::max())
    {
        logError(where + " must be a finite fp32 value");
        return false;
    }
    return true;
}

} // namespace

int32_t decodeInferLibMajor(int32_t version) noexcept
{
    if (version < 0)
    {
        return -1;
    }
    return version >= 100000 ? version / 10000 : version / 1000;
}

std::string tensorRtMajorMismatch(char const* symbol, int32_t foundMajor)
{
    if (foundMajor == NV_TENSORRT_MAJOR)
    {
        return {};
    }
    std::string const headers = std::to_string(NV_TENSORRT_MAJOR);
    if (foundMajor < 0)
    {
        return std::string("[rnnx plugins] ") + symbol
            + " not used: the TensorRT library that has it reports no version (no getInferLibMajorVersion or "
              "getInferLibVersion), and this plugin library was built against TensorRT "
            + headers + " headers";
    }
    std::string const found = std::to_string(foundMajor);
    std::string const line = std::string("[rnnx plugins] ") + symbol + " not used: the TensorRT in this process is "
        + found + ", but this plugin library was built against TensorRT " + headers + " headers";
    if (foundMajor < kMIN_TENSORRT_MAJOR)
    {
        return line + ": rnnx's plugins need TensorRT " + std::to_string(kMIN_TENSORRT_MAJOR) + " or newer";
    }
    return line + ": build the plugins for TensorRT " + found + ": TENSORRT_ROOT=<TensorRT " + found
        + " dir> python -m rnnx.plugins --major " + found;
}

void* findLoadedTensorRtSymbol(char const* symbol, bool globalScopeFirst) noexcept
{
    void* address{nullptr};
    int32_t major{-1};
    auto const lookUp = [&](void* scope)
    {
        address = dlsym(scope, symbol);
        if (address != nullptr)
        {
            major = tensorRtMajorOf(scope);
        }
        return address != nullptr;
    };
    bool found = globalScopeFirst && lookUp(RTLD_DEFAULT);
    for (char const* library : {kTENSORRT_SONAME, "libnvinfer.so"})
    {
        if (found)
        {
            break;
        }
        if (void* handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD))
        {
            found = lookUp(handle);
            dlclose(handle); // drops the reference RTLD_NOLOAD took; the library stays loaded
        }
    }
    if (!found)
    {
        return nullptr;
    }
    if (major != NV_TENSORRT_MAJOR)
    {
        reportMismatchOnce(symbol, major);
        return nullptr;
    }
    return address;
}

void setLogSink(LogSink sink) noexcept
{
    gLogSink.store(sink);
}

void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept
{
    gLoggerFinder.store(finder);
}

void log(Severity severity, std::string const& message) noexcept
{
    try
    {
        std::string const text = "[rnnx plugins] " + message;
        if (LogSink const sink = gLogSink.load())
        {
            sink(severity, text.c_str());
            return;
        }
        nvinfer1::ILogger* logger{nullptr};
        if (nvinfer1::ILoggerFinder* const finder = gLoggerFinder.load())
        {
            logger = finder->findLogger();
        }
        if (logger == nullptr)
        {
            logger = globalTensorRtLogger();
        }
        if (logger != nullptr)
        {
            logger->log(severity, text.c_str());
        }
        else if (severity <= Severity::kERROR)
        {
            std::fprintf(stderr, "%s\n", text.c_str());
        }
    }
    catch (...)
    {
    }
}

void logError(std::string const& message) noexcept
{
    log(Severity::kERROR, message);
}

nvinfer1::PluginFieldType serializedType(FieldKind kind) noexcept
{
    switch (kind)
    {
    case FieldKind::kINT: return nvinfer1::PluginFieldType::kINT32;
    case FieldKind::kFLOAT: return nvinfer1::PluginFieldType::kFLOAT32;
    case FieldKind::kSTRING: return nvinfer1::PluginFieldType::kCHAR;
    }
    return nvinfer1::PluginFieldType::kUNKNOWN;
}

std::vector<nvinfer1::PluginField> fieldNames(std::vector<FieldDesc> const& table)
{
    std::vector<nvinfer1::PluginField> fields;
    fields.reserve(table.size());
    for (FieldDesc const& desc : table)
    {
        fields.emplace_back(desc.name, nullptr, serializedType(desc.kind), 1);
    }
    return fields;
}

bool parseFields(char const* pluginName, std::vector<FieldDesc> const& table, nvinfer1::PluginFieldCollection const* fc,
    bool requireAll, std::vector<double>& values) noexcept
{
    try
    {
        int32_t const nbFields = fc != nullptr ? fc->nbFields : 0;
        if (nbFields < 0 || (nbFields > 0 && fc->fields == nullptr))
        {
            logError(std::string(pluginName) + ": malformed PluginFieldCollection (nbFields " + std::to_string(nbFields)
                + ")");
            return false;
        }
        values.assign(table.size(), 0.0);
        std::vector<bool> seen(table.size(), false);
        for (int32_t i = 0; i < nbFields; ++i)
        {
            nvinfer1::PluginField const& field = fc->fields[i];
            if (field.name == nullptr)
            {
                logError(std::string(pluginName) + ": field " + std::to_string(i) + " has no name");
                return false;
            }
            if (std::strcmp(field.name, kPLUGIN_VERSION_FIELD) == 0)
            {
                if (!checkStringField(pluginName, field, kPLUGIN_VERSION))
                {
                    return false;
                }
                continue;
            }
            if (std::strcmp(field.name, kPLUGIN_NAMESPACE_FIELD) == 0)
            {
                if (!checkStringField(pluginName, field, kPLUGIN_NAMESPACE))
                {
                    return false;
                }
                continue;
            }
            size_t row = 0;
            while (row < table.size() && std::strcmp(field.name, table[row].name) != 0)
            {
                ++row;
            }
            if (row == table.size())
            {
                logError(std::string(pluginName) + ": unknown field '" + field.name + "'");
                return false;
            }
            if (seen[row])
            {
                logError(std::string(pluginName) + ": field '" + field.name + "' given twice");
                return false;
            }
            if (!readValue(pluginName, table[row], field, values[row]))
            {
                return false;
            }
            seen[row] = true;
        }
        for (size_t row = 0; row < table.size(); ++row)
        {
            if (seen[row])
            {
                continue;
            }
            if (table[row].required || requireAll)
            {
                logError(std::string(pluginName) + ": missing field '" + table[row].name + "'");
                return false;
            }
            values[row] = table[row].defaultValue;
        }
        return true;
    }
    catch (...)
    {
        logError(std::string(pluginName) + ": could not read the plugin fields");
        return false;
    }
}

bool isActivationType(nvinfer1::DataType type) noexcept
{
    return type == nvinfer1::DataType::kFLOAT || type == nvinfer1::DataType::kHALF || type == nvinfer1::DataType::kBF16;
}

bool supportsRole(
    TensorRole role, nvinfer1::PluginTensorDesc const& desc, nvinfer1::PluginTensorDesc const& firstInput) noexcept
{
    if (desc.format != nvinfer1::TensorFormat::kLINEAR)
    {
        return false;
    }
    switch (role)
    {
    case TensorRole::kACTIVATION: return isActivationType(desc.type) && desc.type == firstInput.type;
    case TensorRole::kSTATE: return desc.type == nvinfer1::DataType::kFLOAT;
    // int32 only. TensorRT does not support bool / uint8 plugin tensors ("DataType:kBOOL and DataType::kUINT8
    // are not supported", PluginTensorDesc::type in NvInferRuntimePlugin.h, 10.x and 11.x): a plugin input of
    // either type fails to build ("could not find any supported formats consistent with input/output data
    // types"). So the TensorRT export casts every mask to int32 (export/onnx_ops/translate.py), and the plugins
    // advertise only what TensorRT can hand them rather than types it never will.
    case TensorRole::kMASK: return desc.type == nvinfer1::DataType::kINT32;
    }
    return false;
}

int64_t volume(nvinfer1::Dims const& dims) noexcept
{
    if (dims.nbDims < 0 || dims.nbDims > nvinfer1::Dims::MAX_DIMS)
    {
        return -1;
    }
    int64_t v = 1;
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        if (dims.d[i] < 0)
        {
            return -1;
        }
        v *= dims.d[i];
    }
    return v;
}

std::string toString(nvinfer1::Dims const& dims)
{
    std::ostringstream out;
    out << "(";
    for (int32_t i = 0; i < dims.nbDims && i < nvinfer1::Dims::MAX_DIMS; ++i)
    {
        out << (i > 0 ? ", " : "") << dims.d[i];
    }
    out << ")";
    return out.str();
}

namespace
{

//! The registrars' list (function-local static: usable from any static initialiser, pluginRegistry.h).
std::vector<CreatorInstanceFn>& creatorInstances() noexcept
{
    static std::vector<CreatorInstanceFn> instances;
    return instances;
}

} // namespace

CreatorRegistrar::CreatorRegistrar(CreatorInstanceFn instance) noexcept
{
    try
    {
        creatorInstances().push_back(instance);
    }
    catch (...)
    {
        log(Severity::kERROR, "out of memory while listing the plugin creators");
    }
}

std::vector<nvinfer1::IPluginCreatorInterface*> const& registeredCreators() noexcept
{
    static std::vector<nvinfer1::IPluginCreatorInterface*> const creators = []
    {
        std::vector<nvinfer1::IPluginCreatorV3One*> sorted;
        for (CreatorInstanceFn instance : creatorInstances())
        {
            sorted.push_back(&instance());
        }
        std::sort(sorted.begin(), sorted.end(),
            [](nvinfer1::IPluginCreatorV3One const* a, nvinfer1::IPluginCreatorV3One const* b)
            {
                int const byName = std::strcmp(a->getPluginName(), b->getPluginName());
                return byName != 0 ? byName < 0 : std::strcmp(a->getPluginVersion(), b->getPluginVersion()) < 0;
            });
        return std::vector<nvinfer1::IPluginCreatorInterface*>(sorted.begin(), sorted.end());
    }();
    return creators;
}

} // namespace plugin
} // namespace rnnx
