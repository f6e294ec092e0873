/*
 * kernel_emulation_selftest: the CUDA host emulation (plugins/kernels/emulation) catches what it claims to.
 *
 * Small kernels written here, compiled like the rnnx kernels (RNNX_CUDA_HOST_EMULATION), each with a known
 * defect: a shared-memory race that only a barrier prevents (results must change with the schedule), a
 * warp collective reached by half a warp, lanes at different collectives, misaligned and non-uniform wmma
 * arguments, too much dynamic shared memory, a bad block shape, a destroyed stream. And the positive
 * side: the emulated wmma agrees with a naive matrix product for every layout combination, shuffles
 * compute a warp sum, uninitialised shared memory reads as NaN, and every thread and block runs once.
 */
#include "testHarness.h"

#include "rnnx_cuda_emulation.h"

#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using rnnx::emu::Schedule;

namespace
{

// ------------------------------------------------------------------------------------------------------------
// Kernels

//! out[i] = smem[(i + 1) % n] after each thread wrote smem[i] = i; `barrier` decides whether a
//! __syncthreads separates the writes from the reads.
__global__ void neighbourKernel(float* out, bool barrier)
{
    RNNX_DYNAMIC_SHARED_MEMORY(float, smem, 16);
    unsigned const n = blockDim.x;
    unsigned const i = threadIdx.x;
    smem[i] = static_cast<float>(i);
    if (barrier)
    {
        __syncthreads();
    }
    out[blockIdx.x * n + i] = smem[(i + 1) % n];
}

//! Adds 1 + its global linear index to its slot (every thread of every block once, 3-d blocks too).
__global__ void indexKernel(float* out)
{
    unsigned const inBlock = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned const i = blockIdx.x * blockDim.x * blockDim.y * blockDim.z + inBlock;
    out[i] += 1.f + static_cast<float>(i);
}

//! Lanes below `active` take part in a warp sum, the others skip it.
__global__ void partialShuffleKernel(float* out, unsigned active)
{
    float v = static_cast<float>(threadIdx.x);
    if (threadIdx.x % 32 < active)
    {
        for (int offset = 16; offset > 0; offset /= 2)
        {
            v += __shfl_xor_sync(0xffffffffu, v, offset);
        }
    }
    out[threadIdx.x] = v;
}

//! Odd and even lanes shuffle at different call sites.
__global__ void divergentCollectivesKernel(float* out)
{
    float v = 1.f;
    if (threadIdx.x % 2 == 1)
    {
        v += __shfl_xor_sync(0xffffffffu, v, 2);
    }
    else
    {
        v += __shfl_xor_sync(0xffffffffu, v, 4);
    }
    out[threadIdx.x] = v;
}

//! Reads shared memory nobody wrote.
__global__ void uninitialisedSharedKernel(float* out)
{
    RNNX_DYNAMIC_SHARED_MEMORY(float, smem, 16);
    out[threadIdx.x] = smem[threadIdx.x];
}

//! One warp: C = A B with A, B 16x16 half in the given layouts (ldm 16 + pad), C row-major float.
template <typename LayoutA, typename LayoutB>
__global__ void wmmaKernel(__half const* a, __half const* b, float* c, unsigned ldm, size_t offsetA, bool uniform)
{
    namespace wmma = nvcuda::wmma;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, LayoutA> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, LayoutB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.f);
    wmma::load_matrix_sync(fa, a + offsetA + (uniform ? 0 : (threadIdx.x % 2) * 16), ldm);
    wmma::load_matrix_sync(fb, b, ldm);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

// ------------------------------------------------------------------------------------------------------------
// Helpers

std::string takeMessage()
{
    return rnnx::emu::takeLaunchErrorMessage();
}

bool contains(std::string const& text, char const* part)
{
    bool const found = text.find(part) != std::string::npos;
    if (!found)
    {
        std::cout << "  message: " << text << "\n";
    }
    return found;
}

std::vector<float> runNeighbour(unsigned threads, bool barrier, Schedule schedule)
{
    rnnx::emu::setSchedule(schedule, 7);
    std::vector<float> out(2 * threads, -1.f);
    auto const kernel = &neighbourKernel;
    RNNX_LAUNCH(kernel, 2, threads, threads * sizeof(float))(out.data(), barrier);
    CHECK_EQ(cudaGetLastError(), cudaSuccess);
    rnnx::emu::setSchedule(Schedule::kInOrder, 0);
    return out;
}

bool sameBits(std::vector<float> const& a, std::vector<float> const& b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <typename LayoutA, typename LayoutB> void checkWmmaLayouts()
{
    unsigned const ldm = 24; // 16 + 8 pad: 48 bytes, a multiple of 16
    std::vector<__half> a(16 * ldm + 64), b(16 * ldm);
    std::vector<float> av(256), bv(256);
    for (int r = 0; r < 16; ++r)
    {
        for (int c = 0; c < 16; ++c)
        {
            av[r * 16 + c] = static_cast<float>((r * 7 + c * 3) % 11) - 5.f;
            bv[r * 16 + c] = static_cast<float>((r * 5 + c * 13) % 9) - 4.f;
            bool const rowA = std::is_same<LayoutA, nvcuda::wmma::row_major>::value;
            bool const rowB = std::is_same<LayoutB, nvcuda::wmma::row_major>::value;
            a[rowA ? r * ldm + c : c * ldm + r] = __float2half(av[r * 16 + c]);
            b[rowB ? r * ldm + c : c * ldm + r] = __float2half(bv[r * 16 + c]);
        }
    }
    void* aligned = nullptr;
    REQUIRE(posix_memalign(&aligned, 256, a.size() * sizeof(__half)) == 0);
    void* alignedB = nullptr;
    REQUIRE(posix_memalign(&alignedB, 256, b.size() * sizeof(__half)) == 0);
    std::memcpy(aligned, a.data(), a.size() * sizeof(__half));
    std::memcpy(alignedB, b.data(), b.size() * sizeof(__half));
    std::vector<float> c(256, 0.f);
    auto const kernel = &wmmaKernel<LayoutA, LayoutB>;
    RNNX_LAUNCH(kernel, 1, 32)(static_cast<__half*>(aligned), static_cast<__half*>(alignedB), c.data(), ldm, 0, true);
    CHECK_EQ(cudaGetLastError(), cudaSuccess);
    double maxError = 0;
    for (int r = 0; r < 16; ++r)
    {
        for (int col = 0; col < 16; ++col)
        {
            double ref = 0;
            for (int k = 0; k < 16; ++k)
            {
                ref += static_cast<double>(av[r * 16 + k]) * bv[k * 16 + col];
            }
            maxError = std::max(maxError, std::abs(ref - c[r * 16 + col]));
        }
    }
    CHECK_EQ(maxError, 0.0); // small integers: exact
    std::free(aligned);
    std::free(alignedB);
}

} // namespace

TEST_CASE("every thread of every block runs once (3-d block, all schedules)")
{
    for (Schedule s : {Schedule::kInOrder, Schedule::kReversed, Schedule::kRandom})
    {
        rnnx::emu::setSchedule(s, 3);
        std::vector<float> out(5 * 96, 0.f);
        auto const kernel = &indexKernel;
        RNNX_LAUNCH(kernel, 5, dim3(4, 3, 8))(out.data());
        CHECK_EQ(cudaGetLastError(), cudaSuccess);
        for (size_t i = 0; i < out.size(); ++i)
        {
            CHECK_EQ(out[i], 1.f + static_cast<float>(i));
        }
    }
    rnnx::emu::setSchedule(Schedule::kInOrder, 0);
}

TEST_CASE("a shared-memory race changes the result with the schedule; a barrier removes it")
{
    std::vector<float> const inOrder = runNeighbour(64, false, Schedule::kInOrder);
    std::vector<float> const reversed = runNeighbour(64, false, Schedule::kReversed);
    CHECK(!sameBits(inOrder, reversed));
    std::vector<float> const synced = runNeighbour(64, true, Schedule::kInOrder);
    CHECK(sameBits(synced, runNeighbour(64, true, Schedule::kReversed)));
    CHECK(sameBits(synced, runNeighbour(64, true, Schedule::kRandom)));
    for (unsigned i = 0; i < 64; ++i)
    {
        CHECK_EQ(synced[i], static_cast<float>((i + 1) % 64));
    }
}

TEST_CASE("__shfl_xor_sync: a full warp sums; half a warp fails the launch")
{
    std::vector<float> out(64, 0.f);
    auto const kernel = &partialShuffleKernel;
    RNNX_LAUNCH(kernel, 1, 64)(out.data(), 32u);
    CHECK_EQ(cudaGetLastError(), cudaSuccess);
    CHECK_EQ(out[5], 496.f);   // 0 + 1 + ... + 31
    CHECK_EQ(out[40], 1520.f); // 32 + ... + 63
    RNNX_LAUNCH(kernel, 1, 64)(out.data(), 16u);
    CHECK_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    CHECK(contains(takeMessage(), "reached by 16 of 32 lanes"));
}

TEST_CASE("lanes at different warp collectives fail the launch")
{
    std::vector<float> out(32, 0.f);
    auto const kernel = &divergentCollectivesKernel;
    RNNX_LAUNCH(kernel, 1, 32)(out.data());
    CHECK_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    CHECK(contains(takeMessage(), "lanes at different warp collectives: lane 0 at __shfl_xor_sync at "));
}

TEST_CASE("uninitialised shared memory reads as NaN")
{
    std::vector<float> out(32, 0.f);
    auto const kernel = &uninitialisedSharedKernel;
    RNNX_LAUNCH(kernel, 1, 32, 32 * sizeof(float))(out.data());
    CHECK_EQ(cudaGetLastError(), cudaSuccess);
    CHECK(std::isnan(out[0]) && std::isnan(out[31]));
}

TEST_CASE("wmma: every layout combination equals a naive product")
{
    checkWmmaLayouts<nvcuda::wmma::row_major, nvcuda::wmma::row_major>();
    checkWmmaLayouts<nvcuda::wmma::row_major, nvcuda::wmma::col_major>();
    checkWmmaLayouts<nvcuda::wmma::col_major, nvcuda::wmma::row_major>();
    checkWmmaLayouts<nvcuda::wmma::col_major, nvcuda::wmma::col_major>();
}

TEST_CASE("wmma: misaligned pointers, odd ldm and lane-dependent pointers fail the launch")
{
    using nvcuda::wmma::row_major;
    void* buffer = nullptr;
    REQUIRE(posix_memalign(&buffer, 256, 4096) == 0);
    std::memset(buffer, 0, 4096);
    auto* h = static_cast<__half*>(buffer);
    std::vector<float> c(256);
    auto const kernel = &wmmaKernel<row_major, row_major>;
    RNNX_LAUNCH(kernel, 1, 32)(h, h, c.data(), 24u, 8, true); // 16 bytes off a 256-bit boundary
    CHECK_EQ(cudaGetLastError(), cudaErrorMisalignedAddress);
    CHECK(contains(takeMessage(), "not 256-bit aligned"));
    RNNX_LAUNCH(kernel, 1, 32)(h, h, c.data(), 20u, 0, true); // 40 bytes: not a multiple of 16
    CHECK_EQ(cudaGetLastError(), cudaErrorMisalignedAddress);
    CHECK(contains(takeMessage(), "ldm 20"));
    RNNX_LAUNCH(kernel, 1, 32)(h, h, c.data(), 24u, 0, false);
    CHECK_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    CHECK(contains(takeMessage(), "warp-uniform"));
    std::free(buffer);
}

TEST_CASE("launch checks: shared memory limits, block shape, streams")
{
    std::vector<float> out(1024, 0.f);
    auto const kernel = &neighbourKernel;
    RNNX_LAUNCH(kernel, 1, 32, 64 * 1024)(out.data(), true); // over 48 KiB without opting in
    CHECK_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    CHECK(contains(takeMessage(), "dynamic shared memory"));
    CHECK_EQ(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024), cudaSuccess);
    RNNX_LAUNCH(kernel, 1, 32, 64 * 1024)(out.data(), true);
    CHECK_EQ(cudaGetLastError(), cudaSuccess);
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024) != cudaSuccess);
    CHECK(contains(takeMessage(), "opt-in limit"));
    cudaGetLastError();

    auto const index = &indexKernel;
    RNNX_LAUNCH(index, 1, 2048)(out.data());
    CHECK_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    CHECK(contains(takeMessage(), "1 to 1024 threads"));

    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
    RNNX_LAUNCH(index, 1, 32, 0, stream)(out.data());
    CHECK_EQ(cudaGetLastError(), cudaSuccess);
    REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
    RNNX_LAUNCH(index, 1, 32, 0, stream)(out.data());
    CHECK_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    takeMessage();
}

int main(int argc, char** argv)
{
    return rnnx::test::runTestCases(
        argc > 1 ? argv[1] : nullptr, [](rnnx::test::TestCase const&) {}, /*failOnLoggedErrors=*/false);
}
