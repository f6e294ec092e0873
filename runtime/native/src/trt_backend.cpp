// The TensorRT backend: a serialized engine (built by rnnx.runtime.tensorrt.build_engine with the decode and
// prefill optimization profiles) and the rnnx plugin library. libnvinfer and libcudart are loaded with
// dlopen, so one binary serves both backends and says what is missing where TensorRT is absent. The state is
// device buffers; each call binds the inputs, allocates the outputs (present state, logits), runs
// enqueueV3 on the backend's stream, copies the logits to the host and frees the previous state's buffers.
#include "backend.h"
#include "error.h"

#if RNNX_WITH_TENSORRT

#include <NvInferRuntime.h>

#include <algorithm>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <iterator>
#include <mutex>

namespace rnnx
{
namespace
{

void* open_first(std::initializer_list<const char*> names, std::string& tried)
{
    for (const char* name : names)
    {
        if (void* handle = ::dlopen(name, RTLD_NOW | RTLD_GLOBAL))
            return handle;
        tried += std::string(tried.empty() ? "" : ", ") + name;
    }
    return nullptr;
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

    Cuda()
    {
        std::string tried;
        handle = open_first({"libcudart.so", "libcudart.so.13", "libcudart.so.12"}, tried);
        if (handle == nullptr)
            throw Error(RNNX_ERROR_UNAVAILABLE,
                "the tensorrt backend needs the CUDA runtime; none of " + tried + " could be loaded");
        malloc = load<Malloc>("cudaMalloc");
        free = load<Free>("cudaFree");
        memcpy = load<Memcpy>("cudaMemcpy");
        memcpy_async = load<MemcpyAsync>("cudaMemcpyAsync");
        memset = load<Memset>("cudaMemset");
        stream_create = load<StreamCreate>("cudaStreamCreate");
        stream_sync = load<StreamSync>("cudaStreamSynchronize");
        stream_destroy = load<StreamDestroy>("cudaStreamDestroy");
    }

    template <typename T> T load(const char* symbol)
    {
        void* f = ::dlsym(handle, symbol);
        if (f == nullptr)
            throw Error(RNNX_ERROR_UNAVAILABLE, std::string("the CUDA runtime has no ") + symbol);
        return reinterpret_cast<T>(f);
    }

    void check(cudaError_t status, const char* what) const
    {
        if (status != cudaSuccess)
            throw Error(
                RNNX_ERROR_BACKEND, std::string("CUDA ") + what + " failed (error " + std::to_string(status) + ")");
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

private:
    mutable std::mutex mutex_;
    std::string last_;
};

struct DeviceBuffer
{
    void* data = nullptr;
    std::vector<int64_t> shape;
};

struct TrtState : BackendState
{
    std::shared_ptr<const Cuda> cuda;  // shared: a state may outlive its model
    std::vector<DeviceBuffer> buffers; // rnnx.json's state order
    ~TrtState() override
    {
        for (auto& b : buffers)
            if (b.data != nullptr)
                cuda->free(b.data);
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

class TrtBackend : public Backend
{
public:
    TrtBackend(const Artifact& artifact, const BackendOptions& options)
        : artifact_(artifact)
        , cuda_holder_(std::make_shared<Cuda>())
        , cuda_(*cuda_holder_)
    {
        if (artifact_.target != "tensorrt")
            throw Error(RNNX_ERROR_INVALID_ARGUMENT,
                artifact_.directory + ": target " + artifact_.target
                    + "; the tensorrt backend needs a tensorrt export");
        if (options.trt_engine.empty())
            throw Error(RNNX_ERROR_INVALID_ARGUMENT,
                "the tensorrt backend needs trt_engine (a serialized engine; "
                "python3 -m rnnx.runtime.tensorrt builds one)");
        std::string tried;
        nvinfer_ = open_first({"libnvinfer.so", "libnvinfer.so.10"}, tried);
        if (nvinfer_ == nullptr)
            throw Error(
                RNNX_ERROR_UNAVAILABLE, "TensorRT is not installed here: none of " + tried + " could be loaded");
        using Create = void* (*)(void*, int32_t);
        auto create = reinterpret_cast<Create>(::dlsym(nvinfer_, "createInferRuntime_INTERNAL"));
        if (create == nullptr)
            throw Error(RNNX_ERROR_UNAVAILABLE, "libnvinfer has no createInferRuntime_INTERNAL");
        runtime_.reset(static_cast<nvinfer1::IRuntime*>(create(&logger_, NV_TENSORRT_VERSION)));
        if (!runtime_)
            throw Error(RNNX_ERROR_BACKEND, "TensorRT could not create a runtime: " + logger_.last());
        if (!options.trt_plugin_library.empty()
            && runtime_->getPluginRegistry().loadLibrary(options.trt_plugin_library.c_str()) == nullptr)
            throw Error(RNNX_ERROR_BACKEND,
                options.trt_plugin_library + ": TensorRT could not load the plugin library: " + logger_.last());
        std::ifstream in(options.trt_engine, std::ios::binary);
        if (!in)
            throw Error(RNNX_ERROR_IO, options.trt_engine + ": cannot be read");
        const std::vector<char> plan((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        engine_.reset(runtime_->deserializeCudaEngine(plan.data(), plan.size()));
        if (!engine_)
            throw Error(RNNX_ERROR_BACKEND,
                options.trt_engine + ": TensorRT could not deserialize the engine: " + logger_.last());
        context_.reset(engine_->createExecutionContext());
        if (!context_)
            throw Error(RNNX_ERROR_BACKEND, "TensorRT could not create an execution context: " + logger_.last());
        cuda_.check(cuda_.stream_create(&stream_), "cudaStreamCreate");
    }

    ~TrtBackend() override
    {
        context_.reset();
        engine_.reset();
        runtime_.reset();
        if (stream_ != nullptr)
            cuda_.stream_destroy(stream_);
    }

    std::string describe() const override
    {
        return "tensorrt on cuda";
    }

    std::unique_ptr<BackendState> init_state(int64_t batch) override
    {
        std::vector<HostTensor> zeros;
        for (const StateSpec& spec : artifact_.states)
        {
            HostTensor t{spec.dtype, spec.concrete(batch, 0), {}};
            t.bytes.assign(static_cast<size_t>(numel(t.shape)) * itemsize(spec.dtype), 0);
            zeros.push_back(std::move(t));
        }
        return state_from_host(zeros);
    }

    std::vector<HostTensor> state_to_host(const BackendState& state) override
    {
        const auto& buffers = static_cast<const TrtState&>(state).buffers;
        std::vector<HostTensor> out;
        for (size_t i = 0; i < buffers.size(); ++i)
        {
            HostTensor t{artifact_.states[i].dtype, buffers[i].shape, {}};
            t.bytes.resize(static_cast<size_t>(numel(t.shape)) * itemsize(t.dtype));
            if (!t.bytes.empty())
                cuda_.check(cuda_.memcpy(t.bytes.data(), buffers[i].data, t.bytes.size(), cudaMemcpyDeviceToHost),
                    "cudaMemcpy");
            out.push_back(std::move(t));
        }
        return out;
    }

    std::unique_ptr<BackendState> state_from_host(const std::vector<HostTensor>& tensors) override
    {
        auto state = std::make_unique<TrtState>();
        state->cuda = cuda_holder_;
        for (const HostTensor& t : tensors)
        {
            DeviceBuffer b{allocate(t.bytes.size()), t.shape};
            state->buffers.push_back(b);
            if (!t.bytes.empty())
                cuda_.check(cuda_.memcpy(b.data, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
        }
        return state;
    }

    void run(const std::vector<int64_t>& ids, const std::vector<int64_t>& mask, int64_t batch, int64_t length,
        std::unique_ptr<BackendState>& state, std::vector<float>& logits) override
    {
        std::lock_guard<std::mutex> lock(mutex_); // one execution context
        auto& old = static_cast<TrtState&>(*state);
        const int32_t profile = length == 1 ? 0 : 1; // rnnx.runtime.tensorrt.profiles: decode, prefill
        if (profile != profile_)
        {
            if (!context_->setOptimizationProfileAsync(profile, stream_))
                throw Error(RNNX_ERROR_BACKEND,
                    "TensorRT could not select profile " + std::to_string(profile) + ": " + logger_.last());
            profile_ = profile;
        }
        const size_t bytes = ids.size() * sizeof(int64_t);
        Scratch ids_d(cuda_, allocate(bytes)), mask_d(cuda_, allocate(bytes));
        cuda_.check(cuda_.memcpy(ids_d.data, ids.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
        cuda_.check(cuda_.memcpy(mask_d.data, mask.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
        bind(artifact_.input_names[0], {batch, length}, ids_d.data, true);
        bind(artifact_.input_names[1], {batch, length}, mask_d.data, true);
        auto next = std::make_unique<TrtState>();
        next->cuda = cuda_holder_;
        for (size_t i = 0; i < artifact_.states.size(); ++i)
        {
            const StateSpec& spec = artifact_.states[i];
            bind(spec.input, old.buffers[i].shape, old.buffers[i].data, true);
            std::vector<int64_t> shape = old.buffers[i].shape;
            if (spec.grow_axis >= 0)
                shape[static_cast<size_t>(spec.grow_axis)] += length;
            next->buffers.push_back({allocate(static_cast<size_t>(numel(shape)) * itemsize(spec.dtype)), shape});
            bind(spec.output, shape, next->buffers.back().data, false);
        }
        const size_t logit_size = artifact_.logits_dtype == "float16" ? 2 : 4;
        const size_t count = static_cast<size_t>(batch * length * artifact_.vocab_size);
        Scratch logits_d(cuda_, allocate(count * logit_size));
        bind(artifact_.output_names[0], {batch, length, artifact_.vocab_size}, logits_d.data, false);
        check_output(artifact_.output_names[0], {batch, length, artifact_.vocab_size});
        for (size_t i = 0; i < artifact_.states.size(); ++i)
            check_output(artifact_.states[i].output, next->buffers[i].shape);
        if (!context_->enqueueV3(stream_))
            throw Error(RNNX_ERROR_BACKEND, "TensorRT enqueueV3 failed: " + logger_.last());
        cuda_.check(cuda_.stream_sync(stream_), "cudaStreamSynchronize");
        logits.resize(count);
        if (logit_size == 4)
            cuda_.check(cuda_.memcpy(logits.data(), logits_d.data, count * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
        else
        {
            std::vector<uint16_t> half(count);
            cuda_.check(cuda_.memcpy(half.data(), logits_d.data, count * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
            for (size_t i = 0; i < count; ++i)
                logits[i] = half_to_float(half[i]);
        }
        state = std::move(next); // frees the previous state's buffers
    }

private:
    struct Scratch
    {
        Scratch(const Cuda& c, void* p)
            : cuda(c)
            , data(p)
        {
        }
        ~Scratch()
        {
            if (data != nullptr)
                cuda.free(data);
        }
        const Cuda& cuda;
        void* data;
    };

    void* allocate(size_t bytes)
    {
        void* p = nullptr;
        cuda_.check(cuda_.malloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
        return p;
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
                "TensorRT rejected the shape " + shape_text(shape) + " of '" + name + "': " + logger_.last());
        if (!context_->setTensorAddress(name.c_str(), data))
            throw Error(RNNX_ERROR_BACKEND, "TensorRT could not bind '" + name + "': " + logger_.last());
    }

    struct Deleter
    {
        template <typename T> void operator()(T* p) const
        {
            delete p;
        }
    };

    const Artifact& artifact_;
    std::shared_ptr<Cuda> cuda_holder_;
    Cuda& cuda_;
    Logger logger_;
    void* nvinfer_ = nullptr;
    std::unique_ptr<nvinfer1::IRuntime, Deleter> runtime_;
    std::unique_ptr<nvinfer1::ICudaEngine, Deleter> engine_;
    std::unique_ptr<nvinfer1::IExecutionContext, Deleter> context_;
    cudaStream_t stream_ = nullptr;
    int32_t profile_ = -1;
    std::mutex mutex_;
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
