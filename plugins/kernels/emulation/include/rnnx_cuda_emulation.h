// CUDA host emulation: the device-side built-ins the rnnx kernels use, for compiling the kernel sources
// (plugins/*/cuda/*.cu) with a plain C++ compiler and running them on the CPU.
//
// Why: CI and most development machines have nvcc but no GPU. Compiled this way, the unchanged kernel
// sources run in CI against the naive references, under AddressSanitizer, and under several thread
// schedules, so indexing, tiling, barriers and state handling are tested without a device. What it cannot
// show (real hardware numerics of expf / tensor cores, timing, the real memory model) still needs a GPU.
//
// Execution model: a launch runs its blocks one after another; the threads of a block are cooperative
// fibers (one stack each) switched only at __syncthreads and warp-collective operations, so every
// emulated thread runs to its next barrier before another starts. The order in which threads (and
// blocks) run between barriers is the emulator's schedule (setSchedule): results that change with the
// schedule reveal a data race the kernel's barriers do not prevent.
//
// Checked, each failing the launch with a message (takeLaunchErrorMessage()):
//   launch configuration   block <= 1024 threads, grid.y/z <= 65535, dynamic shared memory within
//                          48 KiB unless raised by cudaFuncSetAttribute, and within the opt-in limit;
//                          the stream exists
//   warp collectives       __shfl_xor_sync and the wmma *_sync calls reached by all 32 lanes of the warp
//                          at the same call site, as often as each other (errors name file:line)
//   wmma                   pointers 256-bit aligned, ldm a multiple of 16 bytes (the PTX rules), the
//                          same pointer and ldm in every lane
// __syncthreads waits for every thread of the block that has not exited (exited threads count as
// arrived, as on Volta and later). A kernel that spins on memory another thread of its block writes
// would never yield and hang the emulation; the rnnx kernels do not.
// Dynamic shared memory and cudaMalloc'ed memory start filled with 0xff bytes (a NaN pattern), so reads
// of memory nobody wrote show up as NaN instead of a lucky zero.
//
// The kernels reach this header through type_utils.cuh when RNNX_CUDA_HOST_EMULATION is defined, and use
// two macros that it defines for both compilers:
//   RNNX_LAUNCH(kernel, grid, block[, smem[, stream]])(args...)
//       = kernel<<<grid, block, smem, stream>>>(args...)
//   RNNX_DYNAMIC_SHARED_MEMORY(type, name, alignment)
//       = extern __shared__ __align__(alignment) type name[]
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <utility>

namespace rnnx
{
namespace emu
{

//! Indices of the running emulated thread (threadIdx, blockIdx, blockDim, gridDim).
struct ThreadIndex
{
    dim3 thread;
    dim3 block;
    dim3 block_dim;
    dim3 grid_dim;
};

//! The running emulated thread's indices; fails the launch when called outside a kernel.
const ThreadIndex& currentIndex();

//! __syncthreads(): waits until every thread of the block that has not exited arrives.
void syncThreads();

//! Where a warp collective is called in the kernel source (lanes must meet at the same one).
struct Site
{
    const char* file;
    int line;
    //! As a default argument, the caller's file and line (GCC and Clang evaluate the builtins there).
    static constexpr Site here(const char* file = __builtin_FILE(), int line = __builtin_LINE())
    {
        return Site{file, line};
    }
};
#define RNNX_EMU_CALL_SITE ::rnnx::emu::Site::here()

//! Waits until all 32 lanes of the calling warp reach this warp collective: the same `what` at the
//! same `site`, as often as each other (else the launch fails, naming both).
void warpCollective(const char* what, Site site);

//! __shfl_xor_sync for 32-bit values: the value of lane (lane ^ lane_mask); mask must be full.
float shuffleXor(unsigned mask, float value, int lane_mask, int width, Site site);

//! For warp-collective helpers, right after warpCollective(): true for exactly one lane of the warp (the
//! first to run after the release), which may compute a result for the whole warp into warpScratch().
bool warpLeader();

//! 1 KiB of scratch per warp of the block, for a warp leader's result (valid until the next collective).
float* warpScratch();

//! After warpCollective(): fails the launch unless every lane passes the same `values` (what the leader
//! passed), as warp-collective operations require of their pointer and stride arguments.
void checkWarpUniform(const char* what, uint64_t value0, uint64_t value1);

//! Counts one wmma::mma_sync of a warp (Stats::mma).
void countMma();

//! The block's dynamic shared memory (the smem size given at launch).
void* dynamicSharedMemory();

//! Fails the running launch: records `error` and `message`, stops the kernel and returns to the launcher.
[[noreturn]] void failLaunch(cudaError_t error, const char* message);

//! Runs `body` once per thread of every block of `grid` x `block`; returns the launch status.
cudaError_t launch(const std::function<void()>& body, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
    const void* kernel);

//! cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes).
cudaError_t setFuncAttribute(const void* kernel, cudaFuncAttribute attribute, int value);

//! Thread / block order between barriers: in order, reversed, or a seeded random permutation per round.
enum class Schedule
{
    kInOrder = 0,
    kReversed = 1,
    kRandom = 2
};
void setSchedule(Schedule schedule, uint64_t seed);

//! Counters since the last resetStats(): what the launches executed.
struct Stats
{
    uint64_t launches;
    uint64_t blocks;
    uint64_t threads;
    uint64_t block_barriers;   //!< __syncthreads rounds (per block)
    uint64_t warp_collectives; //!< warp-collective rounds (per warp)
    uint64_t mma;              //!< wmma::mma_sync calls (per warp)
    uint64_t max_shared_bytes; //!< largest dynamic shared memory of a launch
    uint64_t attribute_calls;  //!< cudaFuncSetAttribute calls
};
Stats stats();
void resetStats();

//! Forgets every cudaFuncSetAttribute limit, as a new CUDA context does (after cudaDeviceReset).
void forgetFunctionAttributes();

//! Message of the last failed launch ("" when none failed since the last call), then cleared.
std::string takeLaunchErrorMessage();

//! A configured launch, called with the kernel's arguments (converted to its parameter types, as a
//! CUDA launch does; every emulated thread gets its own copies).
template <typename... Params> struct Launcher
{
    void (*kernel)(Params...);
    dim3 grid;
    dim3 block;
    size_t shared_bytes;
    cudaStream_t stream;

    template <typename... Args> void operator()(Args&&... args) const
    {
        const std::tuple<Params...> params(std::forward<Args>(args)...);
        auto* fn = kernel;
        launch([&params, fn] { std::apply(fn, params); }, grid, block, shared_bytes, stream,
            reinterpret_cast<const void*>(kernel));
    }
};

template <typename... Params>
Launcher<Params...> makeLauncher(
    void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes = 0, cudaStream_t stream = nullptr)
{
    return Launcher<Params...>{kernel, grid, block, shared_bytes, stream};
}

} // namespace emu
} // namespace rnnx

#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

#define threadIdx (::rnnx::emu::currentIndex().thread)
#define blockIdx (::rnnx::emu::currentIndex().block)
#define blockDim (::rnnx::emu::currentIndex().block_dim)
#define gridDim (::rnnx::emu::currentIndex().grid_dim)

inline void __syncthreads()
{
    ::rnnx::emu::syncThreads();
}

inline float __shfl_xor_sync(
    unsigned mask, float value, int lane_mask, int width = 32, ::rnnx::emu::Site site = RNNX_EMU_CALL_SITE)
{
    return ::rnnx::emu::shuffleXor(mask, value, lane_mask, width, site);
}

//! The overload cuda_runtime.h adds for kernel function pointers (nvcc includes it implicitly).
template <typename Kernel> cudaError_t cudaFuncSetAttribute(Kernel* kernel, cudaFuncAttribute attribute, int value)
{
    return ::rnnx::emu::setFuncAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}

#define RNNX_LAUNCH(kernel, ...) ::rnnx::emu::makeLauncher(kernel, __VA_ARGS__)
#define RNNX_DYNAMIC_SHARED_MEMORY(type, name, alignment)                                                              \
    type* name = static_cast<type*>(::rnnx::emu::dynamicSharedMemory())
