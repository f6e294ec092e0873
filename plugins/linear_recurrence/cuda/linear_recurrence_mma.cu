// The linear rule's chunked MMA kernel (LinearRecurrenceKernel::kCHUNKED_MMA; linear_recurrence.h says when it is
// eligible): S_t = S_{t-1} + k_t v_t^T, o_t = scale * S_t^T q_t, optionally normalised by z.
//
// One block per (batch * head, tile of kTileM columns of v): the block owns S[:, m0:m0+kTileM] (fp32, shared memory)
// and, with a normaliser, the whole z (every column tile computes it; tile 0 writes it), and walks the sequence in
// chunks of kChunk tokens. With Q, K the chunk's query and key rows after the feature map:
//
//   A   = tril(Q K^T)                          (kChunk x kChunk)
//   den = scale (Q z + A 1) + eps              (with a normaliser; else 1)
//   out = scale (A V + Q S) / den              (tensor cores: (scale A / den) V + scale (Q S) / den)
//   S  += K^T V,   z += K^T 1
//
// fp16 / bf16: Q, K, V and scale A / den are kept in the activation type and the matmuls Q K^T, A V and K^T V run on
// tensor cores (WMMA 16x16x16, fp32 accumulation; K^T V accumulates straight onto the fp32 state). Q S, the normaliser
// and the state stay in fp32; z sums k in fp32 from the inputs (only S's update takes the activation-type K that the
// tensor cores need), as the recurrent kernel does. fp32 activations use fp32 FMA throughout.
// Heads are packed in the last axis: the block of (b, h) reads columns h*E .. h*E+E-1 of query and key and
// h*M + m0 .. of value at each of its tokens' rows (tokenRow: b*T + t, or t*B + b time-major) and writes output there.
// A pad step (mask_pad non-zero) is loaded with K = 0 and V = 0, so it adds nothing to the state nor to any other
// step's output (its column of A is zero); its own output row is still read from the state carried to it.
// Each block reads its state tile completely before the first write, so present_state may alias past_state; the
// launcher hands z_in through its workspace when z_out aliases it and several tiles read it.
#include <mma.h>

#include <atomic>
#include <type_traits>

#include "linear_recurrence/cuda/linear_recurrence_internal.h"

namespace rnnx
{
namespace kernels
{
namespace detail
{
namespace
{

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kFrag = 16; // WMMA tile edge

constexpr size_t alignUp(size_t bytes)
{
    return (bytes + 127) / 128 * 128;
}

//! Columns of v per block: 64, or 32 on tensor cores at E = 128 (shared memory); at most M.
constexpr int tileColumns(bool tensor_cores, int E, int M)
{
    return (tensor_cores && E == 128) ? (M < 32 ? M : 32) : (M < 64 ? M : 64);
}

//! Chunk and column tile of the kernel for activation type T and head dims E, M, and its shared memory.
template <typename T, int E, int M> struct MmaConfig
{
    static constexpr bool kTensorCores = !std::is_same<T, float>::value;
    static constexpr int kChunk = kTensorCores ? 64 : 32;
    static constexpr int kTileM = tileColumns(kTensorCores, E, M);
    static constexpr int kTiles = M / kTileM;
    // Leading dimensions (elements): padded against bank conflicts; multiples of 8 (T) or 4 (float)
    // where WMMA loads or stores them.
    static constexpr int kPad = kTensorCores ? 8 : 1;
    static constexpr int kLdQK = E + kPad;                       // Q, K   (kChunk x E, T)
    static constexpr int kLdV = kTileM + kPad;                   // V      (kChunk x kTileM, T)
    static constexpr int kLdA = kChunk + (kTensorCores ? 4 : 1); // A      (kChunk x kChunk, fp32)
    static constexpr int kLdAh = kChunk + kPad;                  // A      (kChunk x kChunk, T)
    static constexpr int kLdO = kTileM + 4;                      // A V    (kChunk x kTileM, fp32)
    static constexpr int kLdS = kTileM + 4;                      // S tile (E x kTileM, fp32)
    // Byte offsets of the shared memory regions. A V reuses the fp32 A region.
    static constexpr size_t kQ = 0;
    static constexpr size_t kK = kQ + alignUp(sizeof(T) * kChunk * kLdQK);
    static constexpr size_t kV = kK + alignUp(sizeof(T) * kChunk * kLdQK);
    static constexpr size_t kA = kV + alignUp(sizeof(T) * kChunk * kLdV);
    static constexpr size_t kAh =
        kA + alignUp(sizeof(float) * (kChunk * kLdA > kChunk * kLdO ? kChunk * kLdA : kChunk * kLdO));
    static constexpr size_t kS = kAh + (kTensorCores ? alignUp(sizeof(T) * kChunk * kLdAh) : 0);
    static constexpr size_t kZ = kS + alignUp(sizeof(float) * E * kLdS);
    static constexpr size_t kDen = kZ + alignUp(sizeof(float) * E);
    static constexpr size_t kBytes = kDen + alignUp(sizeof(float) * kChunk);

    static_assert(M % kTileM == 0, "column tiles must cover M");
    static_assert(kBytes <= 99 * 1024, "shared memory must fit sm_86 / sm_89 (99 KiB per block)");
    static_assert(
        (kChunk * kTileM) % kThreads == 0 && (E * kTileM) % kThreads == 0 && (kChunk * kChunk) % kThreads == 0,
        "work must split evenly over the threads");
    static_assert(kThreads % kTileM == 0 && kThreads % kChunk == 0, "thread layout");
};

template <typename T, int E, int M>
__global__ void __launch_bounds__(kThreads) chunkedMmaKernel(RecurrenceProblem p, RecurrenceTensors<T> x)
{
    using Cfg = MmaConfig<T, E, M>;
    constexpr int C = Cfg::kChunk;
    constexpr int TM = Cfg::kTileM;
    RNNX_DYNAMIC_SHARED_MEMORY(unsigned char, smem, 128);
    T* Qs = reinterpret_cast<T*>(smem + Cfg::kQ);
    T* Ks = reinterpret_cast<T*>(smem + Cfg::kK);
    T* Vs = reinterpret_cast<T*>(smem + Cfg::kV);
    float* Af = reinterpret_cast<float*>(smem + Cfg::kA);
    float* Os = Af;
    T* Ah = reinterpret_cast<T*>(smem + Cfg::kAh);
    float* Ss = reinterpret_cast<float*>(smem + Cfg::kS);
    float* zs = reinterpret_cast<float*>(smem + Cfg::kZ);
    float* den = reinterpret_cast<float*>(smem + Cfg::kDen);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const size_t bh = blockIdx.x;
    const int m0 = blockIdx.y * TM;
    const int L = p.T;
    const int b = static_cast<int>(bh / p.Hkv), h = static_cast<int>(bh % p.Hkv);
    // Elements between consecutive rows of query / key and of value / output; the head's first column in them.
    const size_t ldqk = static_cast<size_t>(p.Hkv) * E;
    const size_t ldvo = static_cast<size_t>(p.Hkv) * M;
    const T* qb = x.q + static_cast<size_t>(h) * E;
    const T* kb = x.k + static_cast<size_t>(h) * E;
    const T* vb = x.v + static_cast<size_t>(h) * M;
    T* ob = x.out + static_cast<size_t>(h) * M;

    for (int i = tid; i < E * TM; i += kThreads)
    {
        const int e = i / TM, m = i % TM;
        Ss[e * Cfg::kLdS + m] = x.S_in != nullptr ? x.S_in[(bh * E + e) * M + m0 + m] : 0.f;
    }
    for (int e = tid; e < E; e += kThreads)
        zs[e] = x.z_in != nullptr ? x.z_in[bh * E + e] : 0.f;

    for (int t0 = 0; t0 < L; t0 += C)
    {
        const int rows = L - t0 < C ? L - t0 : C;
        // Load Q, K (feature-mapped), V of the chunk; rows past the end are zeros (no contribution), and so are K
        // and V at pad steps.
        for (int i = tid; i < C * E; i += kThreads)
        {
            const int t = i / E, e = i % E;
            const bool in = t < rows;
            const size_t row = in ? tokenRow(p, b, t0 + t) : 0;
            const size_t g = row * ldqk + e;
            Qs[t * Cfg::kLdQK + e] = fromFloat<T>(in ? featureMap(p, toFloat(qb[g])) : 0.f);
            Ks[t * Cfg::kLdQK + e] =
                fromFloat<T>(in && !isPad(x.mask, p.mask_type, row) ? featureMap(p, toFloat(kb[g])) : 0.f);
        }
        for (int i = tid; i < C * TM; i += kThreads)
        {
            const int t = i / TM, m = i % TM;
            const bool in = t < rows;
            const size_t row = in ? tokenRow(p, b, t0 + t) : 0;
            Vs[t * Cfg::kLdV + m] =
                in && !isPad(x.mask, p.mask_type, row) ? vb[row * ldvo + m0 + m] : fromFloat<T>(0.f);
        }
        __syncthreads();

        // A = Q K^T on and below the diagonal (entries above it are never read).
        if constexpr (Cfg::kTensorCores)
        {
            namespace wmma = nvcuda::wmma;
            constexpr int nt = C / kFrag;
            for (int tile = warp; tile < nt * nt; tile += kWarps)
            {
                const int ti = tile / nt, tj = tile % nt;
                if (tj > ti)
                    continue;
                wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc;
                wmma::fill_fragment(acc, 0.f);
                for (int kk = 0; kk < E; kk += kFrag)
                {
                    wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, T, wmma::row_major> a;
                    wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::col_major> b;
                    wmma::load_matrix_sync(a, Qs + ti * kFrag * Cfg::kLdQK + kk, Cfg::kLdQK);
                    wmma::load_matrix_sync(b, Ks + tj * kFrag * Cfg::kLdQK + kk, Cfg::kLdQK);
                    wmma::mma_sync(acc, a, b, acc);
                }
                wmma::store_matrix_sync(Af + ti * kFrag * Cfg::kLdA + tj * kFrag, acc, Cfg::kLdA, wmma::mem_row_major);
            }
        }
        else
        {
            constexpr int kRowStep = kThreads / C;
            const int s = tid % C;
            float acc[C / kRowStep] = {};
            for (int e = 0; e < E; ++e)
            {
                const float ks = toFloat(Ks[s * Cfg::kLdQK + e]);
#pragma unroll
                for (int j = 0; j < C / kRowStep; ++j)
                {
                    acc[j] += toFloat(Qs[(tid / C + j * kRowStep) * Cfg::kLdQK + e]) * ks;
                }
            }
#pragma unroll
            for (int j = 0; j < C / kRowStep; ++j)
                Af[(tid / C + j * kRowStep) * Cfg::kLdA + s] = acc[j];
        }
        __syncthreads();

        // den = scale (Q z + A 1) + eps with a normaliser, one warp per row; else 1.
        if (p.normalised)
        {
            for (int t = warp; t < C; t += kWarps)
            {
                float sum = 0.f;
                for (int s = lane; s <= t; s += 32)
                    sum += Af[t * Cfg::kLdA + s];
                for (int e = lane; e < E; e += 32)
                    sum += toFloat(Qs[t * Cfg::kLdQK + e]) * zs[e];
                for (int offset = 16; offset > 0; offset /= 2)
                    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
                if (lane == 0)
                    den[t] = p.scale * sum + p.eps;
            }
        }
        else
        {
            for (int t = tid; t < C; t += kThreads)
                den[t] = 1.f;
        }
        if constexpr (Cfg::kTensorCores)
        {
            // The activation-type copy holds scale A / den (with a normaliser entries in [0, 1]: raw scores Q K^T
            // overflow fp16 (> 65504) for large but representable q, k, and tiny ones flush to zero).
            __syncthreads(); // den
            for (int i = tid; i < C * C; i += kThreads)
            {
                const int t = i / C, s = i % C;
                Ah[t * Cfg::kLdAh + s] = fromFloat<T>(s <= t ? p.scale * Af[t * Cfg::kLdA + s] / den[t] : 0.f);
            }
            __syncthreads();
            // Os = (scale A / den) V (over the diagonal blocks and those left of it), overwriting the fp32 A.
            namespace wmma = nvcuda::wmma;
            constexpr int nti = C / kFrag, ntj = TM / kFrag;
            for (int tile = warp; tile < nti * ntj; tile += kWarps)
            {
                const int ti = tile / ntj, tj = tile % ntj;
                wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc;
                wmma::fill_fragment(acc, 0.f);
                for (int kk = 0; kk <= ti * kFrag; kk += kFrag)
                {
                    wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, T, wmma::row_major> a;
                    wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::row_major> b;
                    wmma::load_matrix_sync(a, Ah + ti * kFrag * Cfg::kLdAh + kk, Cfg::kLdAh);
                    wmma::load_matrix_sync(b, Vs + kk * Cfg::kLdV + tj * kFrag, Cfg::kLdV);
                    wmma::mma_sync(acc, a, b, acc);
                }
                wmma::store_matrix_sync(Os + ti * kFrag * Cfg::kLdO + tj * kFrag, acc, Cfg::kLdO, wmma::mem_row_major);
            }
        }
        __syncthreads();

        // out = scale (A V + Q S) / den: a thread owns one column and every kRowStep-th row. With tensor cores Os
        // already holds (scale A / den) V and acc gets Q S only.
        {
            constexpr int kRowStep = kThreads / TM;
            constexpr int kRows = C / kRowStep;
            const int m = tid % TM, r0 = tid / TM;
            float acc[kRows] = {};
            if constexpr (!Cfg::kTensorCores)
            {
                for (int s = 0; s < C; ++s)
                {
                    const float vs = Vs[s * Cfg::kLdV + m];
#pragma unroll
                    for (int j = 0; j < kRows; ++j)
                    {
                        const int t = r0 + j * kRowStep;
                        acc[j] += (s <= t ? Af[t * Cfg::kLdA + s] : 0.f) * vs;
                    }
                }
            }
            for (int e = 0; e < E; ++e)
            {
                const float se = Ss[e * Cfg::kLdS + m];
#pragma unroll
                for (int j = 0; j < kRows; ++j)
                    acc[j] += toFloat(Qs[(r0 + j * kRowStep) * Cfg::kLdQK + e]) * se;
            }
#pragma unroll
            for (int j = 0; j < kRows; ++j)
            {
                const int t = r0 + j * kRowStep;
                if (t < rows)
                {
                    float o = p.scale * acc[j] / den[t];
                    if constexpr (Cfg::kTensorCores)
                        o += Os[t * Cfg::kLdO + m];
                    ob[tokenRow(p, b, t0 + t) * ldvo + m0 + m] = fromFloat<T>(o);
                }
            }
        }
        __syncthreads();

        // S += K^T V.
        if constexpr (Cfg::kTensorCores)
        {
            namespace wmma = nvcuda::wmma;
            constexpr int nti = E / kFrag, ntj = TM / kFrag;
            for (int tile = warp; tile < nti * ntj; tile += kWarps)
            {
                const int ti = tile / ntj, tj = tile % ntj;
                float* St = Ss + ti * kFrag * Cfg::kLdS + tj * kFrag;
                wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc;
                wmma::load_matrix_sync(acc, St, Cfg::kLdS, wmma::mem_row_major);
                for (int kk = 0; kk < C; kk += kFrag)
                {
                    wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, T, wmma::col_major> a;
                    wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::row_major> b;
                    wmma::load_matrix_sync(a, Ks + kk * Cfg::kLdQK + ti * kFrag, Cfg::kLdQK);
                    wmma::load_matrix_sync(b, Vs + kk * Cfg::kLdV + tj * kFrag, Cfg::kLdV);
                    wmma::mma_sync(acc, a, b, acc);
                }
                wmma::store_matrix_sync(St, acc, Cfg::kLdS, wmma::mem_row_major);
            }
        }
        else
        {
            constexpr int kRowStep = kThreads / TM;
            constexpr int kRows = E / kRowStep;
            const int m = tid % TM, r0 = tid / TM;
            float acc[kRows] = {};
            for (int s = 0; s < C; ++s)
            {
                const float vs = Vs[s * Cfg::kLdV + m];
#pragma unroll
                for (int j = 0; j < kRows; ++j)
                    acc[j] += Ks[s * Cfg::kLdQK + r0 + j * kRowStep] * vs;
            }
#pragma unroll
            for (int j = 0; j < kRows; ++j)
                Ss[(r0 + j * kRowStep) * Cfg::kLdS + m] += acc[j];
        }
        // z += sum_s k_s over the chunk's non-pad steps in fp32 from the inputs themselves, as the recurrent kernel
        // sums it: not from the activation-type copy in Ks (the matmul operand), whose rounding would accumulate in z.
        if (p.normalised)
        {
            for (int e = tid; e < E; e += kThreads)
            {
                float sum = 0.f;
                for (int s = 0; s < rows; ++s)
                {
                    const size_t row = tokenRow(p, b, t0 + s);
                    if (!isPad(x.mask, p.mask_type, row))
                        sum += featureMap(p, toFloat(kb[row * ldqk + e]));
                }
                zs[e] += sum;
            }
        }
        __syncthreads();
    }

    for (int i = tid; i < E * TM; i += kThreads)
    {
        const int e = i / TM, m = i % TM;
        x.S_out[(bh * E + e) * M + m0 + m] = Ss[e * Cfg::kLdS + m];
    }
    if (p.normalised && blockIdx.y == 0)
    {
        for (int e = tid; e < E; e += kThreads)
            x.z_out[bh * E + e] = zs[e];
    }
}

//! Raises `kernel`'s dynamic shared memory limit to `bytes` once per device: the attribute is per device and
//! function, and setting it on every enqueue costs a driver call each time. `done` (one bit per device, first
//! 64 devices; past them it is set on every call) belongs to that one kernel. The caller relaunches with
//! `force` when a launch says the limit is missing (a new CUDA context after cudaDeviceReset forgets it).
template <typename Kernel>
cudaError_t allowSharedMemory(Kernel* kernel, int bytes, std::atomic<unsigned long long>& done, bool force)
{
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess)
        return err;
    const unsigned long long bit = device < 64 ? 1ull << device : 0ull;
    if (!force && bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0)
        return cudaSuccess;
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (err == cudaSuccess)
        done.fetch_or(bit, std::memory_order_acq_rel);
    return err;
}

template <typename T, int E, int M>
cudaError_t launch(const RecurrenceProblem& p, const RecurrenceTensors<T>& x, cudaStream_t stream)
{
    using Cfg = MmaConfig<T, E, M>;
    static std::atomic<unsigned long long> shared_set{0}; // per instantiation: this kernel's devices
    const auto kernel = &chunkedMmaKernel<T, E, M>;
    const dim3 grid(static_cast<unsigned>(static_cast<size_t>(p.B) * p.Hkv), Cfg::kTiles);
    cudaError_t err = cudaSuccess;
    for (bool force : {false, true})
    {
        err = allowSharedMemory(kernel, static_cast<int>(Cfg::kBytes), shared_set, force);
        if (err != cudaSuccess)
            return err;
        RNNX_LAUNCH(kernel, grid, kThreads, Cfg::kBytes, stream)(p, x);
        err = cudaGetLastError();
        if (err != cudaErrorInvalidValue) // a launch refused for its shared memory says kInvalidValue
            break;
    }
    return err;
}

template <typename T, int E>
cudaError_t dispatchM(const RecurrenceProblem& p, const RecurrenceTensors<T>& x, cudaStream_t stream)
{
    switch (p.dv)
    {
    case 32: return launch<T, E, 32>(p, x, stream);
    case 64: return launch<T, E, 64>(p, x, stream);
    case 128: return launch<T, E, 128>(p, x, stream);
    default: return cudaErrorInvalidValue;
    }
}

bool isMmaDim(int dim)
{
    return dim == 32 || dim == 64 || dim == 128;
}

} // namespace

bool chunkedMmaEligible(const LinearRecurrenceParams& params)
{
    return params.rule == LinearRecurrenceRule::kLINEAR && params.q_heads == params.kv_heads && !params.qk_l2_norm
        && isMmaDim(params.dim_k) && isMmaDim(params.dim_v);
}

int chunkedMmaTiles(int dk, int dv, DataType type)
{
    return dv / tileColumns(type != DataType::kFLOAT, dk, dv);
}

template <typename T>
cudaError_t launchChunkedMma(const RecurrenceProblem& p, const RecurrenceTensors<T>& x, cudaStream_t stream)
{
    switch (p.dk)
    {
    case 32: return dispatchM<T, 32>(p, x, stream);
    case 64: return dispatchM<T, 64>(p, x, stream);
    case 128: return dispatchM<T, 128>(p, x, stream);
    default: return cudaErrorInvalidValue;
    }
}

template cudaError_t launchChunkedMma<float>(const RecurrenceProblem&, const RecurrenceTensors<float>&, cudaStream_t);
template cudaError_t launchChunkedMma<__half>(const RecurrenceProblem&, const RecurrenceTensors<__half>&, cudaStream_t);
template cudaError_t launchChunkedMma<__nv_bfloat16>(
    const RecurrenceProblem&, const RecurrenceTensors<__nv_bfloat16>&, cudaStream_t);

} // namespace detail
} // namespace kernels
} // namespace rnnx
