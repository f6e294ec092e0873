/*
 * Loads librnnx_trt_plugins.so the way IPluginRegistry::loadLibrary does: dlopen, the exported
 * setLoggerFinder() and getCreators(), then one plugin from each creator.
 *
 * This executable exports a getPluginRegistry() returning a registry test double (no real registry exists
 * without the TensorRT library), so the library's self-registration on dlopen and its hand-over in
 * getCreators() (deregistering, so that loadLibrary can register without duplicates) are checked too.
 * Usage: rnnx_plugin_library_test <path to librnnx_trt_plugins.so>
 */
#include <NvInferRuntime.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

//! What the library looks up with dlsym(RTLD_DEFAULT) to find TensorRT (exported from this executable).
extern "C" __attribute__((visibility("default"))) nvinfer1::IPluginRegistry* getPluginRegistry() noexcept;

namespace
{

using GetCreatorsFn = nvinfer1::IPluginCreatorInterface* const* (*)(int32_t&);
using SetLoggerFinderFn = void (*)(nvinfer1::ILoggerFinder*);

int gFailures = 0;
int gChecks = 0;

void check(bool ok, char const* what)
{
    ++gChecks;
    if (!ok)
    {
        ++gFailures;
        std::printf("FAILED %s\n", what);
    }
}

//! Test double of TensorRT's plugin registry: records V3 creator registrations.
class RegistryDouble : public nvinfer1::IPluginRegistry
{
public:
    bool registerCreator(nvinfer1::IPluginCreator&, char const* const) noexcept override
    {
        return false;
    }
    nvinfer1::IPluginCreator* const* getPluginCreatorList(int32_t* const n) const noexcept override
    {
        *n = 0;
        return nullptr;
    }
    nvinfer1::IPluginCreator* getPluginCreator(
        char const* const, char const* const, char const* const) noexcept override
    {
        return nullptr;
    }
    void setErrorRecorder(nvinfer1::IErrorRecorder* const) noexcept override {}
    nvinfer1::IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return nullptr;
    }
    bool deregisterCreator(nvinfer1::IPluginCreator const&) noexcept override
    {
        return false;
    }
    bool isParentSearchEnabled() const override
    {
        return false;
    }
    void setParentSearchEnabled(bool const) override {}
    PluginLibraryHandle loadLibrary(char const*) noexcept override
    {
        return nullptr;
    }
    void deregisterLibrary(PluginLibraryHandle) noexcept override {}
    bool registerCreator(nvinfer1::IPluginCreatorInterface& creator, char const* const ns) noexcept override
    {
        for (auto* c : registered)
        {
            if (c == &creator)
            {
                return false;
            }
        }
        registered.push_back(&creator);
        namespaces.emplace_back(ns != nullptr ? ns : "");
        return true;
    }
    nvinfer1::IPluginCreatorInterface* const* getAllCreators(int32_t* const n) const noexcept override
    {
        *n = static_cast<int32_t>(registered.size());
        return registered.data();
    }
    nvinfer1::IPluginCreatorInterface* getCreator(
        char const* const, char const* const, char const* const) noexcept override
    {
        return nullptr;
    }
    bool deregisterCreator(nvinfer1::IPluginCreatorInterface const& creator) noexcept override
    {
        for (size_t i = 0; i < registered.size(); ++i)
        {
            if (registered[i] == &creator)
            {
                registered.erase(registered.begin() + static_cast<std::ptrdiff_t>(i));
                ++deregistered;
                return true;
            }
        }
        return false;
    }
    nvinfer1::IPluginResource* acquirePluginResource(char const*, nvinfer1::IPluginResource*) noexcept override
    {
        return nullptr;
    }
    int32_t releasePluginResource(char const*) noexcept override
    {
        return 0;
    }
    nvinfer1::IPluginCreatorInterface* const* getAllCreatorsRecursive(int32_t* const n) noexcept override
    {
        return getAllCreators(n);
    }

    std::vector<nvinfer1::IPluginCreatorInterface*> registered;
    std::vector<std::string> namespaces;
    int deregistered{0};
};

RegistryDouble gRegistry;

class CountingLogger : public nvinfer1::ILogger
{
public:
    void log(Severity severity, char const* msg) noexcept override
    {
        if (severity <= Severity::kERROR)
        {
            ++errors;
        }
        std::printf("  logged: %s\n", msg);
    }
    int errors{0};
};

class Finder : public nvinfer1::ILoggerFinder
{
public:
    nvinfer1::ILogger* findLogger() override
    {
        return &logger;
    }
    CountingLogger logger;
};

} // namespace

extern "C" nvinfer1::IPluginRegistry* getPluginRegistry() noexcept
{
    return &gRegistry;
}

int main(int argc, char** argv)
{
    if (argc != 2)
    {
        std::printf("usage: %s <librnnx_trt_plugins.so>\n", argv[0]);
        return 2;
    }
    void* handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr)
    {
        std::printf("FAILED dlopen: %s\n0 passed, 1 failed\n", dlerror());
        return 1;
    }
    check(gRegistry.registered.size() == 2, "dlopen registered both creators with the registry");
    check(gRegistry.namespaces == std::vector<std::string>({"rnnx", "rnnx"}), "registered under namespace rnnx");
    auto getCreators = reinterpret_cast<GetCreatorsFn>(dlsym(handle, "getCreators"));
    auto setLoggerFinder = reinterpret_cast<SetLoggerFinderFn>(dlsym(handle, "setLoggerFinder"));
    check(getCreators != nullptr, "getCreators is exported");
    check(setLoggerFinder != nullptr, "setLoggerFinder is exported");
    check(dlsym(handle, "getPluginRegistry") == nullptr, "the library does not define TensorRT symbols");
    if (getCreators == nullptr || setLoggerFinder == nullptr)
    {
        std::printf("0 passed, %d failed\n", gFailures);
        return 1;
    }
    static Finder finder;
    setLoggerFinder(&finder);
    int32_t nb = -1;
    nvinfer1::IPluginCreatorInterface* const* creators = getCreators(nb);
    check(nb == 2 && creators != nullptr, "two creators");
    check(gRegistry.registered.empty() && gRegistry.deregistered == 2,
        "getCreators handed the registration over to its caller (no duplicates)");
    for (int32_t i = 0; creators != nullptr && i < nb; ++i)
    {
        check(gRegistry.registerCreator(*creators[i], "rnnx"), "the caller registers the creators");
    }
    int32_t again = 0;
    getCreators(again);
    check(gRegistry.registered.size() == 2 && gRegistry.deregistered == 2, "a second getCreators leaves them");
    for (int32_t i = 0; creators != nullptr && i < nb; ++i)
    {
        check(std::strcmp(creators[i]->getInterfaceInfo().kind, "PLUGIN CREATOR_V3ONE") == 0, "V3One creator");
        auto* creator = static_cast<nvinfer1::IPluginCreatorV3One*>(creators[i]);
        std::string const name = creator->getPluginName();
        check(name == (i == 0 ? "SRUScan" : "CausalLinearAttention"), "creator name");
        check(std::strcmp(creator->getPluginVersion(), "1") == 0, "creator version");
        check(std::strcmp(creator->getPluginNamespace(), "rnnx") == 0, "creator namespace");
        int32_t const hidden = 8;
        float const eps = 1e-6F;
        nvinfer1::PluginField field = i == 0
            ? nvinfer1::PluginField("hidden_size", &hidden, nvinfer1::PluginFieldType::kINT32, 1)
            : nvinfer1::PluginField("eps", &eps, nvinfer1::PluginFieldType::kFLOAT32, 1);
        nvinfer1::PluginFieldCollection fc{1, &field};
        nvinfer1::IPluginV3* plugin = creator->createPlugin("layer", &fc, nvinfer1::TensorRTPhase::kBUILD);
        check(plugin != nullptr, "createPlugin");
        delete plugin;
        nvinfer1::PluginField unknown("no_such_field", &hidden, nvinfer1::PluginFieldType::kINT32, 1);
        nvinfer1::PluginFieldCollection bad{1, &unknown};
        int const before = finder.logger.errors;
        check(creator->createPlugin("layer", &bad, nvinfer1::TensorRTPhase::kBUILD) == nullptr, "bad fields rejected");
        check(finder.logger.errors > before, "error reported through the logger finder");
    }
    std::printf("%d passed, %d failed\n", gChecks - gFailures, gFailures);
    return gFailures == 0 ? 0 : 1;
}
