// The TensorRT backend: a serialized engine (built by rnnx.runtime.tensorrt.build_engine with the decode and
// prefill optimization profiles) and the rnnx plugin library. libnvinfer and libcudart are loaded with
// dlopen, once per process, so one binary serves both backends and says what is missing where TensorRT is
// absent. The state is device buffers: each state tensor has two grow-only buffers, the one a call reads and
// the one it writes, swapped after the call; the backend keeps grow-only buffers for input_ids,
// attention_mask and the logits. So a decode loop allocates nothing after its first step (a growing KV cache
// reallocates a logarithmic number of times), and nothing is freed before the state or the model is.
//
// One build serves one TensorRT major, its headers' (10.7 to 10.x with TensorRT 10 headers, 11.x with 11's): it
// loads libnvinfer.so.<that major>, refuses any other major (the interfaces' vtables differ between majors) and
// a plugin library built for another major (trt_plugins.cpp), and checks that the engine's optimization
// profiles are decode then prefill (trt_profiles.cpp).
//
// NOT RUN: no GPU with TensorRT has run this file; it is compiled wherever the headers exist (TensorRT 10.14 and
// 11.1 so far), and the library search, the version check and the device selection (with test doubles of
// libnvinfer and libcudart), the plugin loader and the plugin library's major (trt_plugins.cpp, with a stand-in
// registry and plugin library doubles) and the profile order (trt_profiles.cpp, over given ranges) are tested
// without TensorRT.
#include "backend.h"
#include "error.h"

#if RNNX_WITH_TENSORRT

#include "trt_plugins.h"
#include "trt_profiles.h"

#include <NvInferRuntime.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <dlfcn.h>
#include <fstream>
#include <iterator>
#include <mutex>

namespace rnnx
{
namespace
{

constexpr const char* kLibsVariable = "RNNX_TENSORRT_LIBS";

std::string join(const std::vector<std::string>& items)
{
    std::string out;
    for (const std::string& item : items)
        out += (out.empty() ? "" : ", ") + item;
    return out;
}

// The folders of $RNNX_TENSORRT_LIBS (colon-separated), searched before any other.
std::vector<std::string> override_dirs()
{
    std::vector<std::string> out;
    const char* value = std::getenv(kLibsVariable);
    std::string rest = value != nullptr ? value : "";
    while (!rest.empty())
    {
        const size_t colon = rest.find(':');
        const std::string dir = rest.substr(0, colon);
        if (!dir.empty())
            out.push_back(dir);
        rest = colon == std::string::npos ? "" : rest.substr(colon + 1);
    }
    return out;
}

// The site-packages (or dist-packages) folders above librnnx_runtime's own file, found with dladdr: where
// pip puts the TensorRT and CUDA runtime wheels' libraries when this library is installed from a wheel.
std::vector<std::string> site_packages_dirs()
{
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&site_packages_dirs), &info) == 0 || info.dli_fname == nullptr)
        return {};
    char resolved[PATH_MAX];
    std::string dir = ::realpath(info.dli_fname, resolved) != nullptr ? resolved : info.dli_fname;
    std::vector<std::string> out;
    for (size_t slash = dir.rfind('/'); slash != std::string::npos && slash > 0; slash = dir.rfind('/'))
    {
        dir.resize(slash);
        const std::string name = dir.substr(dir.rfind('/') + 1);
        if (name == "site-packages" || name == "dist-packages")
            out.push_back(dir);
    }
    return out;
}

// Where, under a site-packages folder, the pip wheels put libnvinfer.so.<major> (tensorrt-cu12-libs and
// tensorrt-cu13-libs: tensorrt_libs/).
const std::vector<std::string>& tensorrt_wheel_dirs()
{
    static const std::vector<std::string> dirs{"tensorrt_libs"};
    return dirs;
}

// Where, under a site-packages folder, the CUDA runtime wheel of a major version puts libcudart.so.<major>:
// nvidia-cuda-runtime-cu12 (and cu11) in nvidia/cuda_runtime/lib, nvidia-cuda-runtime 13 in nvidia/cu13/lib.
std::vector<std::string> cuda_wheel_dirs(int major)
{
    if (major >= 13)
        return {"nvidia/cu" + std::to_string(major) + "/lib"};
    return {"nvidia/cuda_runtime/lib"};
}

// dlopen of candidates in order; remembers what was tried (with dlerror's reason when the file exists but
// could not be loaded) for the "not installed" message.
class Search
{
public:
    void* open(const std::string& candidate, int flags)
    {
        if (void* handle = ::dlopen(candidate.c_str(), flags))
            return handle;
        const char* error = ::dlerror();
        const std::string why = error != nullptr ? error : "";
        const bool absent = why.empty() || why.rfind(candidate + ": cannot open shared object file", 0) == 0;
        tried_.push_back(absent ? candidate : candidate + " (" + why + ")");
        return nullptr;
    }
    std::string tried() const
    {
        return join(tried_);
    }

private:
    std::vector<std::string> tried_;
};

// libnvinfer.so.<the major of the headers this file is compiled with> in $RNNX_TENSORRT_LIBS's folders, the
// wheels' folders, then by name (LD_LIBRARY_PATH, the rpath, the loader's cache); unversioned libnvinfer.so
// last (it may be another major: the version check below catches that).
std::vector<std::string> nvinfer_candidates()
{
    const std::string soname = "libnvinfer.so." + std::to_string(NV_TENSORRT_MAJOR);
    std::vector<std::string> out;
    for (const std::string& dir : override_dirs())
        out.push_back(dir + "/" + soname);
    for (const std::string& site : site_packages_dirs())
        for (const std::string& sub : tensorrt_wheel_dirs())
            out.push_back(site + "/" + sub + "/" + soname);
    out.push_back(soname);
    out.push_back("libnvinfer.so");
    return out;
}

// The CUDA runtime majors to try: the one of the headers this file is compiled with, then the others
// TensorRT 10 is built for.
std::vector<int> cuda_majors()
{
    std::vector<int> out{CUDART_VERSION / 1000};
    for (int major : {13, 12, 11})
        if (major != out.front())
            out.push_back(major);
    return out;
}

// libcudart.so.<major> for each major in $RNNX_TENSORRT_LIBS's folders; then for each major, the wheels'
// folders and the name; unversioned libcudart.so last.
std::vector<std::string> cudart_candidates()
{
    std::vector<std::string> out;
    for (const std::string& dir : override_dirs())
        for (int major : cuda_majors())
            out.push_back(dir + "/libcudart.so." + std::to_string(major));
    for (int major : cuda_majors())
    {
        const std::string soname = "libcudart.so." + std::to_string(major);
        for (const std::string& site : site_packages_dirs())
            for (const std::string& sub : cuda_wheel_dirs(major))
                out.push_back(site + "/" + sub + "/" + soname);
        out.push_back(soname);
    }
    out.push_back("libcudart.so");
    return out;
}

struct TrtVersion
{
    int major = 0;
    int minor = 0;
    int patch = 0;
    std::string text() const
    {
        return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    }
};

// The loaded libnvinfer: getInferLibMajorVersion / Minor / Patch where it has them (TensorRT 10), else
// getInferLibVersion: (major * 100 + minor) * 100 + patch from TensorRT 10 on, major * 1000 + minor * 100 +
// patch before. False when it has neither (not a TensorRT library).
bool library_version(void* handle, TrtVersion& version, std::string& file)
{
    using VersionFn = int32_t (*)();
    auto major = reinterpret_cast<VersionFn>(::dlsym(handle, "getInferLibMajorVersion"));
    auto minor = reinterpret_cast<VersionFn>(::dlsym(handle, "getInferLibMinorVersion"));
    auto patch = reinterpret_cast<VersionFn>(::dlsym(handle, "getInferLibPatchVersion"));
    auto packed = reinterpret_cast<VersionFn>(::dlsym(handle, "getInferLibVersion"));
    void* any = major != nullptr ? reinterpret_cast<void*>(major) : reinterpret_cast<void*>(packed);
    Dl_info info{};
    if (any != nullptr && ::dladdr(any, &info) != 0 && info.dli_fname != nullptr)
        file = info.dli_fname;
    if (major != nullptr && minor != nullptr && patch != nullptr)
    {
        version = {major(), minor(), patch()};
        return true;
    }
    if (packed == nullptr)
        return false;
    const int32_t v = packed();
    version = v >= 100000 ? TrtVersion{v / 10000, v / 100 % 100, v % 100} : TrtVersion{v / 1000, v / 100 % 10, v % 100};
    return true;
}

// The oldest TensorRT of the headers' major that this backend serves: 10.7 for TensorRT 10, as Python's
// rnnx.runtime.tensorrt MIN_TENSORRT_VERSION (below 10.7 TensorRT's ONNX parser imports an rnnx node's local
// function instead of the registered plugin, so rnnx builds no engine with it; and an engine is deserialized
// only by the TensorRT that built it, so a 10.6 would fail later with a less clear message); N.0 for any later
// major N.
constexpr TrtVersion kMinimum{NV_TENSORRT_MAJOR, NV_TENSORRT_MAJOR == 10 ? 7 : 0, 0};

// What this build serves: "10.7 to 10.x (libnvinfer.so.<major>)" for the 10.x headers; `why`: the minimum's
// reason in the parentheses.
std::string served(bool why)
{
    const std::string major = std::to_string(kMinimum.major);
    const std::string minimum = major + "." + std::to_string(kMinimum.minor);
    return minimum + " to " + major + ".x (libnvinfer.so." + major
        + (why ? "; " + minimum + " is the oldest TensorRT rnnx builds engines with" : "") + ")";
}

struct Nvinfer
{
    void* handle = nullptr;
    std::string file;
    TrtVersion version;
};

// Loads libnvinfer once per process (a failure is not kept: the next open searches again). The first library
// found is checked against the headers' major version and kMinimum (RNNX_ERROR_UNAVAILABLE naming it, one line:
// a binary built with the headers of one major never drives another, whose interfaces' vtables differ), then
// made global (the rnnx plugin library finds TensorRT's registry through the global symbols).
const Nvinfer& nvinfer()
{
    static std::mutex mutex;
    static Nvinfer loaded;
    std::lock_guard<std::mutex> lock(mutex);
    if (loaded.handle != nullptr)
        return loaded;
    Search search;
    for (const std::string& candidate : nvinfer_candidates())
    {
        void* handle = search.open(candidate, RTLD_NOW | RTLD_LOCAL);
        if (handle == nullptr)
            continue;
        Nvinfer found;
        found.file = candidate;
        const bool known = library_version(handle, found.version, found.file);
        const TrtVersion& v = found.version;
        const bool too_old = known && v.major == kMinimum.major && v.minor < kMinimum.minor;
        if (!known || v.major != NV_TENSORRT_MAJOR || too_old)
        {
            ::dlclose(handle);
            throw Error(RNNX_ERROR_UNAVAILABLE,
                found.file + (known ? " is TensorRT " + v.text() : " has no getInferLibVersion")
                    + "; this librnnx_runtime was built with the TensorRT " + std::to_string(NV_TENSORRT_MAJOR) + "."
                    + std::to_string(NV_TENSORRT_MINOR) + " headers and serves TensorRT " + served(too_old)
                    + ": name the folder of one first in $" + kLibsVariable);
        }
        void* global = ::dlopen(found.file.c_str(), RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
        if (global != nullptr)
        {
            ::dlclose(handle);
            handle = global;
        }
        found.handle = handle;
        loaded = found;
        return loaded;
    }
    throw Error(RNNX_ERROR_UNAVAILABLE,
        "TensorRT is not installed here: none of " + search.tried() + " could be loaded (TensorRT "
            + std::to_string(NV_TENSORRT_MAJOR) + ": name the folder of libnvinfer.so."
            + std::to_string(NV_TENSORRT_MAJOR) + " in $" + kLibsVariable
            + ", put it on the loader path, or pip install tensorrt-cu12-libs / tensorrt-cu13-libs "
            + std::to_string(NV_TENSORRT_MAJOR) + ".x beside this library)");
}

struct Cuda
{
    using Malloc = cudaError_t (*)(void**, size_t);
    using Free = cudaError_t (*)(void*);
    using Memcpy = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind);
    using MemcpyAsync = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);
    using Memset = cudaError_t (*)(void*, int, size_t);
    using StreamCreate = cudaError_t (*)(cudaStream_t*);
    using StreamSync = cudaError_t (*)(cudaStream_t);
    using StreamDestroy = cudaError_t (*)(cudaStream_t);
    using SetDevice = cudaError_t (*)(int);
    using GetDevice = cudaError_t (*)(int*);
    using ErrorString = const char* (*)(cudaError_t);

    explicit Cuda(void* library)
        : handle(library)
    {
        malloc = load<Malloc>("cudaMalloc");
        free = load<Free>("cudaFree");
        memcpy = load<Memcpy>("cudaMemcpy");
        memcpy_async = load<MemcpyAsync>("cudaMemcpyAsync");
        memset = load<Memset>("cudaMemset");
        stream_create = load<StreamCreate>("cudaStreamCreate");
        stream_sync = load<StreamSync>("cudaStreamSynchronize");
        stream_destroy = load<StreamDestroy>("cudaStreamDestroy");
        set_device = load<SetDevice>("cudaSetDevice");
        get_device = load<GetDevice>("cudaGetDevice");
        error_string = load<ErrorString>("cudaGetErrorString");
    }

    template <typename T> T load(const char* symbol)
    {
        void* f = ::dlsym(handle, symbol);
        if (f == nullptr)
            throw Error(RNNX_ERROR_UNAVAILABLE, std::string("the CUDA runtime has no ") + symbol);
        return reinterpret_cast<T>(f);
    }

    std::string describe(cudaError_t status) const
    {
        const char* text = error_string(status);
        return "CUDA error " + std::to_string(status) + (text != nullptr ? std::string(": ") + text : "");
    }

    void check(cudaError_t status, const char* what) const
    {
        if (status != cudaSuccess)
            throw Error(RNNX_ERROR_BACKEND, std::string(what) + " failed (" + describe(status) + ")");
    }

    void* handle = nullptr;
    Malloc malloc = nullptr;
    Free free = nullptr;
    Memcpy memcpy = nullptr;
    MemcpyAsync memcpy_async = nullptr;
    Memset memset = nullptr;
    StreamCreate stream_create = nullptr;
    StreamSync stream_sync = nullptr;
    StreamDestroy stream_destroy = nullptr;
    SetDevice set_device = nullptr;
    GetDevice get_device = nullptr;
    ErrorString error_string = nullptr;
};

// The CUDA runtime, loaded once per process (a failure is not kept).
std::shared_ptr<const Cuda> cuda_runtime()
{
    static std::mutex mutex;
    static std::shared_ptr<const Cuda> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    if (loaded)
        return loaded;
    Search search;
    for (const std::string& candidate : cudart_candidates())
        if (void* handle = search.open(candidate, RTLD_NOW | RTLD_GLOBAL))
        {
            loaded = std::make_shared<const Cuda>(handle);
            return loaded;
        }
    throw Error(RNNX_ERROR_UNAVAILABLE,
        "the tensorrt backend needs the CUDA runtime; none of " + search.tried()
            + " could be loaded (name its folder in $" + kLibsVariable + ")");
}

// "cuda" -> 0, "cuda:N" -> N; RNNX_ERROR_INVALID_ARGUMENT otherwise.
int parse_device(const std::string& device)
{
    if (device == "cuda")
        return 0;
    const std::string prefix = "cuda:";
    if (device.rfind(prefix, 0) == 0 && device.size() > prefix.size() && device.size() <= prefix.size() + 4
        && std::all_of(device.begin() + prefix.size(), device.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::stoi(device.substr(prefix.size()));
    throw Error(RNNX_ERROR_INVALID_ARGUMENT,
        "the tensorrt backend runs on a CUDA device: device must be 'cuda' or 'cuda:N', got '" + device + "'");
}

// Makes `device` the calling thread's current CUDA device (cudaSetDevice is per thread) for the scope, and
// gives the thread its previous device back at the end. Every entry point that touches the device opens one.
class DeviceScope
{
public:
    // `quiet`: for destructors, which cannot report a failure.
    DeviceScope(const Cuda& cuda, int device, bool quiet = false)
        : cuda_(cuda)
    {
        if (cuda_.get_device(&previous_) != cudaSuccess)
            previous_ = -1;
        if (previous_ == device)
            return;
        const cudaError_t status = cuda_.set_device(device);
        if (status != cudaSuccess && !quiet)
            throw Error(RNNX_ERROR_UNAVAILABLE,
                "device cuda:" + std::to_string(device) + ": cudaSetDevice failed (" + cuda_.describe(status) + ")");
        changed_ = status == cudaSuccess;
    }
    ~DeviceScope()
    {
        if (changed_ && previous_ >= 0)
            cuda_.set_device(previous_);
    }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

private:
    const Cuda& cuda_;
    int previous_ = -1;
    bool changed_ = false;
};

class Logger : public nvinfer1::ILogger
{
public:
    void log(Severity severity, const char* message) noexcept override
    {
        if (severity <= Severity::kERROR)
        {
            std::lock_guard<std::mutex> lock(mutex_);
            last_ = message;
        }
    }
    std::string last() const
    {
        std::lock_guard<std::mutex> lock(mutex_);
        return last_;
    }
    // ": <the last error TensorRT logged>", or "" when it logged none.
    std::string says() const
    {
        const std::string text = last();
        return text.empty() ? "" : ": " + text;
    }

private:
    mutable std::mutex mutex_;
    std::string last_;
};

// A device allocation that only grows.
struct DeviceBuffer
{
    void* data = nullptr;
    size_t capacity = 0;
};

void release(const Cuda& cuda, DeviceBuffer& buffer)
{
    if (buffer.data != nullptr)
        cuda.free(buffer.data);
    buffer = DeviceBuffer{};
}

// Makes `buffer` hold at least `bytes` (at least 1: TensorRT takes no null address for an empty tensor); one
// that does is kept, a smaller one is replaced by one with room for half as much again as before, so a KV
// cache that grows by a position per call is reallocated a logarithmic number of times. The contents are not
// kept.
void reserve(const Cuda& cuda, DeviceBuffer& buffer, size_t bytes)
{
    if (buffer.data != nullptr && bytes <= buffer.capacity)
        return;
    const size_t size = std::max({bytes, buffer.capacity + buffer.capacity / 2, size_t{1}});
    release(cuda, buffer);
    cuda.check(cuda.malloc(&buffer.data, size), "cudaMalloc");
    buffer.capacity = size;
}

// One state tensor: `current` holds its value (of `shape`), `spare` receives the next call's output.
struct StateTensor
{
    DeviceBuffer current;
    DeviceBuffer spare;
    std::vector<int64_t> shape;
};

struct TrtState : BackendState
{
    std::shared_ptr<const Cuda> cuda; // shared: a state may outlive its model
    int device = 0;
    std::vector<StateTensor> tensors; // rnnx.json's state order
    ~TrtState() override
    {
        DeviceScope scope(*cuda, device, true);
        for (auto& t : tensors)
        {
            release(*cuda, t.current);
            release(*cuda, t.spare);
        }
    }
};

nvinfer1::Dims dims_of(const std::vector<int64_t>& shape)
{
    nvinfer1::Dims d{};
    d.nbDims = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i)
        d.d[i] = shape[i];
    return d;
}

size_t bytes_of(const std::vector<int64_t>& shape, const std::string& dtype)
{
    return static_cast<size_t>(numel(shape)) * itemsize(dtype);
}

class TrtBackend : public Backend
{
public:
    TrtBackend(const Artifact& artifact, const BackendOptions& options)
        : artifact_(artifact)
    {
        if (!artifact_.target_record.builds_engine)
            throw Error(RNNX_ERROR_INVALID_ARGUMENT,
                artifact_.directory + ": target " + artifact_.target
                    + "; the tensorrt backend needs a tensorrt export");
        if (options.trt_engine.empty())
            throw Error(RNNX_ERROR_INVALID_ARGUMENT,
                "the tensorrt backend needs trt_engine, a serialized engine: rnnx.runtime.tensorrt.build_engine(DIR) "
                "builds one from Python, and `export-model CHECKPOINT --target tensorrt --engine` prints its path");
        device_ = parse_device(options.device);
        const std::vector<PluginCreator> creators =
            required_creators(artifact_.metadata, artifact_.directory + "/rnnx.json");
        nvinfer_ = nvinfer();
        cuda_holder_ = cuda_runtime();
        const Cuda& cuda = *cuda_holder_;
        DeviceScope scope(cuda, device_);
        using Create = void* (*)(void*, int32_t);
        auto create = reinterpret_cast<Create>(::dlsym(nvinfer_.handle, "createInferRuntime_INTERNAL"));
        if (create == nullptr)
            throw Error(RNNX_ERROR_UNAVAILABLE, nvinfer_.file + " has no createInferRuntime_INTERNAL");
        runtime_.reset(static_cast<nvinfer1::IRuntime*>(create(&logger_, NV_TENSORRT_VERSION)));
        if (!runtime_)
            throw Error(RNNX_ERROR_BACKEND, "TensorRT could not create a runtime" + logger_.says());
        // The process-wide registry (Python's trt.get_plugin_registry()), which every runtime's own registry
        // searches: a library loaded there serves every model of the process, whoever loaded it.
        using GlobalRegistry = nvinfer1::IPluginRegistry* (*)();
        auto global_registry = reinterpret_cast<GlobalRegistry>(::dlsym(nvinfer_.handle, "getPluginRegistry"));
        nvinfer1::IPluginRegistry* registry = global_registry != nullptr ? global_registry() : nullptr;
        if (registry == nullptr)
            throw Error(RNNX_ERROR_UNAVAILABLE, nvinfer_.file + " has no plugin registry (getPluginRegistry)");
        if (!options.trt_plugin_library.empty())
            load_plugin_library(*registry, options.trt_plugin_library, creators, nvinfer_.version.major,
                [this] { return logger_.last(); });
        else if (const auto missing = missing_creators(*registry, creators); !missing.empty())
            throw Error(RNNX_ERROR_INVALID_ARGUMENT,
                artifact_.directory + ": the export needs the plugin creators " + creator_names(missing)
                    + ", which are not registered: set trt_plugin_library (librnnx_trt_plugins.so)");
        std::ifstream in(options.trt_engine, std::ios::binary);
        if (!in)
            throw Error(RNNX_ERROR_IO, options.trt_engine + ": cannot be read");
        const std::vector<char> plan((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        engine_.reset(runtime_->deserializeCudaEngine(plan.data(), plan.size()));
        if (!engine_)
            throw Error(RNNX_ERROR_BACKEND,
                options.trt_engine + ": TensorRT could not deserialize the engine" + logger_.says());
        check_profiles(options.trt_engine);
        context_.reset(engine_->createExecutionContext());
        if (!context_)
            throw Error(RNNX_ERROR_BACKEND, "TensorRT could not create an execution context" + logger_.says());
        cuda.check(cuda.stream_create(&stream_), "cudaStreamCreate");
    }

    ~TrtBackend() override
    {
        const Cuda& cuda = *cuda_holder_;
        DeviceScope scope(cuda, device_, true);
        context_.reset();
        engine_.reset();
        runtime_.reset();
        release(cuda, ids_);
        release(cuda, mask_);
        release(cuda, logits_);
        if (stream_ != nullptr)
            cuda.stream_destroy(stream_);
    }

    std::string describe() const override
    {
        return "tensorrt " + nvinfer_.version.text() + " on cuda:" + std::to_string(device_);
    }

    std::unique_ptr<BackendState> init_state(int64_t batch) override
    {
        const Cuda& cuda = *cuda_holder_;
        DeviceScope scope(cuda, device_);
        auto state = new_state();
        for (const StateSpec& spec : artifact_.states)
        {
            StateTensor t;
            t.shape = spec.concrete(batch, 0);
            state->tensors.push_back(t);
            const size_t bytes = bytes_of(t.shape, spec.dtype);
            reserve(cuda, state->tensors.back().current, bytes);
            if (bytes != 0)
                cuda.check(cuda.memset(state->tensors.back().current.data, 0, bytes), "cudaMemset");
        }
        return state;
    }

    std::vector<HostTensor> state_to_host(const BackendState& state) override
    {
        const Cuda& cuda = *cuda_holder_;
        DeviceScope scope(cuda, device_);
        const auto& tensors = static_cast<const TrtState&>(state).tensors;
        std::vector<HostTensor> out;
        for (size_t i = 0; i < tensors.size(); ++i)
        {
            HostTensor t{artifact_.states[i].dtype, tensors[i].shape, {}};
            t.bytes.resize(bytes_of(t.shape, t.dtype));
            if (!t.bytes.empty())
                cuda.check(cuda.memcpy(t.bytes.data(), tensors[i].current.data, t.bytes.size(), cudaMemcpyDeviceToHost),
                    "cudaMemcpy");
            out.push_back(std::move(t));
        }
        return out;
    }

    std::unique_ptr<BackendState> state_from_host(const std::vector<HostTensor>& tensors) override
    {
        const Cuda& cuda = *cuda_holder_;
        DeviceScope scope(cuda, device_);
        auto state = new_state();
        for (const HostTensor& host : tensors)
        {
            StateTensor t;
            t.shape = host.shape;
            state->tensors.push_back(t);
            reserve(cuda, state->tensors.back().current, host.bytes.size());
            if (!host.bytes.empty())
                cuda.check(cuda.memcpy(state->tensors.back().current.data, host.bytes.data(), host.bytes.size(),
                               cudaMemcpyHostToDevice),
                    "cudaMemcpy");
        }
        return state;
    }

    void run(const std::vector<int64_t>& ids, const std::vector<int64_t>& mask, int64_t batch, int64_t length,
        std::unique_ptr<BackendState>& state, std::vector<float>& logits) override
    {
        const Cuda& cuda = *cuda_holder_;
        DeviceScope scope(cuda, device_);
        std::lock_guard<std::mutex> lock(mutex_); // one execution context, one set of input / logits buffers
        auto& tensors = static_cast<TrtState&>(*state).tensors;
        const int32_t profile = length == 1 ? 0 : 1; // rnnx.runtime.tensorrt.profiles: decode, prefill
        if (profile != profile_)
        {
            if (!context_->setOptimizationProfileAsync(profile, stream_))
                throw Error(RNNX_ERROR_BACKEND,
                    "TensorRT could not select profile " + std::to_string(profile) + logger_.says());
            profile_ = profile;
        }
        const size_t bytes = ids.size() * sizeof(int64_t);
        reserve(cuda, ids_, bytes);
        reserve(cuda, mask_, bytes);
        cuda.check(cuda.memcpy_async(ids_.data, ids.data(), bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
        cuda.check(
            cuda.memcpy_async(mask_.data, mask.data(), bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
        bind(artifact_.input_names[0], {batch, length}, ids_.data, true);
        bind(artifact_.input_names[1], {batch, length}, mask_.data, true);
        // The outputs go to the spare buffers; the state's values are untouched until the call succeeded.
        std::vector<std::vector<int64_t>> next(tensors.size());
        for (size_t i = 0; i < tensors.size(); ++i)
        {
            const StateSpec& spec = artifact_.states[i];
            bind(spec.input, tensors[i].shape, tensors[i].current.data, true);
            next[i] = tensors[i].shape;
            if (spec.grow_axis >= 0)
                next[i][static_cast<size_t>(spec.grow_axis)] += length;
            reserve(cuda, tensors[i].spare, bytes_of(next[i], spec.dtype));
            bind(spec.output, next[i], tensors[i].spare.data, false);
        }
        const size_t logit_size = artifact_.logits_dtype == "float16" ? 2 : 4;
        const size_t count = static_cast<size_t>(batch * length * artifact_.vocab_size);
        reserve(cuda, logits_, count * logit_size);
        bind(artifact_.output_names[0], {batch, length, artifact_.vocab_size}, logits_.data, false);
        check_output(artifact_.output_names[0], {batch, length, artifact_.vocab_size});
        for (size_t i = 0; i < tensors.size(); ++i)
            check_output(artifact_.states[i].output, next[i]);
        if (!context_->enqueueV3(stream_))
            throw Error(RNNX_ERROR_BACKEND, "TensorRT enqueueV3 failed" + logger_.says());
        logits.resize(count);
        if (logit_size == 4)
            cuda.check(cuda.memcpy_async(logits.data(), logits_.data, count * 4, cudaMemcpyDeviceToHost, stream_),
                "cudaMemcpyAsync");
        else
        {
            half_.resize(count);
            cuda.check(cuda.memcpy_async(half_.data(), logits_.data, count * 2, cudaMemcpyDeviceToHost, stream_),
                "cudaMemcpyAsync");
        }
        cuda.check(cuda.stream_sync(stream_), "cudaStreamSynchronize");
        if (logit_size == 2)
            for (size_t i = 0; i < count; ++i)
                logits[i] = half_to_float(half_[i]);
        for (size_t i = 0; i < tensors.size(); ++i)
        {
            std::swap(tensors[i].current, tensors[i].spare);
            tensors[i].shape = std::move(next[i]);
        }
    }

private:
    std::unique_ptr<TrtState> new_state() const
    {
        auto state = std::make_unique<TrtState>();
        state->cuda = cuda_holder_;
        state->device = device_;
        return state;
    }

    // run() selects profile 0 for a one-token call and 1 for any other: an engine built elsewhere must have
    // them in that order (RNNX_ERROR_METADATA naming the engine file and what its profiles hold otherwise).
    void check_profiles(const std::string& file) const
    {
        const std::string& ids = artifact_.input_names[0]; // (batch, length)
        std::vector<SequenceRange> ranges;
        for (int32_t p = 0; p < engine_->getNbOptimizationProfiles(); ++p)
        {
            using Select = nvinfer1::OptProfileSelector;
            const nvinfer1::Dims lo = engine_->getProfileShape(ids.c_str(), p, Select::kMIN);
            const nvinfer1::Dims opt = engine_->getProfileShape(ids.c_str(), p, Select::kOPT);
            const nvinfer1::Dims hi = engine_->getProfileShape(ids.c_str(), p, Select::kMAX);
            if (lo.nbDims != 2 || opt.nbDims != 2 || hi.nbDims != 2)
                throw Error(RNNX_ERROR_METADATA,
                    file + ": the engine has no input '" + ids + "' of 2 dimensions (batch, length) in profile "
                        + std::to_string(p) + "; rnnx.json names it first: the engine is of another export");
            ranges.push_back({lo.d[1], opt.d[1], hi.d[1]});
        }
        const std::string problem = profile_order_problem(ids, ranges);
        if (!problem.empty())
            throw Error(RNNX_ERROR_METADATA, file + ": " + problem);
    }

    // The engine's shape for an output, given the bound inputs, must be the one its buffer was sized for.
    void check_output(const std::string& name, const std::vector<int64_t>& allocated)
    {
        const nvinfer1::Dims dims = context_->getTensorShape(name.c_str());
        const std::vector<int64_t> engine(dims.d, dims.d + std::max(dims.nbDims, 0));
        if (dims.nbDims < 0 || engine != allocated)
            throw Error(RNNX_ERROR_METADATA,
                artifact_.directory + "/rnnx.json: output '" + name + "' is " + shape_text(engine)
                    + " in the engine, rnnx.json says " + shape_text(allocated));
    }

    void bind(const std::string& name, const std::vector<int64_t>& shape, void* data, bool input)
    {
        if (input && !context_->setInputShape(name.c_str(), dims_of(shape)))
            throw Error(RNNX_ERROR_BACKEND,
                "TensorRT rejected the shape " + shape_text(shape) + " of '" + name + "'" + logger_.says());
        if (!context_->setTensorAddress(name.c_str(), data))
            throw Error(RNNX_ERROR_BACKEND, "TensorRT could not bind '" + name + "'" + logger_.says());
    }

    struct Deleter
    {
        template <typename T> void operator()(T* p) const
        {
            delete p;
        }
    };

    const Artifact& artifact_;
    int device_ = 0;
    Nvinfer nvinfer_;
    std::shared_ptr<const Cuda> cuda_holder_;
    Logger logger_;
    std::unique_ptr<nvinfer1::IRuntime, Deleter> runtime_;
    std::unique_ptr<nvinfer1::ICudaEngine, Deleter> engine_;
    std::unique_ptr<nvinfer1::IExecutionContext, Deleter> context_;
    cudaStream_t stream_ = nullptr;
    int32_t profile_ = -1;
    std::mutex mutex_;
    DeviceBuffer ids_;
    DeviceBuffer mask_;
    DeviceBuffer logits_;
    std::vector<uint16_t> half_;
};

} // namespace

std::unique_ptr<Backend> make_tensorrt_backend(const Artifact& artifact, const BackendOptions& options)
{
    return std::make_unique<TrtBackend>(artifact, options);
}

} // namespace rnnx

#else

namespace rnnx
{

std::unique_ptr<Backend> make_tensorrt_backend(const Artifact&, const BackendOptions&)
{
    throw Error(RNNX_ERROR_UNAVAILABLE,
        "this librnnx_runtime was built without the TensorRT backend (no TensorRT or "
        "CUDA headers at build time)");
}

} // namespace rnnx

#endif
