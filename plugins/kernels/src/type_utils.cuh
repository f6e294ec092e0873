// Internal helpers shared by the rnnx CUDA kernels: activation types and their fp32 conversions, and the
// two macros through which the kernels launch and declare dynamic shared memory, so that the same sources
// also compile as C++ for the CUDA host emulation (emulation/, RNNX_CUDA_HOST_EMULATION):
//   RNNX_LAUNCH(kernel, grid, block[, smem[, stream]])(args...)
//       = kernel<<<grid, block, smem, stream>>>(args...)
//   RNNX_DYNAMIC_SHARED_MEMORY(type, name, alignment)
//       = extern __shared__ __align__(alignment) type name[]
// `kernel` is a single name (a function or a function pointer), never a template-id with commas.
//
// Conversions are explicit intrinsics (no implicit __half / __nv_bfloat16 operators), so the files
// also compile with the __CUDA_NO_HALF_OPERATORS__ / __CUDA_NO_HALF_CONVERSIONS__ /
// __CUDA_NO_BFLOAT16_CONVERSIONS__ defines that PyTorch extension builds pass to nvcc.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "rnnx/kernel_types.h"

#ifdef RNNX_CUDA_HOST_EMULATION
#include "rnnx_cuda_emulation.h"
#else
#define RNNX_LAUNCH(kernel, ...) kernel<<<__VA_ARGS__>>>
#define RNNX_DYNAMIC_SHARED_MEMORY(type, name, alignment)                                                              \
    extern __shared__ __align__(alignment)                                                                             \
    type name[]
#endif

namespace rnnx
{
namespace kernels
{
namespace detail
{

__device__ __forceinline__ float toFloat(float v)
{
    return v;
}
__device__ __forceinline__ float toFloat(__half v)
{
    return __half2float(v);
}
__device__ __forceinline__ float toFloat(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v)
{
    return v;
}
template <> __device__ __forceinline__ __half fromFloat<__half>(float v)
{
    return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

//! phi(x) = elu(x) + 1: x + 1 for x > 0, exp(x) otherwise.
__device__ __forceinline__ float phi(float x)
{
    return x > 0.f ? x + 1.f : expf(x);
}

__device__ __forceinline__ float sigmoid(float x)
{
    return 1.f / (1.f + expf(-x));
}

//! Whether element `i` of a pad mask of element type `type` is a pad step (non-zero); never with no mask. The
//! branch on `type` is uniform over a launch (it comes from the launch's params).
__device__ __forceinline__ bool isPad(const void* mask_pad, MaskType type, size_t i)
{
    if (mask_pad == nullptr)
        return false;
    return type == MaskType::kINT32 ? static_cast<const int32_t*>(mask_pad)[i] != 0
                                    : static_cast<const uint8_t*>(mask_pad)[i] != 0;
}

//! Whether `type` is a MaskType the kernels read.
inline bool validMaskType(MaskType type)
{
    return type == MaskType::kUINT8 || type == MaskType::kINT32;
}

//! Calls fn(T{}) with T the device type of `type`: float, __half or __nv_bfloat16.
template <typename Fn> cudaError_t dispatchType(DataType type, Fn&& fn)
{
    switch (type)
    {
    case DataType::kFLOAT: return fn(float{});
    case DataType::kHALF: return fn(__half{});
    case DataType::kBF16: return fn(__nv_bfloat16{});
    }
    return cudaErrorInvalidValue;
}

} // namespace detail
} // namespace kernels
} // namespace rnnx
