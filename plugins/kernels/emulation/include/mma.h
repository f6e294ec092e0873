// CUDA host emulation of the warp matrix API (nvcuda::wmma, CUDA's <mma.h>) for the rnnx kernels.
//
// Only the shapes and types the hardware offers for 16-bit inputs are accepted: m16n16k16 with __half or
// __nv_bfloat16 matrix_a / matrix_b and float accumulators (anything else is a compile error, as with
// nvcc). Each emulated lane holds the whole 16x16 tile in its fragment, which is enough for kernels that
// only move fragments through load / mma / store / fill (no per-element access to fragment.x, whose
// lane mapping the hardware leaves unspecified). Every *_sync call is a warp collective: all 32 lanes
// must reach it with the same pointer and ldm, and no lane passes it before all have arrived, so loads
// see memory as it was before any lane of the warp stores. One lane computes mma_sync for the warp.
//
// The PTX rules are checked: the pointer 256-bit aligned and ldm a multiple of 16 bytes (8 for 16-bit
// elements, 4 for float). Products are exact in fp32 (16-bit inputs); sums accumulate in fp32 in k order.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "rnnx_cuda_emulation.h"

namespace nvcuda
{
namespace wmma
{

struct matrix_a
{
};
struct matrix_b
{
};
struct accumulator
{
};
struct row_major
{
};
struct col_major
{
};
enum layout_t
{
    mem_row_major,
    mem_col_major
};

namespace detail
{

template <typename T>
constexpr bool kIsInput16 = std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value;

inline float toFloat(float v)
{
    return v;
}
inline float toFloat(__half v)
{
    return __half2float(v);
}
inline float toFloat(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

template <typename T> void checkPointer(const char* what, const T* ptr, unsigned ldm, ::rnnx::emu::Site site)
{
    ::rnnx::emu::warpCollective(what, site);
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    ::rnnx::emu::checkWarpUniform(what, address, ldm);
    if (address % 32 != 0)
    {
        char message[160];
        std::snprintf(
            message, sizeof(message), "%s: pointer %p is not 256-bit aligned", what, static_cast<const void*>(ptr));
        ::rnnx::emu::failLaunch(cudaErrorMisalignedAddress, message);
    }
    if ((ldm * sizeof(T)) % 16 != 0)
    {
        char message[160];
        std::snprintf(
            message, sizeof(message), "%s: ldm %u is not a multiple of %zu elements", what, ldm, 16 / sizeof(T));
        ::rnnx::emu::failLaunch(cudaErrorMisalignedAddress, message);
    }
}

} // namespace detail

template <typename Use, int M, int N, int K, typename T, typename Layout = void> class fragment
{
    static_assert(M == 16 && N == 16 && K == 16, "rnnx wmma emulation: only m16n16k16");
    static_assert(std::is_same<Use, accumulator>::value ? (std::is_same<T, float>::value && std::is_void<Layout>::value)
                                                        : (detail::kIsInput16<T> && !std::is_void<Layout>::value),
        "rnnx wmma emulation: matrix_a / matrix_b of __half or __nv_bfloat16 with a layout, "
        "float accumulators without one");

public:
    static constexpr int kRows = std::is_same<Use, matrix_b>::value ? K : M;
    static constexpr int kCols = std::is_same<Use, matrix_a>::value ? K : N;
    static constexpr int num_elements = kRows * kCols;
    T x[num_elements];

    T& at(int row, int col)
    {
        return x[row * kCols + col];
    }
    const T& at(int row, int col) const
    {
        return x[row * kCols + col];
    }
};

template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const T& value)
{
    for (auto& element : f.x)
        element = value;
}

template <typename Use, int M, int N, int K, typename T, typename Layout>
void load_matrix_sync(
    fragment<Use, M, N, K, T, Layout>& f, const T* ptr, unsigned ldm, ::rnnx::emu::Site site = RNNX_EMU_CALL_SITE)
{
    detail::checkPointer("wmma::load_matrix_sync", ptr, ldm, site);
    using Frag = fragment<Use, M, N, K, T, Layout>;
    constexpr bool kRowMajor = std::is_same<Layout, row_major>::value;
    for (int r = 0; r < Frag::kRows; ++r)
    {
        for (int c = 0; c < Frag::kCols; ++c)
            f.at(r, c) = kRowMajor ? ptr[r * ldm + c] : ptr[c * ldm + r];
    }
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* ptr, unsigned ldm, layout_t layout,
    ::rnnx::emu::Site site = RNNX_EMU_CALL_SITE)
{
    detail::checkPointer("wmma::load_matrix_sync", ptr, ldm, site);
    for (int r = 0; r < M; ++r)
    {
        for (int c = 0; c < N; ++c)
            f.at(r, c) = layout == mem_row_major ? ptr[r * ldm + c] : ptr[c * ldm + r];
    }
}

template <int M, int N, int K>
void store_matrix_sync(float* ptr, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t layout,
    ::rnnx::emu::Site site = RNNX_EMU_CALL_SITE)
{
    detail::checkPointer("wmma::store_matrix_sync", ptr, ldm, site);
    for (int r = 0; r < M; ++r)
    {
        for (int c = 0; c < N; ++c)
            (layout == mem_row_major ? ptr[r * ldm + c] : ptr[c * ldm + r]) = f.at(r, c);
    }
}

//! d = a b + c, fp32 accumulation.
template <int M, int N, int K, typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LayoutA>& a,
    const fragment<matrix_b, M, N, K, T, LayoutB>& b, const fragment<accumulator, M, N, K, float>& c,
    ::rnnx::emu::Site site = RNNX_EMU_CALL_SITE)
{
    ::rnnx::emu::warpCollective("wmma::mma_sync", site);
    // Every lane holds the same fragments (warp-uniform loads), so one lane computes for the warp.
    float* result = ::rnnx::emu::warpScratch();
    if (::rnnx::emu::warpLeader())
    {
        ::rnnx::emu::countMma();
        for (int i = 0; i < M; ++i)
        {
            for (int j = 0; j < N; ++j)
            {
                float sum = c.at(i, j);
                for (int kk = 0; kk < K; ++kk)
                    sum += detail::toFloat(a.at(i, kk)) * detail::toFloat(b.at(kk, j));
                result[i * N + j] = sum;
            }
        }
    }
    for (int i = 0; i < M * N; ++i)
        d.x[i] = result[i];
}

} // namespace wmma
} // namespace nvcuda
