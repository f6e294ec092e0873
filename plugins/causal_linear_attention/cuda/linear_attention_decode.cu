// Causal linear attention, one token per (batch, head): the decode step (L == 1) and the slow
// generic path of the prefill for head dims the chunked kernel does not instantiate.
//
// Heads are packed in the last axis (causal_linear_attention.h): the block of (b, h) reads q[row, h*E : (h+1)*E],
// k likewise and v[row, h*M : (h+1)*M] of its token's row (TokenRows), and writes out there. At a pad step
// (mask_pad non-zero) phi(k) and v count as zeros: the state is carried, out is still computed from it.
//
// One block per (batch, head). Each thread owns state entries S[e][m] for one column m and a
// strided set of rows e: it reads S_in[e][m], adds phi(k)[e] v[m], writes S_out[e][m] and
// accumulates phi(q)[e] S[e][m]. Every state element is read and written by the same thread, so
// S_out may alias S_in (z likewise). Partial sums over e meet in shared memory.
#include "linear_attention_internal.h"
#include "type_utils.cuh"

namespace rnnx
{
namespace kernels
{
namespace detail
{
namespace
{

constexpr int kThreads = 256;

__device__ float blockSum(float v, float* scratch)
{
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    float total = 0.f;
    for (int w = 0; w < kThreads / 32; ++w)
        total += scratch[w];
    __syncthreads();
    return total;
}

// Shared memory: phi(q) [E], phi(k) [E], partial numerators [kThreads], reduction scratch [32].
template <typename T>
__global__ void __launch_bounds__(kThreads) linearAttentionStepKernel(LinearAttentionParams p, int t,
    const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const float* S_in, const float* z_in,
    const void* __restrict__ mask_pad, T* __restrict__ out, float* S_out, float* z_out)
{
    RNNX_DYNAMIC_SHARED_MEMORY(float, smem, 16);
    const int E = p.dim_k, M = p.dim_v;
    float* qs = smem;
    float* ks = qs + E;
    float* partial = ks + E;
    float* scratch = partial + kThreads;
    const size_t bh = blockIdx.x;
    const int b = static_cast<int>(bh / p.heads), h = static_cast<int>(bh % p.heads);
    const size_t row = TokenRows::of(p, b).row(t);
    const bool pad = isPad(mask_pad, p.mask_type, row);
    const size_t qk_offset = (row * p.heads + h) * E;
    const size_t vo_offset = (row * p.heads + h) * M;
    const T* qr = q + qk_offset;
    const T* kr = k + qk_offset;
    const T* vr = v + vo_offset;
    const float* S_src = S_in != nullptr ? S_in + bh * E * M : nullptr;
    float* S_dst = S_out + bh * E * M;

    float qz = 0.f;
    for (int e = threadIdx.x; e < E; e += kThreads)
    {
        const float qe = phi(toFloat(qr[e]));
        const float ke = pad ? 0.f : phi(toFloat(kr[e]));
        const float z = (z_in != nullptr ? z_in[bh * E + e] : 0.f) + ke;
        z_out[bh * E + e] = z;
        qs[e] = qe;
        ks[e] = ke;
        qz += qe * z;
    }
    const float den = blockSum(qz, scratch) + p.eps; // also makes qs, ks visible

    const int cols = M < kThreads ? M : kThreads; // columns per pass
    const int groups = kThreads / cols;           // threads sharing one column, splitting e
    const int g = threadIdx.x / cols;
    for (int m0 = 0; m0 < M; m0 += cols)
    {
        const int m = m0 + threadIdx.x % cols;
        float num = 0.f;
        if (g < groups && m < M)
        {
            const float vm = pad ? 0.f : toFloat(vr[m]);
            for (int e = g; e < E; e += groups)
            {
                const size_t i = static_cast<size_t>(e) * M + m;
                const float s = (S_src != nullptr ? S_src[i] : 0.f) + ks[e] * vm;
                S_dst[i] = s;
                num += qs[e] * s;
            }
        }
        partial[threadIdx.x] = num;
        __syncthreads();
        if (static_cast<int>(threadIdx.x) < cols && m < M)
        {
            float total = 0.f;
            for (int j = 0; j < groups; ++j)
                total += partial[j * cols + threadIdx.x];
            out[vo_offset + m] = fromFloat<T>(total / den);
        }
        __syncthreads();
    }
}

} // namespace

cudaError_t launchLinearAttentionStep(const LinearAttentionParams& p, DataType type, int t, const void* q,
    const void* k, const void* v, const float* S_in, const float* z_in, const void* mask_pad, void* out, float* S_out,
    float* z_out, cudaStream_t stream)
{
    const size_t blocks = static_cast<size_t>(p.batch) * p.heads;
    if (blocks == 0)
        return cudaSuccess;
    if (blocks > 0x7fffffffu)
        return cudaErrorInvalidValue;
    const size_t smem = (2 * static_cast<size_t>(p.dim_k) + kThreads + 32) * sizeof(float);
    if (smem > 48 * 1024)
        return cudaErrorInvalidValue;
    return dispatchType(type,
        [&](auto tag)
        {
            using T = decltype(tag);
            const auto kernel = &linearAttentionStepKernel<T>;
            RNNX_LAUNCH(kernel, static_cast<unsigned>(blocks), kThreads, smem, stream)(p, t, static_cast<const T*>(q),
                static_cast<const T*>(k), static_cast<const T*>(v), S_in, z_in, mask_pad, static_cast<T*>(out), S_out,
                z_out);
            return cudaGetLastError();
        });
}

} // namespace detail
} // namespace kernels
} // namespace rnnx
