/*
 * The library's list of plugin creators, filled by the op folders themselves: each op's plugin .cpp
 * (plugins/<op>/tensorrt/) registers its creator with one line at namespace scope,
 *
 *   RNNX_REGISTER_PLUGIN_CREATOR(MyOpPluginCreator);
 *
 * so no shared file names an op. getCreators() (librnnx_trt_plugins.so) and the static initialiser of
 * librnnx_trt_plugins_static.so (common/pluginRegistration.cpp) both hand TensorRT registeredCreators().
 *
 * Static initialisation order. The self-registering library walks the list from a static initialiser of
 * pluginRegistration.cpp, another translation unit than the registrars, and C++ does not order dynamic
 * initialisation across translation units. So:
 *  - each registrar object carries __attribute__((init_priority(kCREATOR_REGISTRAR_PRIORITY))). GCC and Clang emit
 *    it to .init_array.<priority>, which the linker sorts ahead of the unprioritised .init_array of every object
 *    in the same shared object; SelfRegistration has no priority, so every registrar of the library has run before
 *    it, whatever the link order;
 *  - a registrar only appends a function pointer to a function-local static list (constructed on first use), so it
 *    depends on no other object's initialisation. The creator itself is a function-local static made when
 *    registeredCreators() first runs (from SelfRegistration or getCreators()), after the list is complete; its
 *    field table is a function-local static too (Plugin::fieldTable()).
 * The registrars live in the object library rnnx_plugin_objects, whose objects are linked whole into both
 * libraries and the test executables (an object library, not a static archive, so none is dropped).
 */
#pragma once

#include <NvInferRuntime.h>

#include <vector>

namespace rnnx
{
namespace plugin
{

//! Priority of the registrars' dynamic initialisation (GCC's init_priority: 101..65535, smaller first; objects
//! without one run after all those with one in the same shared object). Anything below 65535 orders the registrars
//! before SelfRegistration; 200 leaves room below.
#define RNNX_CREATOR_REGISTRAR_PRIORITY 200

//! Returns the library's single instance of one creator (a function-local static).
using CreatorInstanceFn = nvinfer1::IPluginCreatorV3One& (*)();

//! Appends `instance` to the library's creator list; constructed by RNNX_REGISTER_PLUGIN_CREATOR.
struct CreatorRegistrar
{
    explicit CreatorRegistrar(CreatorInstanceFn instance) noexcept;
};

//! Every creator registered in this library, sorted by plugin name then version (a deterministic order whatever
//! the link order). Made on the first call, which must come after static initialisation of the registrars (see the
//! file comment); the vector and the creators live until the library is unloaded.
std::vector<nvinfer1::IPluginCreatorInterface*> const& registeredCreators() noexcept;

} // namespace plugin
} // namespace rnnx

//! Registers `Creator` (a default-constructible IPluginCreatorV3One, named by a plain identifier) in the library's
//! creator list. Use once per creator, at namespace scope of the op's plugin .cpp.
#define RNNX_REGISTER_PLUGIN_CREATOR(Creator)                                                                          \
    namespace                                                                                                          \
    {                                                                                                                  \
    ::nvinfer1::IPluginCreatorV3One& rnnxCreatorInstance##Creator()                                                    \
    {                                                                                                                  \
        static Creator creator;                                                                                        \
        return creator;                                                                                                \
    }                                                                                                                  \
    __attribute__((init_priority(                                                                                      \
        RNNX_CREATOR_REGISTRAR_PRIORITY))) ::rnnx::plugin::CreatorRegistrar const rnnxCreatorRegistrar##Creator{       \
        &rnnxCreatorInstance##Creator};                                                                                \
    }                                                                                                                  \
    static_assert(true, "")
