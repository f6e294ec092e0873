// The emulated CUDA runtime: the subset of cuda_runtime_api.h that the rnnx kernels, the plugins and their
// tests call, defined here so that programs compiled against the real headers link without libcudart and
// run on the host. "Device" memory is host memory (cudaMalloc'ed blocks start filled with 0xff bytes, a
// NaN pattern), every stream is synchronous (work runs when it is enqueued, so stream order holds), and
// there is one device: "rnnx CUDA host emulation" with the limits of sm_86 (compute capability 8.6,
// 99 KiB opt-in shared memory per block, the smallest of the architectures the kernels are built for).
//
// Symbols are hidden by the library's visibility settings and version script, so the emulation never
// interposes on a real libcudart in the same process.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "emulation_internal.h"

namespace rnnx
{
namespace emu
{
namespace
{

struct RuntimeState
{
    std::mutex mutex;
    cudaError_t last_error = cudaSuccess;
    std::set<const void*> allocations;
    std::set<const void*> streams;
};

RuntimeState& runtime()
{
    static RuntimeState r;
    return r;
}

cudaError_t fail(cudaError_t error)
{
    setLastError(error);
    return error;
}

} // namespace

cudaError_t takeLastError()
{
    std::lock_guard<std::mutex> lock(runtime().mutex);
    const cudaError_t error = runtime().last_error;
    runtime().last_error = cudaSuccess;
    return error;
}

cudaError_t peekLastError()
{
    std::lock_guard<std::mutex> lock(runtime().mutex);
    return runtime().last_error;
}

void setLastError(cudaError_t error)
{
    std::lock_guard<std::mutex> lock(runtime().mutex);
    runtime().last_error = error;
}

bool isValidStream(cudaStream_t stream)
{
    if (stream == nullptr)
        return true;
    std::lock_guard<std::mutex> lock(runtime().mutex);
    return runtime().streams.count(stream) != 0;
}

} // namespace emu
} // namespace rnnx

using rnnx::emu::fail;
using rnnx::emu::runtime;

extern "C"
{

    cudaError_t cudaGetLastError(void)
    {
        return rnnx::emu::takeLastError();
    }

    cudaError_t cudaPeekAtLastError(void)
    {
        return rnnx::emu::peekLastError();
    }

    const char* cudaGetErrorName(cudaError_t error)
    {
        switch (error)
        {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
        case cudaErrorNotSupported: return "cudaErrorNotSupported";
        default: return "cudaErrorUnknown";
        }
    }

    const char* cudaGetErrorString(cudaError_t error)
    {
        switch (error)
        {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        case cudaErrorMisalignedAddress: return "misaligned address";
        case cudaErrorLaunchFailure: return "unspecified launch failure";
        case cudaErrorNotSupported: return "operation not supported";
        default: return "unknown error";
        }
    }

    cudaError_t cudaGetDeviceCount(int* count)
    {
        if (count == nullptr)
            return fail(cudaErrorInvalidValue);
        *count = 1;
        return cudaSuccess;
    }

    cudaError_t cudaSetDevice(int device)
    {
        return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
    }

    cudaError_t cudaGetDevice(int* device)
    {
        if (device == nullptr)
            return fail(cudaErrorInvalidValue);
        *device = 0;
        return cudaSuccess;
    }

    cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device)
    {
        if (prop == nullptr)
            return fail(cudaErrorInvalidValue);
        if (device != 0)
            return fail(cudaErrorInvalidDevice);
        std::memset(prop, 0, sizeof(*prop));
        std::strncpy(prop->name, "rnnx CUDA host emulation", sizeof(prop->name) - 1);
        prop->major = 8;
        prop->minor = 6;
        prop->warpSize = 32;
        prop->maxThreadsPerBlock = 1024;
        prop->maxThreadsDim[0] = 1024;
        prop->maxThreadsDim[1] = 1024;
        prop->maxThreadsDim[2] = 64;
        prop->maxGridSize[0] = 0x7fffffff;
        prop->maxGridSize[1] = 65535;
        prop->maxGridSize[2] = 65535;
        prop->sharedMemPerBlock = rnnx::emu::kDefaultShared;
        prop->sharedMemPerBlockOptin = rnnx::emu::kMaxSharedOptIn;
        prop->multiProcessorCount = 1;
        prop->totalGlobalMem = size_t{1} << 32;
        return cudaSuccess;
    }

    cudaError_t cudaMalloc(void** pointer, size_t size)
    {
        if (pointer == nullptr)
            return fail(cudaErrorInvalidValue);
        void* block = nullptr;
        if (posix_memalign(&block, 256, size == 0 ? 1 : size) != 0)
            return fail(cudaErrorMemoryAllocation);
        std::memset(block, 0xff, size); // uninitialised: NaN pattern
        std::lock_guard<std::mutex> lock(runtime().mutex);
        runtime().allocations.insert(block);
        *pointer = block;
        return cudaSuccess;
    }

    cudaError_t cudaFree(void* pointer)
    {
        if (pointer == nullptr)
            return cudaSuccess;
        {
            std::lock_guard<std::mutex> lock(runtime().mutex);
            if (runtime().allocations.erase(pointer) == 0)
            {
                runtime().last_error = cudaErrorInvalidValue;
                return cudaErrorInvalidValue;
            }
        }
        std::free(pointer);
        return cudaSuccess;
    }

    cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind)
    {
        if (count == 0)
            return cudaSuccess;
        if (dst == nullptr || src == nullptr)
            return fail(cudaErrorInvalidValue);
        std::memmove(dst, src, count);
        return cudaSuccess;
    }

    cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream)
    {
        if (!rnnx::emu::isValidStream(stream))
            return fail(cudaErrorInvalidResourceHandle);
        return cudaMemcpy(dst, src, count, kind);
    }

    cudaError_t cudaMemset(void* dst, int value, size_t count)
    {
        if (count == 0)
            return cudaSuccess;
        if (dst == nullptr)
            return fail(cudaErrorInvalidValue);
        std::memset(dst, value, count);
        return cudaSuccess;
    }

    cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t stream)
    {
        if (!rnnx::emu::isValidStream(stream))
            return fail(cudaErrorInvalidResourceHandle);
        return cudaMemset(dst, value, count);
    }

    cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int)
    {
        if (stream == nullptr)
            return fail(cudaErrorInvalidValue);
        auto* handle = reinterpret_cast<cudaStream_t>(new char(0));
        std::lock_guard<std::mutex> lock(runtime().mutex);
        runtime().streams.insert(handle);
        *stream = handle;
        return cudaSuccess;
    }

    cudaError_t cudaStreamCreate(cudaStream_t* stream)
    {
        return cudaStreamCreateWithFlags(stream, 0);
    }

    cudaError_t cudaStreamDestroy(cudaStream_t stream)
    {
        {
            std::lock_guard<std::mutex> lock(runtime().mutex);
            if (stream == nullptr || runtime().streams.erase(stream) == 0)
            {
                runtime().last_error = cudaErrorInvalidResourceHandle;
                return cudaErrorInvalidResourceHandle;
            }
        }
        delete reinterpret_cast<char*>(stream);
        return cudaSuccess;
    }

    cudaError_t cudaStreamSynchronize(cudaStream_t stream)
    {
        return rnnx::emu::isValidStream(stream) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
    }

    cudaError_t cudaDeviceSynchronize(void)
    {
        return cudaSuccess;
    }

} // extern "C"
