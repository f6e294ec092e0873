/*
 * The library's entry points: one registration mechanism per library, chosen at compile time.
 *
 * TensorRT's loaders each use exactly one documented mechanism, so the same sources are built twice
 * (plugins/CMakeLists.txt), with RNNX_PLUGIN_SELF_REGISTER set to 0 or 1:
 *
 *  - 0, librnnx_trt_plugins.so, for IPluginRegistry::loadLibrary (Python: IPluginRegistry.load_library) and
 *    trtexec --dynamicPlugins: the loader dlopens the library, calls the exported setLoggerFinder() and
 *    getCreators(), and registers what getCreators() returns. Loading this library registers nothing by
 *    itself: no static initialiser touches a registry, so nothing is registered while the registry is inside
 *    loadLibrary, and each creator is registered exactly once, by the loader.
 *  - 1, librnnx_trt_plugins_static.so, for loaders that only dlopen (trtexec --staticPlugins,
 *    polygraphy --plugins, ctypes.CDLL): a static initialiser looks up getPluginRegistry() at load time and
 *    registers every creator under the namespace "rnnx" (what REGISTER_TENSORRT_PLUGIN does, without linking
 *    libnvinfer). It exports no getCreators, so it cannot be registered a second time through loadLibrary's
 *    mechanism. A second dlopen of the same path returns the loaded library and runs no initialiser again.
 *    Without TensorRT in the process (CI) the initialiser finds no registry and does nothing; with a TensorRT of
 *    another major than the headers' it registers nothing and says so on stderr.
 *
 * The creators are those the op folders register (RNNX_REGISTER_PLUGIN_CREATOR in the plugin .cpp of
 * plugins/<op>/tensorrt/, common/pluginRegistry.h), sorted by plugin name; this file names no op. pluginRegistry.h
 * explains why the list is complete before SelfRegistration below walks it (the registrars' init_priority).
 *
 * Neither library links libnvinfer: the registry (self-registering library: first in the global scope) and the
 * global logger are found with dlsym in an already loaded libnvinfer (kTENSORRT_SONAME, RTLD_NOLOAD; Python loads
 * it with local scope), and used only when the TensorRT major of where they were found (getInferLibMajorVersion or
 * getInferLibVersion there) is the one compiled against (findLoadedTensorRtSymbol).
 *
 * Both libraries export rnnx_trt_plugins_tensorrt_major() and rnnx_trt_plugins_tensorrt_version(): the TensorRT
 * headers they were compiled against. TensorRT 11 changed the vtables of IPluginRegistry and ILogger, so a library
 * serves one TensorRT major only; loaders compare these (or the marker string, read from the file) with the
 * TensorRT in the process before loading.
 */
#include "common/pluginCommon.h"
#include "common/pluginRegistry.h"

#ifndef RNNX_PLUGIN_SELF_REGISTER
#error "define RNNX_PLUGIN_SELF_REGISTER: 0 for the getCreators library, 1 for the self-registering one"
#endif

#define RNNX_PLUGIN_EXPORT __attribute__((visibility("default")))

namespace rnnx
{
namespace plugin
{
namespace
{

#if RNNX_PLUGIN_SELF_REGISTER

using GetPluginRegistryFn = nvinfer1::IPluginRegistry* (*)();

//! TensorRT's plugin registry when libnvinfer of the major compiled against is loaded in this process, else
//! nullptr: getPluginRegistry is looked up in the global scope (trtexec links libnvinfer), then in an already loaded
//! libnvinfer; when the TensorRT it comes from is of another major, it is not called (its registry's vtable is not
//! the one compiled against) and one line on stderr says so (findLoadedTensorRtSymbol).
nvinfer1::IPluginRegistry* findPluginRegistry() noexcept
{
    auto const fn = reinterpret_cast<GetPluginRegistryFn>(findLoadedTensorRtSymbol("getPluginRegistry", true));
    return fn != nullptr ? fn() : nullptr;
}

//! Runs once per loaded copy of the library (dlopen of an already loaded path runs no initialiser). Unprioritised, so
//! after every creator registrar of the library (pluginRegistry.h).
struct SelfRegistration
{
    SelfRegistration() noexcept
    {
        nvinfer1::IPluginRegistry* registry = findPluginRegistry();
        if (registry == nullptr)
        {
            return;
        }
        for (nvinfer1::IPluginCreatorInterface* creator : registeredCreators())
        {
            if (!registry->registerCreator(*creator, kPLUGIN_NAMESPACE))
            {
                log(Severity::kWARNING,
                    "a creator was not registered: the registry already has one of that name, version and namespace "
                    "(another copy of the rnnx plugin library is loaded)");
            }
        }
    }
};

SelfRegistration const gSelfRegistration;

#endif // RNNX_PLUGIN_SELF_REGISTER

} // namespace
} // namespace plugin
} // namespace rnnx

//! NV_TENSORRT_MAJOR of the headers this library was compiled against (exported by both libraries).
extern "C" RNNX_PLUGIN_EXPORT int32_t rnnx_trt_plugins_tensorrt_major()
{
    return NV_TENSORRT_MAJOR;
}

//! "<major>.<minor>.<patch>" of the headers compiled against: the version part of kTENSORRT_HEADERS_MARKER, which this
//! keeps in the binary (rnnx.plugins.library_tensorrt_version reads the marker from the file without loading it).
extern "C" RNNX_PLUGIN_EXPORT char const* rnnx_trt_plugins_tensorrt_version()
{
    return rnnx::plugin::kTENSORRT_HEADERS_MARKER + rnnx::plugin::kTENSORRT_HEADERS_MARKER_PREFIX_LENGTH;
}

#if !RNNX_PLUGIN_SELF_REGISTER

extern "C" RNNX_PLUGIN_EXPORT nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators)
{
    std::vector<nvinfer1::IPluginCreatorInterface*> const& creators = rnnx::plugin::registeredCreators();
    nbCreators = static_cast<int32_t>(creators.size());
    return creators.data();
}

extern "C" RNNX_PLUGIN_EXPORT void setLoggerFinder(nvinfer1::ILoggerFinder* finder)
{
    rnnx::plugin::setLoggerFinder(finder);
}

#endif // !RNNX_PLUGIN_SELF_REGISTER
