/*
 * The library's entry points and its self-registration.
 *
 * TensorRT finds the creators in three ways, all served by this file:
 *  - IPluginRegistry::loadLibrary (trtexec --staticPlugins / --dynamicPlugins, engines with plugins to
 *    serialize) dlopens the library and calls the exported getCreators() / setLoggerFinder();
 *  - a plain dlopen into a process that already has TensorRT (polygraphy --plugins, ctypes.CDLL) relies on
 *    the static initialiser below, which looks up getPluginRegistry() at run time and registers the creators
 *    under the namespace "rnnx";
 *  - without TensorRT in the process (CI, the ctypes test) the initialiser finds no registry and does nothing.
 * The library never links libnvinfer: the registry is found with dlsym, first in the global scope, then in an
 * already loaded libnvinfer (RTLD_NOLOAD; Python loads it with local scope).
 *
 * Double registration: loadLibrary's dlopen runs the initialiser first, which registers the creators, then
 * loadLibrary registers what getCreators() returns, and a registry refuses a second creator with the same
 * name / version / namespace. So getCreators() first deregisters the creators the initialiser registered and
 * leaves the registration to its caller.
 */
#include "causalLinearAttentionPlugin/causalLinearAttentionPlugin.h"
#include "common/pluginCommon.h"
#include "sruScanPlugin/sruScanPlugin.h"

#include <dlfcn.h>

#include <mutex>

#define RNNX_PLUGIN_EXPORT __attribute__((visibility("default")))

namespace rnnx
{
namespace plugin
{
namespace
{

using GetPluginRegistryFn = nvinfer1::IPluginRegistry* (*)();

SruScanPluginCreator gSruScanCreator;
CausalLinearAttentionPluginCreator gCausalLinearAttentionCreator;
nvinfer1::IPluginCreatorInterface* const gCreators[] = {&gSruScanCreator, &gCausalLinearAttentionCreator};
constexpr int32_t kNB_CREATORS = static_cast<int32_t>(sizeof(gCreators) / sizeof(gCreators[0]));

std::mutex gRegistrationMutex;
//! The registry the initialiser registered creators into (nullptr when none), and which of them it registered.
nvinfer1::IPluginRegistry* gSelfRegistry{nullptr};
bool gSelfRegistered[kNB_CREATORS]{};

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

void registerWithTensorRt() noexcept
{
    std::lock_guard<std::mutex> lock(gRegistrationMutex);
    nvinfer1::IPluginRegistry* registry = findPluginRegistry();
    if (registry == nullptr)
    {
        return;
    }
    gSelfRegistry = registry;
    for (int32_t i = 0; i < kNB_CREATORS; ++i)
    {
        gSelfRegistered[i] = registry->registerCreator(*gCreators[i], kPLUGIN_NAMESPACE);
        if (!gSelfRegistered[i])
        {
            log(Severity::kWARNING, "a creator was not registered (already registered by another copy?)");
        }
    }
}

void deregisterSelfRegistration() noexcept
{
    std::lock_guard<std::mutex> lock(gRegistrationMutex);
    if (gSelfRegistry == nullptr)
    {
        return;
    }
    for (int32_t i = 0; i < kNB_CREATORS; ++i)
    {
        if (gSelfRegistered[i])
        {
            gSelfRegistry->deregisterCreator(*gCreators[i]);
            gSelfRegistered[i] = false;
        }
    }
    gSelfRegistry = nullptr;
}

struct SelfRegistration
{
    SelfRegistration() noexcept
    {
        registerWithTensorRt();
    }
};

SelfRegistration const gSelfRegistration;

} // namespace
} // namespace plugin
} // namespace rnnx

extern "C" RNNX_PLUGIN_EXPORT nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators)
{
    rnnx::plugin::deregisterSelfRegistration();
    nbCreators = rnnx::plugin::kNB_CREATORS;
    return rnnx::plugin::gCreators;
}

extern "C" RNNX_PLUGIN_EXPORT void setLoggerFinder(nvinfer1::ILoggerFinder* finder)
{
    rnnx::plugin::setLoggerFinder(finder);
}
