// Registering the rnnx TensorRT plugin creators once per process: the native twin of Python's
// rnnx.runtime.tensorrt.builder.load_plugin_library / required_creators. TensorRT's
// IPluginRegistry::loadLibrary fails when the library's creators are already registered, so a second
// rnnx_model_open of a TensorRT export, or one after Python (or the application) loaded the library, must not
// call it again. Only the registry interface is used, so the unit is tested with a stand-in registry and no
// TensorRT library (tools/rnnx_trt_plugins_test.cpp).
#pragma once

#include "json.h"

#include <NvInferRuntime.h>

#include <functional>
#include <string>
#include <vector>

namespace rnnx
{

// A plugin creator as IPluginRegistry::getCreator looks it up.
struct PluginCreator
{
    std::string name;
    std::string version;
    std::string plugin_namespace;
};

// The creators an export needs: rnnx.json's "ops" entries, each (name, plugin_version, plugin_namespace), with
// Python's defaults "1" and "rnnx" for the last two; none when there is no "ops". `where` names rnnx.json in
// the Error(RNNX_ERROR_METADATA) thrown for a malformed entry.
std::vector<PluginCreator> required_creators(const Json& metadata, const std::string& where);

// "rnnx::SRUScan v1, rnnx::CausalLinearAttention v1" (Python's _creator_names).
std::string creator_names(const std::vector<PluginCreator>& creators);

// The entries of `creators` that `registry` does not have.
std::vector<PluginCreator> missing_creators(
    nvinfer1::IPluginRegistry& registry, const std::vector<PluginCreator>& creators);

// What precedes the TensorRT headers' version in the marker both plugin libraries keep in their bytes
// (plugins/common/pluginCommon.h kTENSORRT_HEADERS_MARKER): "rnnx-trt-plugins:tensorrt-headers=<major>.<minor>.<patch>"
// and a NUL, the NV_TENSORRT_* of the headers the library was compiled with. Python reads the same marker
// (rnnx.plugins.library_tensorrt_version).
inline constexpr const char* kPluginMarkerPrefix = "rnnx-trt-plugins:tensorrt-headers=";

// The major of the first complete marker in `bytes` (kPluginMarkerPrefix, then "<digits>.<digits>.<digits>" and
// a NUL; an occurrence not followed by that is skipped), or -1 when there is none.
int marker_major(const std::string& bytes);

// The TensorRT major the plugin library at `path` was compiled with, read from the marker in the file's bytes
// (marker_major): the file is read, never loaded, so neither kind of library is opened for the check (a dlopen of
// the self-registering library, whatever its name, registers its creators). -1 when the file has no marker (a
// library built before rnnx recorded it); Error(RNNX_ERROR_BACKEND) naming the file and the reason when it cannot
// be read.
int plugin_library_major(const std::string& path);

// Error(RNNX_ERROR_BACKEND), one line, when the plugin library at `path` was built for another TensorRT major
// than `tensorrt_major` (the loaded libnvinfer's) or does not say which (plugin_library_major's -1); the line
// names both majors and the command that builds the library for `tensorrt_major`. A binary built with the
// headers of one major never drives another: the plugin interfaces' vtables differ between 10 and 11.
void check_plugin_library_major(const std::string& path, int tensorrt_major);

// Registers the creators of the plugin library at `path` once per process; returns loadLibrary's handle, or
// nullptr when the creators were registered by someone else. `tensorrt_major`: the major of the libnvinfer
// loaded (the one `registry` belongs to). In order, under one process-wide lock:
//  - a library whose real path (realpath; the path itself when it has none) this function already loaded or
//    skipped is not loaded again (Error when `creators` names one it did not register);
//  - when every entry of `creators` is already registered, nothing is loaded;
//  - when only some are, Error naming both sets (another rnnx plugin library is loaded, and loadLibrary
//    would fail);
//  - otherwise a file named *_static.so (the self-registering library, which registers its creators when
//    loadLibrary dlopens it, while TensorRT is inside loadLibrary) is refused with a one-line hint, before
//    anything loads it; then check_plugin_library_major(path, tensorrt_major), then registry.loadLibrary(path)
//    once; Error when it returns nullptr or the creators are not registered after it.
// Errors are Error(RNNX_ERROR_BACKEND); `detail`, when given, adds TensorRT's last message to loadLibrary's.
void* load_plugin_library(nvinfer1::IPluginRegistry& registry, const std::string& path,
    const std::vector<PluginCreator>& creators, int tensorrt_major, const std::function<std::string()>& detail = {});

} // namespace rnnx
