/*
 * Loads the two plugin libraries the way TensorRT's loaders do, without TensorRT:
 *
 *  - librnnx_trt_plugins.so as IPluginRegistry::loadLibrary / trtexec --dynamicPlugins load it: dlopen, the
 *    exported setLoggerFinder() and getCreators(), then the loader registers each creator. The dlopen itself
 *    must not touch a registry (no static initialiser may register while the registry is inside loadLibrary).
 *  - librnnx_trt_plugins_static.so as trtexec --staticPlugins / polygraphy --plugins load it: a plain dlopen,
 *    after which the library's static initialiser has registered each creator once; it exports no
 *    getCreators, and a second dlopen of the same path registers nothing more.
 *
 * Both also export rnnx_trt_plugins_tensorrt_major() / rnnx_trt_plugins_tensorrt_version(), the TensorRT headers
 * they were compiled against (this test's own); the test compiles against TensorRT 10 and 11 headers alike.
 *
 * Test doubles: this executable exports a getPluginRegistry() returning a stand-in registry and a
 * getInferLibVersion() reporting a stand-in TensorRT version (no real registry or version exists without the
 * TensorRT library), found by the self-registering library's dlsym(RTLD_DEFAULT), as trtexec's libnvinfer (linked
 * globally) would be. Like TensorRT's registry, the stand-in refuses a second creator with the same name, version
 * and namespace; it counts every call so that "registered once" and "not touched" can be checked. The version
 * reported is that of this test's headers, except where the test stands for a TensorRT of another major: then the
 * self-registering library (a fresh copy of it, so that its initialiser runs again) must register nothing, not even
 * call getPluginRegistry, and say so in one line on stderr.
 * Usage: rnnx_plugin_library_test <librnnx_trt_plugins.so> <librnnx_trt_plugins_static.so>
 */
#include <NvInferRuntime.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

//! What the library looks up with dlsym(RTLD_DEFAULT) to find TensorRT and its version (exported from this
//! executable).
extern "C" __attribute__((visibility("default"))) nvinfer1::IPluginRegistry* getPluginRegistry() noexcept;
extern "C" __attribute__((visibility("default"))) int32_t getInferLibVersion() noexcept;

namespace
{

using GetCreatorsFn = nvinfer1::IPluginCreatorInterface* const* (*)(int32_t&);
using SetLoggerFinderFn = void (*)(nvinfer1::ILoggerFinder*);
using TensorRtMajorFn = int32_t (*)();
using TensorRtVersionFn = char const* (*)();

int gFailures = 0;
int gChecks = 0;
int gGetPluginRegistryCalls = 0;
//! What the stand-in getInferLibVersion() reports: (major * 100 + minor) * 100 + patch, as TensorRT 10 and later.
int32_t const kHeadersVersion = (NV_TENSORRT_MAJOR * 100 + NV_TENSORRT_MINOR) * 100 + NV_TENSORRT_PATCH;
int32_t gReportedVersion = kHeadersVersion;

void check(bool ok, char const* what)
{
    ++gChecks;
    if (!ok)
    {
        ++gFailures;
        std::printf("FAILED %s\n", what);
    }
}

//! "name/version/namespace" of a V3 creator registered under `ns`.
std::string creatorKey(nvinfer1::IPluginCreatorInterface& creator, char const* ns)
{
    if (std::strcmp(creator.getInterfaceInfo().kind, "PLUGIN CREATOR_V3ONE") != 0)
    {
        return "?";
    }
    auto& v3 = static_cast<nvinfer1::IPluginCreatorV3One&>(creator);
    return std::string(v3.getPluginName()) + "/" + v3.getPluginVersion() + "/" + (ns != nullptr ? ns : "");
}

//! Stand-in for TensorRT's plugin registry: records V3 creator registrations, refuses duplicates by key.
//! TensorRT 10's registry also has the IPluginCreator (V2) methods, which TensorRT 11 removed; rnnx only registers
//! V3 creators, so the double refuses V2 ones (and counts the call) under TensorRT 10 headers.
class RegistryDouble : public nvinfer1::IPluginRegistry
{
public:
#if NV_TENSORRT_MAJOR < 11
    bool registerCreator(nvinfer1::IPluginCreator&, char const* const) noexcept override
    {
        ++calls;
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
        ++calls;
        return nullptr;
    }
    bool deregisterCreator(nvinfer1::IPluginCreator const&) noexcept override
    {
        ++calls;
        return false;
    }
#endif
    void setErrorRecorder(nvinfer1::IErrorRecorder* const) noexcept override {}
    nvinfer1::IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return nullptr;
    }
    bool isParentSearchEnabled() const override
    {
        return false;
    }
    void setParentSearchEnabled(bool const) override {}
    PluginLibraryHandle loadLibrary(char const*) noexcept override
    {
        ++calls;
        return nullptr;
    }
    void deregisterLibrary(PluginLibraryHandle) noexcept override {}
    bool registerCreator(nvinfer1::IPluginCreatorInterface& creator, char const* const ns) noexcept override
    {
        ++calls;
        ++registerCalls;
        std::string const key = creatorKey(creator, ns);
        for (auto const& k : keys)
        {
            if (k == key)
            {
                return false;
            }
        }
        registered.push_back(&creator);
        keys.push_back(key);
        return true;
    }
    nvinfer1::IPluginCreatorInterface* const* getAllCreators(int32_t* const n) const noexcept override
    {
        *n = static_cast<int32_t>(registered.size());
        return registered.data();
    }
    nvinfer1::IPluginCreatorInterface* getCreator(
        char const* const name, char const* const version, char const* const ns) noexcept override
    {
        ++calls;
        std::string const key = std::string(name) + "/" + version + "/" + (ns != nullptr ? ns : "");
        for (size_t i = 0; i < keys.size(); ++i)
        {
            if (keys[i] == key)
            {
                return registered[i];
            }
        }
        return nullptr;
    }
    bool deregisterCreator(nvinfer1::IPluginCreatorInterface const& creator) noexcept override
    {
        ++calls;
        for (size_t i = 0; i < registered.size(); ++i)
        {
            if (registered[i] == &creator)
            {
                registered.erase(registered.begin() + static_cast<std::ptrdiff_t>(i));
                keys.erase(keys.begin() + static_cast<std::ptrdiff_t>(i));
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

    //! Forgets everything (the next part of the test stands for a fresh process).
    void reset()
    {
        registered.clear();
        keys.clear();
        calls = 0;
        registerCalls = 0;
    }

    std::vector<nvinfer1::IPluginCreatorInterface*> registered;
    std::vector<std::string> keys;
    int calls{0};
    int registerCalls{0};
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

//! "name/2/rnnx" of every creator, in getCreators' order: read from the load_library library (loadLibraryShape), whose
//! creators are the op folders' registrations; the self-registering library must register exactly these, in order.
std::vector<std::string> gExpectedKeys;

//! createPlugin's fields for `creator`: every int field set to `value` (no other field). A creator whose required
//! fields are all ints that `value` satisfies makes a plugin from them; what a creator requires is not asked here (its
//! op's unit tests check it), only that creators registered through the library make plugins.
std::vector<nvinfer1::PluginField> intFields(nvinfer1::IPluginCreatorV3One& creator, int32_t const& value)
{
    std::vector<nvinfer1::PluginField> fields;
    nvinfer1::PluginFieldCollection const* listed = creator.getFieldNames();
    for (int32_t i = 0; listed != nullptr && i < listed->nbFields; ++i)
    {
        if (listed->fields[i].type == nvinfer1::PluginFieldType::kINT32)
        {
            fields.emplace_back(listed->fields[i].name, &value, nvinfer1::PluginFieldType::kINT32, 1);
        }
    }
    return fields;
}

//! One plugin from each registered creator; bad fields are refused (and logged, through `finder` when given).
void checkCreators(Finder* finder)
{
    int32_t made = 0;
    for (auto const& key : gExpectedKeys)
    {
        std::string const name = key.substr(0, key.find('/'));
        nvinfer1::IPluginCreatorInterface* found = gRegistry.getCreator(name.c_str(), "2", "rnnx");
        check(found != nullptr, "the registry finds the creator by name, version and namespace");
        if (found == nullptr)
        {
            continue;
        }
        check(std::strcmp(found->getInterfaceInfo().kind, "PLUGIN CREATOR_V3ONE") == 0, "V3One creator");
        auto* creator = static_cast<nvinfer1::IPluginCreatorV3One*>(found);
        check(std::strcmp(creator->getPluginNamespace(), "rnnx") == 0, "creator namespace");
        int32_t const hidden = 8;
        // No fields (every field has a default), else every int field 1, else 2: the first a creator accepts.
        nvinfer1::IPluginV3* plugin = nullptr;
        for (int32_t const value : {0, 1, 2})
        {
            std::vector<nvinfer1::PluginField> fields;
            if (value > 0)
            {
                fields = intFields(*creator, value);
            }
            nvinfer1::PluginFieldCollection fc{static_cast<int32_t>(fields.size()), fields.data()};
            plugin = creator->createPlugin("layer", &fc, nvinfer1::TensorRTPhase::kBUILD);
            if (plugin != nullptr)
            {
                ++made;
                break;
            }
        }
        delete plugin;
        nvinfer1::PluginField unknown("no_such_field", &hidden, nvinfer1::PluginFieldType::kINT32, 1);
        nvinfer1::PluginFieldCollection bad{1, &unknown};
        int const before = finder != nullptr ? finder->logger.errors : 0;
        check(creator->createPlugin("layer", &bad, nvinfer1::TensorRTPhase::kBUILD) == nullptr, "bad fields rejected");
        if (finder != nullptr)
        {
            check(finder->logger.errors > before, "error reported through the logger finder");
        }
    }
    check(made > 0, "createPlugin through a registered creator makes a plugin");
}

//! Prints "<title>: <path>", forgets the registry's state (a fresh process), then dlopens `path`, checking that
//! it loads (`what`); nullptr, with dlerror() printed, when it does not.
void* dlopenFresh(char const* title, char const* path, char const* what)
{
    std::printf("%s: %s\n", title, path);
    gRegistry.reset();
    gGetPluginRegistryCalls = 0;
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    check(handle != nullptr, what);
    if (handle == nullptr)
    {
        std::printf("  dlopen: %s\n", dlerror());
    }
    return handle;
}

//! Both libraries export the TensorRT major and version of the headers they were compiled against (those of this
//! test): what a loader compares with the TensorRT in its process before handing the library over.
void checkTensorRtVersion(void* handle)
{
    auto major = reinterpret_cast<TensorRtMajorFn>(dlsym(handle, "rnnx_trt_plugins_tensorrt_major"));
    auto version = reinterpret_cast<TensorRtVersionFn>(dlsym(handle, "rnnx_trt_plugins_tensorrt_version"));
    check(major != nullptr, "rnnx_trt_plugins_tensorrt_major is exported");
    check(version != nullptr, "rnnx_trt_plugins_tensorrt_version is exported");
    if (major == nullptr || version == nullptr)
    {
        return;
    }
    std::string const expected = std::to_string(NV_TENSORRT_MAJOR) + "." + std::to_string(NV_TENSORRT_MINOR) + "."
        + std::to_string(NV_TENSORRT_PATCH);
    std::printf("  compiled against TensorRT %d headers (%s)\n", major(), version());
    check(major() == NV_TENSORRT_MAJOR, "rnnx_trt_plugins_tensorrt_major() is NV_TENSORRT_MAJOR of the headers");
    check(expected == version(), "rnnx_trt_plugins_tensorrt_version() is the headers' major.minor.patch");
}

//! IPluginRegistry::loadLibrary's mechanism: dlopen, setLoggerFinder, getCreators, the loader registers.
void loadLibraryShape(char const* path)
{
    void* handle = dlopenFresh(
        "librnnx_trt_plugins.so through loadLibrary's mechanism", path, "dlopen of the loadLibrary library");
    if (handle == nullptr)
    {
        return;
    }
    check(gGetPluginRegistryCalls == 0 && gRegistry.calls == 0,
        "dlopen did not touch the registry (no registration while the registry is inside loadLibrary)");
    auto getCreators = reinterpret_cast<GetCreatorsFn>(dlsym(handle, "getCreators"));
    auto setLoggerFinder = reinterpret_cast<SetLoggerFinderFn>(dlsym(handle, "setLoggerFinder"));
    check(getCreators != nullptr, "getCreators is exported");
    check(setLoggerFinder != nullptr, "setLoggerFinder is exported");
    check(dlsym(handle, "getPluginRegistry") == nullptr, "the library does not define TensorRT symbols");
    checkTensorRtVersion(handle);
    if (getCreators == nullptr || setLoggerFinder == nullptr)
    {
        return;
    }
    static Finder finder;
    setLoggerFinder(&finder);
    int32_t nb = -1;
    nvinfer1::IPluginCreatorInterface* const* creators = getCreators(nb);
    check(nb > 0 && creators != nullptr, "getCreators returns the creators");
    gExpectedKeys.clear();
    for (int32_t i = 0; creators != nullptr && i < nb; ++i)
    {
        gExpectedKeys.push_back(creatorKey(*creators[i], "rnnx"));
        check(gExpectedKeys.back().find("/2/rnnx") != std::string::npos, "a V3One creator of version 2");
        check(i == 0 || gExpectedKeys[i - 1] < gExpectedKeys[i], "creators sorted by name, each once");
    }
    check(gRegistry.calls == 0, "getCreators did not touch the registry");
    for (int32_t i = 0; creators != nullptr && i < nb; ++i)
    {
        check(gRegistry.registerCreator(*creators[i], "rnnx"), "the loader registers each creator");
    }
    check(gRegistry.keys == gExpectedKeys, "one registration per creator, v2 rnnx");
    // A second dlopen of the same path (what a second loadLibrary starts with) runs no initialiser.
    void* again = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    check(again == handle, "a second dlopen returns the loaded library");
    check(gRegistry.registerCalls == nb && gGetPluginRegistryCalls == 0, "a second dlopen registered nothing");
    // What a second loadLibrary would then do: register again, which the registry refuses. Hence rnnx's Python
    // loader checks the registry first and calls load_library at most once per process and path.
    int32_t nbAgain = 0;
    nvinfer1::IPluginCreatorInterface* const* same = getCreators(nbAgain);
    check(same == creators && nbAgain == nb, "getCreators returns the same creators");
    check(!gRegistry.registerCreator(*same[0], "rnnx"), "the registry refuses a duplicate creator");
    check(gRegistry.keys.size() == gExpectedKeys.size(), "still one registration per creator");
    checkCreators(&finder);
}

//! trtexec --staticPlugins / polygraphy --plugins: a plain dlopen; the library registers itself.
void plainDlopenShape(char const* path)
{
    void* handle = dlopenFresh(
        "librnnx_trt_plugins_static.so through a plain dlopen", path, "dlopen of the self-registering library");
    if (handle == nullptr)
    {
        return;
    }
    check(gGetPluginRegistryCalls >= 1, "the initialiser looked up getPluginRegistry");
    check(static_cast<size_t>(gRegistry.registerCalls) == gExpectedKeys.size(),
        "the initialiser called registerCreator once per creator");
    check(gRegistry.keys == gExpectedKeys, "registered: every creator, version 2, namespace rnnx");
    check(dlsym(handle, "getCreators") == nullptr, "getCreators is not exported (no second mechanism)");
    check(dlsym(handle, "setLoggerFinder") == nullptr, "setLoggerFinder is not exported");
    check(dlsym(handle, "getPluginRegistry") == nullptr, "the library does not define TensorRT symbols");
    checkTensorRtVersion(handle);
    void* again = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    check(again == handle, "a second dlopen returns the loaded library");
    check(static_cast<size_t>(gRegistry.registerCalls) == gExpectedKeys.size()
            && gRegistry.keys.size() == gExpectedKeys.size(),
        "a second dlopen registered nothing more");
    checkCreators(nullptr);
}

//! The self-registering library (a fresh copy of `path`) dlopened while the stand-in TensorRT reports
//! `reportedVersion`, of major `reportedMajor`, not the headers' one: it loads, registers nothing, does not call
//! getPluginRegistry (whose registry's vtable would not be the one compiled against), and writes one line to stderr
//! naming both majors.
void otherMajorShape(char const* path, int32_t reportedVersion, int32_t reportedMajor)
{
    std::printf("librnnx_trt_plugins_static.so with TensorRT %d in the process (getInferLibVersion %d)\n",
        reportedMajor, reportedVersion);
    char dir[] = "/tmp/rnnx_library_test_XXXXXX";
    check(mkdtemp(dir) != nullptr, "mkdtemp");
    std::string const copy = std::string(dir) + "/librnnx_trt_plugins_static.so";
    std::string const captured = std::string(dir) + "/stderr.txt";
    {
        std::ofstream out(copy, std::ios::binary);
        out << std::ifstream(path, std::ios::binary).rdbuf();
        check(out.good(), "copying the self-registering library");
    }
    gReportedVersion = reportedVersion;
    gRegistry.reset();
    gGetPluginRegistryCalls = 0;
    std::fflush(stderr);
    int const savedStderr = dup(2);
    FILE* const sink = std::fopen(captured.c_str(), "w");
    check(savedStderr >= 0 && sink != nullptr, "redirecting stderr");
    if (sink != nullptr)
    {
        dup2(fileno(sink), 2);
    }
    void* handle = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::fflush(stderr);
    if (savedStderr >= 0)
    {
        dup2(savedStderr, 2);
        close(savedStderr);
    }
    if (sink != nullptr)
    {
        std::fclose(sink);
    }
    gReportedVersion = kHeadersVersion;
    check(handle != nullptr, "the self-registering library loads with another TensorRT major in the process");
    if (handle == nullptr)
    {
        std::printf("  dlopen: %s\n", dlerror());
    }
    std::stringstream text;
    text << std::ifstream(captured).rdbuf();
    std::string const line = text.str();
    std::printf("  stderr: %s", line.c_str());
    check(gGetPluginRegistryCalls == 0, "getPluginRegistry of another TensorRT major is not called");
    check(gRegistry.calls == 0 && gRegistry.keys.empty(), "nothing registered with another TensorRT major");
    std::string const expected = "the TensorRT in this process is " + std::to_string(reportedMajor)
        + ", but this plugin library was built against TensorRT " + std::to_string(NV_TENSORRT_MAJOR) + " headers";
    check(line.find(expected) != std::string::npos, "stderr names both majors");
    std::string const remedy = reportedMajor >= 10 ? "TENSORRT_ROOT=<TensorRT " + std::to_string(reportedMajor)
            + " dir> python -m rnnx.plugins --major " + std::to_string(reportedMajor)
                                                   : "rnnx's plugins need TensorRT 10 or newer";
    check(line.find(remedy) != std::string::npos, "stderr names the build command (or the TensorRT needed)");
    check(line.size() > 1 && line.find('\n') == line.size() - 1, "one line on stderr");
    std::remove(captured.c_str());
    std::remove(copy.c_str());
    rmdir(dir);
}

} // namespace

extern "C" nvinfer1::IPluginRegistry* getPluginRegistry() noexcept
{
    ++gGetPluginRegistryCalls;
    return &gRegistry;
}

extern "C" int32_t getInferLibVersion() noexcept
{
    return gReportedVersion;
}

int main(int argc, char** argv)
{
    if (argc != 3)
    {
        std::printf("usage: %s <librnnx_trt_plugins.so> <librnnx_trt_plugins_static.so>\n", argv[0]);
        return 2;
    }
    loadLibraryShape(argv[1]);
    plainDlopenShape(argv[2]);
    // TensorRT of another major linked globally (trtexec 11 given a library built for 10, or the reverse), in the
    // encoding of TensorRT 10 and later; and TensorRT 8.6.1 in the older one.
    int32_t const other = NV_TENSORRT_MAJOR == 10 ? 11 : 10;
    otherMajorShape(argv[2], (other * 100 + 2) * 100 + 3, other);
    otherMajorShape(argv[2], 8601, 8);
    std::printf("%d passed, %d failed\n", gChecks - gFailures, gFailures);
    return gFailures == 0 ? 0 : 1;
}
