// rnnx_trt_plugins_test DIR LIB10 LIB11 LIB_UNMARKED LIB_SELF_REGISTERING: the TensorRT backend's plugin loader
// (src/trt_plugins.cpp) against a stand-in plugin registry, and its engine profile order check
// (src/trt_profiles.cpp), without TensorRT. DIR is a writable folder; the program copies plugin library doubles
// there to stand for plugin libraries (the loader keys them by real path and reads the TensorRT major they were
// built for from their bytes; the stand-in registry never opens them).
//
// TEST DOUBLES (no TensorRT and no plugin library built for two majors exist here): LIB10 and LIB11 are shared
// libraries that keep the marker "rnnx-trt-plugins:tensorrt-headers=10.14.1" / "=11.1.0" in their bytes and export
// rnnx_trt_plugins_tensorrt_major(), as librnnx_trt_plugins.so built with the TensorRT 10 or 11 headers does;
// LIB_UNMARKED has no marker, as a plugin library built before rnnx recorded its major; LIB_SELF_REGISTERING has
// the TensorRT 10 marker and a static initialiser that ends the process with status 3, standing for the
// self-registering library, which registers its creators when anything loads it: this program exits 3 if the
// loader ever opened it. tests/test_native_runtime.py compiles them. The loader is given the major of "the loaded
// TensorRT" as an argument, so every case runs with either header set.
//
// It prints one line per case (what loadLibrary was asked, and the handle or the error's status and message)
// for tests/test_native_runtime.py to compare, "FAILED <what>" for a check of its own that fails, and exits 1
// after any failure.
//
// TEST DOUBLE: RegistryDouble stands for TensorRT's plugin registry (nvinfer1::IPluginRegistry, a pure virtual
// interface, implemented here and nowhere else in the runtime). It keeps registered creators by (name,
// version, namespace) like TensorRT's, records each loadLibrary call, and loads a "library" by registering the
// creators the test said that path has. Like TensorRT's, its loadLibrary fails (returns null) when one of those
// creators is already registered: the failure a second rnnx_model_open met before the loader existed.
// CreatorDouble is a creator with no behaviour: the loader only asks whether one is registered.
#include "error.h"
#include "json.h"
#include "trt_plugins.h"
#include "trt_profiles.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace
{

using rnnx::PluginCreator;

int failures = 0;

void check(bool ok, const std::string& what)
{
    if (!ok)
    {
        ++failures;
        std::printf("FAILED %s\n", what.c_str());
    }
}

std::string key_of(const char* name, const char* version, const char* ns)
{
    return std::string(name) + "/" + version + "/" + (ns != nullptr ? ns : "");
}

// TEST DOUBLE: a registered creator; nothing but its interface kind.
class CreatorDouble : public nvinfer1::IPluginCreatorInterface
{
public:
    nvinfer1::InterfaceInfo getInterfaceInfo() const noexcept override
    {
        return nvinfer1::InterfaceInfo{"PLUGIN CREATOR_V3ONE", 1, 0};
    }
};

// TEST DOUBLE: TensorRT's plugin registry (see the file's comment).
class RegistryDouble : public nvinfer1::IPluginRegistry
{
public:
    // What loadLibrary(path) registers; a path not named here makes loadLibrary return null.
    std::map<std::string, std::vector<PluginCreator>> libraries;
    std::vector<std::string> load_calls;

    void add(const PluginCreator& c)
    {
        creators_.emplace_back(
            key_of(c.name.c_str(), c.version.c_str(), c.plugin_namespace.c_str()), std::make_unique<CreatorDouble>());
    }

    PluginLibraryHandle loadLibrary(const char* path) noexcept override
    {
        load_calls.push_back(path);
        const auto library = libraries.find(path);
        if (library == libraries.end())
            return nullptr;
        for (const PluginCreator& c : library->second)
            if (getCreator(c.name.c_str(), c.version.c_str(), c.plugin_namespace.c_str()) != nullptr)
                return nullptr;
        for (const PluginCreator& c : library->second)
            add(c);
        return &library->second;
    }
    nvinfer1::IPluginCreatorInterface* getCreator(
        const char* const name, const char* const version, const char* const ns) noexcept override
    {
        const std::string key = key_of(name, version, ns);
        for (auto& entry : creators_)
            if (entry.first == key)
                return entry.second.get();
        return nullptr;
    }

    // The rest of the interface: not used by the loader. In TensorRT 10 the pure virtual interface includes the
    // deprecated IPluginCreator (V2) methods, which must be overridden all the same; TensorRT 11 removed them.
#if NV_TENSORRT_MAJOR < 11
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    bool registerCreator(nvinfer1::IPluginCreator&, const char* const) noexcept override
    {
        return false;
    }
    nvinfer1::IPluginCreator* const* getPluginCreatorList(int32_t* const n) const noexcept override
    {
        *n = 0;
        return nullptr;
    }
    nvinfer1::IPluginCreator* getPluginCreator(
        const char* const, const char* const, const char* const) noexcept override
    {
        return nullptr;
    }
    bool deregisterCreator(const nvinfer1::IPluginCreator&) noexcept override
    {
        return false;
    }
#pragma GCC diagnostic pop
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
    void setParentSearchEnabled(const bool) override {}
    void deregisterLibrary(PluginLibraryHandle) noexcept override {}
    bool registerCreator(nvinfer1::IPluginCreatorInterface&, const char* const) noexcept override
    {
        return false;
    }
    nvinfer1::IPluginCreatorInterface* const* getAllCreators(int32_t* const n) const noexcept override
    {
        *n = 0;
        return nullptr;
    }
    bool deregisterCreator(const nvinfer1::IPluginCreatorInterface&) noexcept override
    {
        return false;
    }
    nvinfer1::IPluginResource* acquirePluginResource(const char*, nvinfer1::IPluginResource*) noexcept override
    {
        return nullptr;
    }
    int32_t releasePluginResource(const char*) noexcept override
    {
        return 0;
    }
    nvinfer1::IPluginCreatorInterface* const* getAllCreatorsRecursive(int32_t* const n) noexcept override
    {
        *n = 0;
        return nullptr;
    }

private:
    std::vector<std::pair<std::string, std::unique_ptr<CreatorDouble>>> creators_;
};

const std::vector<PluginCreator> kCreators{{"SRUScan", "1", "rnnx"}, {"CausalLinearAttention", "1", "rnnx"}};

// The plugin library doubles (see the file's comment), set by main.
std::string lib10;
std::string lib11;
std::string lib_unmarked;
std::string lib_self_registering;

// A file at dir/name: a copy of `library` (a plugin library double), or an empty file when `library` is "".
std::string make_file(const std::string& dir, const std::string& name, const std::string& library = lib10)
{
    const std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary);
    if (library.empty())
        out.put('\0');
    else
        out << std::ifstream(library, std::ios::binary).rdbuf();
    check(out.good(), "writing " + path);
    return path;
}

// One call of the loader, with TensorRT `major` loaded: "loadLibrary calls N, <handle | nullptr | status S:
// message>".
std::string load(RegistryDouble& registry, const std::string& path, void** handle = nullptr,
    const std::vector<PluginCreator>& creators = kCreators, int major = 10)
{
    std::string outcome;
    try
    {
        void* h = rnnx::load_plugin_library(
            registry, path, creators, major, [] { return std::string("the last TensorRT error"); });
        if (handle != nullptr)
            *handle = h;
        outcome = h != nullptr ? "handle" : "nullptr";
    }
    catch (const rnnx::Error& e)
    {
        outcome = "status " + std::to_string(static_cast<int>(e.status())) + ": " + e.what();
    }
    return "loadLibrary calls " + std::to_string(registry.load_calls.size()) + ", " + outcome;
}

void print(const char* what, const std::string& outcome)
{
    std::printf("%s: %s\n", what, outcome.c_str());
}

std::string creators_of(const std::string& text)
{
    try
    {
        const std::vector<PluginCreator> creators = rnnx::required_creators(rnnx::parse_json(text), "rnnx.json");
        return creators.empty() ? "(none)" : rnnx::creator_names(creators);
    }
    catch (const rnnx::Error& e)
    {
        return "status " + std::to_string(static_cast<int>(e.status())) + ": " + e.what();
    }
}

// The profile order check over the sequence axis' (min, opt, max) of each profile: "ok" or its message.
std::string order_of(const std::vector<rnnx::SequenceRange>& ranges)
{
    const std::string problem = rnnx::profile_order_problem("input_ids", ranges);
    return problem.empty() ? "ok" : problem;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 6)
    {
        std::fprintf(stderr, "usage: rnnx_trt_plugins_test DIR LIB10 LIB11 LIB_UNMARKED LIB_SELF_REGISTERING\n");
        return 2;
    }
    const std::string dir = argv[1];
    lib10 = argv[2];
    lib11 = argv[3];
    lib_unmarked = argv[4];
    lib_self_registering = argv[5];

    {
        // A process that opens the same TensorRT export twice, the second time through a symlink.
        RegistryDouble registry;
        const std::string path = make_file(dir, "librnnx_trt_plugins.so");
        const std::string link = dir + "/link.so";
        check(::symlink(path.c_str(), link.c_str()) == 0, "symlink");
        registry.libraries[path] = kCreators;
        void* first = nullptr;
        void* second = nullptr;
        void* third = nullptr;
        print("first open", load(registry, path, &first));
        print("second open", load(registry, path, &second));
        print("through a symlink", load(registry, link, &third));
        check(first != nullptr && second == first && third == first, "the same handle every time");
        check(registry.load_calls.size() == 1 && registry.load_calls[0] == path, "one loadLibrary, of the real path");
        check(registry.loadLibrary(path.c_str()) == nullptr, "the double refuses a second load, as TensorRT does");
    }
    {
        // The creators were registered by someone else (Python's load_plugin_library, a static library).
        RegistryDouble registry;
        const std::string path = make_file(dir, "elsewhere.so");
        registry.libraries[path] = kCreators;
        for (const PluginCreator& c : kCreators)
            registry.add(c);
        print("registered elsewhere", load(registry, path));
        print("registered elsewhere, again", load(registry, path));
    }
    {
        // Only some creators registered: another rnnx plugin library is loaded.
        RegistryDouble registry;
        const std::string path = make_file(dir, "partial.so");
        registry.libraries[path] = kCreators;
        registry.add(kCreators[0]);
        print("partial", load(registry, path));
    }
    {
        // loadLibrary fails.
        RegistryDouble registry;
        print("null handle", load(registry, make_file(dir, "broken.so")));
    }
    {
        // The self-registering library is refused before anything loads it (loadLibrary would dlopen it, and its
        // initialiser would register while TensorRT is inside loadLibrary), even with the right major and a
        // registry whose loadLibrary would succeed.
        RegistryDouble registry;
        const std::string path = make_file(dir, "librnnx_trt_plugins_static.so", lib_self_registering);
        registry.libraries[path] = kCreators;
        print("static library", load(registry, path));
        check(registry.load_calls.empty(), "no loadLibrary call for the self-registering library");
        check(registry.getCreator("SRUScan", "1", "rnnx") == nullptr, "nothing registered");
    }
    {
        // The library loads but does not register what the export needs; the next export needs more.
        RegistryDouble registry;
        const std::string silent = make_file(dir, "silent.so");
        registry.libraries[silent] = {};
        print("registers nothing", load(registry, silent));
        const std::string older = make_file(dir, "older.so");
        registry.libraries[older] = {kCreators[0]};
        print("older library", load(registry, older, nullptr, {kCreators[0]}));
        print("older library, an export needing more", load(registry, older));
    }
    {
        // The plugin library's TensorRT major against the loaded TensorRT's: checked before loadLibrary.
        RegistryDouble registry;
        const std::string built10 = make_file(dir, "built_for_10.so", lib10);
        const std::string built11 = make_file(dir, "built_for_11.so", lib11);
        registry.libraries[built10] = kCreators;
        registry.libraries[built11] = kCreators;
        check(rnnx::plugin_library_major(built10) == 10 && rnnx::plugin_library_major(built11) == 11,
            "plugin_library_major reads the doubles' majors");
        // A self-registering library under another name: its major is read from the bytes, so its initialiser
        // (which ends this process with status 3) never runs, neither here nor in the loader.
        const std::string renamed = make_file(dir, "renamed.so", lib_self_registering);
        check(rnnx::plugin_library_major(renamed) == 10, "plugin_library_major reads a library without loading it");
        registry.libraries[renamed] = kCreators;
        print(
            "a renamed self-registering library, TensorRT 11 loaded", load(registry, renamed, nullptr, kCreators, 11));
        print("built for 10, TensorRT 11 loaded", load(registry, built10, nullptr, kCreators, 11));
        print("built for 11, TensorRT 10 loaded", load(registry, built11, nullptr, kCreators, 10));
        print("built for 11, TensorRT 11 loaded", load(registry, built11, nullptr, kCreators, 11));
        RegistryDouble other;
        other.libraries[built10] = kCreators;
        print("built for 10, TensorRT 10 loaded", load(other, built10, nullptr, kCreators, 10));
        RegistryDouble unmarked;
        const std::string old = make_file(dir, "unmarked.so", lib_unmarked);
        unmarked.libraries[old] = kCreators;
        print("built before the major was recorded", load(unmarked, old, nullptr, kCreators, 11));
        check(rnnx::plugin_library_major(old) == -1, "plugin_library_major of a library without the marker");
        const std::string empty = make_file(dir, "not_a_library.so", "");
        unmarked.libraries[empty] = kCreators;
        print("not a library", load(unmarked, empty, nullptr, kCreators, 10));
        const std::string absent = dir + "/absent.so";
        unmarked.libraries[absent] = kCreators;
        print("no such file", load(unmarked, absent));
        check(unmarked.load_calls.empty(), "no loadLibrary for a library without a marker or without a file");
    }
    {
        // The marker as Python's pattern reads it: the prefix, digits.digits.digits, a NUL; the first complete one.
        using namespace std::string_literals;
        const std::string prefix = rnnx::kPluginMarkerPrefix;
        check(rnnx::marker_major("ELF\0"s + prefix + "11.1.0\0rest"s) == 11, "a marker in the bytes");
        check(rnnx::marker_major(prefix + "10.14.1\0"s) == 10, "a marker at the start");
        check(rnnx::marker_major(prefix + "10.14.1") == -1, "no NUL after the version");
        check(rnnx::marker_major(prefix + "10.14\0"s) == -1, "two numbers only");
        check(rnnx::marker_major(prefix + "x.1.0\0"s) == -1, "not a number");
        check(rnnx::marker_major(prefix + "\0"s + prefix + "11.0.2\0"s) == 11, "an incomplete marker, then one");
        check(rnnx::marker_major("rnnx-trt-plugins:tensorrt-headers 10.14.1\0"s) == -1, "not the prefix");
        check(rnnx::marker_major("") == -1, "no bytes");
    }
    // The engine's optimization profiles, as (min, opt, max) of input_ids' sequence axis.
    print("profiles decode, prefill", order_of({{1, 1, 1}, {1, 512, 512}}));
    print("profiles of max_length 1", order_of({{1, 1, 1}, {1, 1, 1}}));
    print("profiles decode, prefill from 2", order_of({{1, 1, 1}, {2, 64, 128}}));
    print("profiles decode, prefill, a third", order_of({{1, 1, 1}, {1, 64, 128}, {1, 8, 16}}));
    print("profiles prefill, decode", order_of({{1, 512, 512}, {1, 1, 1}}));
    print("profiles decode, prefill from 8", order_of({{1, 1, 1}, {8, 64, 128}}));
    print("profiles prefill only", order_of({{1, 256, 512}}));
    print("profiles none", order_of({}));
    print("required_creators",
        creators_of(R"({"ops": [{"name": "SRUScan", "domain": "rnnx", "version": 1, "plugin_version": "1",
            "plugin_namespace": "rnnx"}, {"name": "CausalLinearAttention", "plugin_version": 2}]})"));
    print("required_creators without ops", creators_of(R"({"format": "rnnx-onnx"})"));
    print("required_creators of a bad entry", creators_of(R"({"ops": [{"plugin_version": "1"}]})"));
    std::printf("failures: %d\n", failures);
    return failures == 0 ? 0 : 1;
}
