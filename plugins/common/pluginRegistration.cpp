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
 *    registers both creators under the namespace "rnnx" (what REGISTER_TENSORRT_PLUGIN does, without linking
 *    libnvinfer). It exports no getCreators, so it cannot be registered a second time through loadLibrary's
 *    mechanism. A second dlopen of the same path returns the loaded library and runs no initialiser again.
 *    Without TensorRT in the process (CI) the initialiser finds no registry and does nothing.
 *
 * Neither library links libnvinfer: the registry (self-registering library) and the global logger are found
 * with dlsym, first in the global scope, then in an already loaded libnvinfer (RTLD_NOLOAD; Python loads it
 * with local scope).
 */
#include "linear_attention/tensorrt/causalLinearAttentionPlugin.h"
#include "common/pluginCommon.h"
#include "sru/tensorrt/sruScanPlugin.h"

#ifndef RNNX_PLUGIN_SELF_REGISTER
#error "define RNNX_PLUGIN_SELF_REGISTER: 0 for the getCreators library, 1 for the self-registering one"
#endif

#if RNNX_PLUGIN_SELF_REGISTER
#include <dlfcn.h>
#endif

#define RNNX_PLUGIN_EXPORT __attribute__((visibility("default")))

namespace rnnx
{
namespace plugin
{
namespace
{

SruScanPluginCreator gSruScanCreator;
CausalLinearAttentionPluginCreator gCausalLinearAttentionCreator;
nvinfer1::IPluginCreatorInterface* const gCreators[] = {&gSruScanCreator, &gCausalLinearAttentionCreator};
constexpr int32_t kNB_CREATORS = static_cast<int32_t>(sizeof(gCreators) / sizeof(gCreators[0]));

#if RNNX_PLUGIN_SELF_REGISTER

using GetPluginRegistryFn = nvinfer1::IPluginRegistry* (*)();

//! TensorRT's plugin registry when libnvinfer is loaded in this process, else nullptr.
nvinfer1::IPluginRegistry* findPluginRegistry() noexcept
{
    auto fn = reinterpret_cast<GetPluginRegistryFn>(dlsym(RTLD_DEFAULT, "getPluginRegistry"));
    for (char const* library : {"libnvinfer.so.10", "libnvinfer.so"})
    {
        if (fn != nullptr)
        {
            break;
        }
        if (void* handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD))
        {
            fn = reinterpret_cast<GetPluginRegistryFn>(dlsym(handle, "getPluginRegistry"));
            dlclose(handle);
        }
    }
    return fn != nullptr ? fn() : nullptr;
}

//! Runs once per loaded copy of the library (dlopen of an already loaded path runs no initialiser).
struct SelfRegistration
{
    SelfRegistration() noexcept
    {
        nvinfer1::IPluginRegistry* registry = findPluginRegistry();
        if (registry == nullptr)
        {
            return;
        }
        for (nvinfer1::IPluginCreatorInterface* creator : gCreators)
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

#if !RNNX_PLUGIN_SELF_REGISTER

extern "C" RNNX_PLUGIN_EXPORT nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators)
{
    nbCreators = rnnx::plugin::kNB_CREATORS;
    return rnnx::plugin::gCreators;
}

extern "C" RNNX_PLUGIN_EXPORT void setLoggerFinder(nvinfer1::ILoggerFinder* finder)
{
    rnnx::plugin::setLoggerFinder(finder);
}

#endif // !RNNX_PLUGIN_SELF_REGISTER
