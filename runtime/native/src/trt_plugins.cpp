#include "trt_plugins.h"

#include "error.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace rnnx
{
namespace
{

constexpr const char* kDefaultVersion = "1";
constexpr const char* kDefaultNamespace = "rnnx"; // rnnx.runtime.tensorrt.builder.RNNX_DOMAIN

// One text field of an "ops" entry: a string, an integer (Python's str() of it), or `fallback` when absent.
std::string text_field(const Json& entry, const char* key, const char* fallback, const std::string& where)
{
    const Json* value = entry.find(key);
    if (value == nullptr || value->is_null())
    {
        if (fallback == nullptr)
            throw Error(RNNX_ERROR_METADATA, where + ": an 'ops' entry has no '" + key + "'");
        return fallback;
    }
    if (value->is_string())
        return value->as_string();
    if (value->is_number())
        return std::to_string(value->as_int());
    throw Error(RNNX_ERROR_METADATA, where + ": an 'ops' entry's '" + key + "' is not a string");
}

std::string real_path(const std::string& path)
{
    char resolved[PATH_MAX];
    return ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

bool ends_with(const std::string& text, const std::string& suffix)
{
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The command that builds the loadLibrary kind of the plugin library for TensorRT `major`.
std::string build_command(int major)
{
    return "TENSORRT_ROOT=<TensorRT " + std::to_string(major)
        + " dir> python -m rnnx.plugins --kind load_library --major " + std::to_string(major);
}

// What this process loaded (or found registered by someone else: nullptr), by real path.
std::mutex loaded_mutex;
std::map<std::string, void*> loaded;

} // namespace

std::vector<PluginCreator> required_creators(const Json& metadata, const std::string& where)
{
    std::vector<PluginCreator> out;
    const Json* ops = metadata.find("ops");
    if (ops == nullptr || ops->is_null())
        return out;
    if (!ops->is_array())
        throw Error(RNNX_ERROR_METADATA, where + ": field 'ops' is not a list");
    for (const Json& entry : ops->items())
    {
        if (!entry.is_object())
            throw Error(RNNX_ERROR_METADATA, where + ": an 'ops' entry is not an object");
        try
        {
            out.push_back(
                {text_field(entry, "name", nullptr, where), text_field(entry, "plugin_version", kDefaultVersion, where),
                    text_field(entry, "plugin_namespace", kDefaultNamespace, where)});
        }
        catch (const JsonError& e)
        {
            throw Error(RNNX_ERROR_METADATA, where + ": an 'ops' entry: " + e.what());
        }
    }
    return out;
}

std::string creator_names(const std::vector<PluginCreator>& creators)
{
    std::string out;
    for (const PluginCreator& c : creators)
        out += (out.empty() ? "" : ", ") + c.plugin_namespace + "::" + c.name + " v" + c.version;
    return out;
}

std::vector<PluginCreator> missing_creators(
    nvinfer1::IPluginRegistry& registry, const std::vector<PluginCreator>& creators)
{
    std::vector<PluginCreator> out;
    for (const PluginCreator& c : creators)
        if (registry.getCreator(c.name.c_str(), c.version.c_str(), c.plugin_namespace.c_str()) == nullptr)
            out.push_back(c);
    return out;
}

int marker_major(const std::string& bytes)
{
    const std::string prefix = kPluginMarkerPrefix;
    for (size_t at = bytes.find(prefix); at != std::string::npos; at = bytes.find(prefix, at + 1))
    {
        // "<major>.<minor>.<patch>\0" after the prefix (Python's _MARKER_PATTERN); else the next occurrence.
        size_t i = at + prefix.size();
        int major = -1;
        bool ok = true;
        for (int part = 0; part < 3 && ok; ++part)
        {
            const size_t first = i;
            while (i < bytes.size() && bytes[i] >= '0' && bytes[i] <= '9')
                ++i;
            ok = i > first && i - first <= 9 && i < bytes.size() && bytes[i] == (part < 2 ? '.' : '\0');
            if (ok && part == 0)
                major = std::stoi(bytes.substr(first, i - first));
            ++i;
        }
        if (ok)
            return major;
    }
    return -1;
}

int plugin_library_major(const std::string& path)
{
    std::string bytes;
    std::FILE* file = std::fopen(path.c_str(), "rb");
    int why = file == nullptr ? errno : 0;
    if (file != nullptr)
    {
        char buffer[1 << 16];
        size_t n = 0;
        while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
            bytes.append(buffer, n);
        if (std::ferror(file))
            why = errno != 0 ? errno : EIO;
        std::fclose(file);
    }
    if (file == nullptr || why != 0)
        throw Error(RNNX_ERROR_BACKEND,
            path + ": cannot be read to find the TensorRT major it was built for (" + std::strerror(why) + ")");
    return marker_major(bytes);
}

void check_plugin_library_major(const std::string& path, int tensorrt_major)
{
    const int built = plugin_library_major(path);
    if (built == -1)
        throw Error(RNNX_ERROR_BACKEND,
            path
                + ": built before rnnx recorded its TensorRT major (it has no rnnx-trt-plugins:tensorrt-headers "
                  "marker): rebuild it for TensorRT "
                + std::to_string(tensorrt_major) + ": " + build_command(tensorrt_major));
    if (built != tensorrt_major)
        throw Error(RNNX_ERROR_BACKEND,
            path + ": built for TensorRT " + std::to_string(built) + ", but the TensorRT loaded is "
                + std::to_string(tensorrt_major) + ": build the plugins for TensorRT " + std::to_string(tensorrt_major)
                + ": " + build_command(tensorrt_major));
}

void* load_plugin_library(nvinfer1::IPluginRegistry& registry, const std::string& path,
    const std::vector<PluginCreator>& creators, int tensorrt_major, const std::function<std::string()>& detail)
{
    const std::string key = real_path(path);
    std::lock_guard<std::mutex> lock(loaded_mutex);
    const auto done = loaded.find(key);
    if (done != loaded.end())
    {
        const std::vector<PluginCreator> missing = missing_creators(registry, creators);
        if (!missing.empty())
            throw Error(RNNX_ERROR_BACKEND,
                path + ": loaded before in this process, but " + creator_names(missing)
                    + " not registered: the export needs a newer plugin library");
        return done->second;
    }
    const std::vector<PluginCreator> missing = missing_creators(registry, creators);
    if (!creators.empty() && missing.empty())
    {
        loaded[key] = nullptr;
        return nullptr;
    }
    if (missing.size() != creators.size())
    {
        std::vector<PluginCreator> present;
        for (const PluginCreator& c : creators)
            if (registry.getCreator(c.name.c_str(), c.version.c_str(), c.plugin_namespace.c_str()) != nullptr)
                present.push_back(c);
        throw Error(RNNX_ERROR_BACKEND,
            path + ": " + creator_names(present) + " already registered but " + creator_names(missing)
                + " not: another rnnx plugin library is loaded in this process, and TensorRT's loadLibrary would "
                  "fail");
    }
    // The self-registering library registers its creators when it is loaded, also inside loadLibrary (which
    // dlopens it before it finds no getCreators): refused before anything opens it.
    if (ends_with(path, "_static.so"))
        throw Error(RNNX_ERROR_BACKEND,
            path
                + ": not loaded: the self-registering library is for plain dlopen; loadLibrary takes "
                  "librnnx_trt_plugins.so");
    check_plugin_library_major(path, tensorrt_major);
    void* handle = registry.loadLibrary(path.c_str());
    if (handle == nullptr)
    {
        const std::string why = detail ? detail() : std::string();
        throw Error(RNNX_ERROR_BACKEND,
            path + ": TensorRT could not load the plugin library" + (why.empty() ? "" : ": " + why));
    }
    const std::vector<PluginCreator> still_missing = missing_creators(registry, creators);
    if (!still_missing.empty())
        throw Error(
            RNNX_ERROR_BACKEND, path + ": loaded, but " + creator_names(still_missing) + " not registered by it");
    loaded[key] = handle;
    return handle;
}

} // namespace rnnx
