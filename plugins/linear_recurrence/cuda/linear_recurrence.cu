// Linear recurrence (rnnx::kernels::linearRecurrenceForward): ONNX opset 27 LinearAttention's four update rules
// with rnnx's pad mask. Per kv head, with state S (d_k x d_v, fp32), a_t = exp(decay_t) (a scalar per head or a
// diagonal per key dim) and the written values w_t (v_t for linear / gated; beta_t (v_t - (a_t S_{t-1})^T k_t) for
// the delta rules), every rule reads S_t = a_t S_{t-1} + k_t w_t^T, and o_t = scale * S_t^T q_t per query head.
//
// Both kernels here run one block per (b, kv head h, tile of kTileV columns of d_v): the block owns S[:, m0 : m0+TV]
// in shared memory, all d_k rows, so the delta rule's S^T k of its columns is local; it reads its tile of
// past_state once at the start and writes present_state once at the end (present_state may alias past_state:
// the tiles are disjoint). Grouped query (H_q = G H_kv): the block reads key head h and the G query heads
// h*G .. h*G+G-1, writing output heads h*G .. h*G+G-1; grouped value (H_kv = R H_q): it reads query and key head
// h / R and writes output head h (G = 1). Token t of batch row b is row tokenRow(b, t) of every token tensor (b*T + t,
// or t*B + b time-major). Every loaded query / key element goes through the feature map (x, or elu(x) + 1) in fp32;
// with qk_l2_norm each loaded row is then divided by sqrt(sum(x^2) + kQK_L2_NORM_EPS) in fp32 in shared memory (one
// warp per row) before it is used. With a normaliser (linear rule) each block also carries the whole z (d_k, shared
// memory; every column tile computes it, tile 0 writes z_out) and divides each output by scale z_t^T q_t + eps.
// The linear rule's chunked MMA kernel is in linear_recurrence_mma.cu.
//
// Recurrent kernel: token after token. Thread (m, g) owns column m of the tile and rows g, g + groups, ...;
// per token: decay its rows, (delta) partial S^T k meets in shared memory, write, z += k, then per query head a
// partial q^T S (and q^T z) that meets in shared memory.
//
// Chunked kernel: chunks of C tokens with the cumulative log decay b_t = sum_{s<=t} g_s inside the chunk
// (models/ops/linear_recurrence/chunked.py gives the maths):
//   delta rules: W = V',  (I + diag(beta) KK) W = diag(beta) (V - K~ S),  KK[t, s] = <k_t, e^{b_t-b_s} k_s> (s < t),
//                K~_t = e^{b_t} k_t, solved by forward substitution (one thread per column); else W = V
//   out_t = scale * (S^T (e^{b_t} q_t) + sum_{s<=t} <q_t, e^{b_t-b_s} k_s> w_s)
//   S     = diag(e^{b_end}) S + sum_s diag(e^{b_end-b_s}) k_s w_s^T
// Every exponent is b_t - b_s with s <= t or b_t alone, never positive. A pad step is loaded with k = 0 and
// g = 0: it writes nothing and does not decay, and its output is read from the carried state. The intra-chunk
// matrices are fp32 in shared memory, computed with fp32 FMA. With a normaliser (no decay):
//   den_t = scale * (q_t^T z + sum_{s<=t} <q_t, k_s>) + eps,   z += sum_s k_s
#include "linear_recurrence/cuda/linear_recurrence_internal.h"
#include "linear_recurrence/linear_recurrence_constants.h"

#include <cmath>

namespace rnnx
{
namespace kernels
{
namespace
{

using detail::featureMap;
using detail::fromFloat;
using detail::isPad;
using detail::toFloat;
using detail::tokenRow;
using Problem = detail::RecurrenceProblem;
template <typename T> using Tensors = detail::RecurrenceTensors<T>;

constexpr int kThreads = 128;
constexpr int kMaxDimK = kLINEAR_RECURRENCE_MAX_DIM_K;
constexpr size_t kMaxSharedBytes = 48 * 1024;

//! Divides each of the n rows (dk floats, stride ld) of X in shared memory by sqrt(sum(x^2) + kQK_L2_NORM_EPS), in
//! fp32: one warp per row, the sum by shuffles. Every thread of the block calls it, after the rows are written and
//! synchronised; each row is scaled by the warp that reduced it, so the caller synchronises before other threads
//! read X.
__device__ __forceinline__ void normalizeRows(float* X, int n, int dk, int ld)
{
    const int lane = threadIdx.x % 32;
    for (int t = threadIdx.x / 32; t < n; t += kThreads / 32) // uniform over the warp: all lanes shuffle
    {
        float sum = 0.f;
        for (int e = lane; e < dk; e += 32)
            sum += X[t * ld + e] * X[t * ld + e];
        for (int offset = 16; offset > 0; offset /= 2)
            sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        const float inv = 1.f / sqrtf(sum + kQK_L2_NORM_EPS);
        for (int e = lane; e < dk; e += 32)
            X[t * ld + e] *= inv;
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Recurrent kernel

constexpr int kStepTileV = 32;
constexpr int kStepGroups = kThreads / kStepTileV;

//! Shared floats of the recurrent kernel: S tile (dk x TV), k, q, a, z (dk each), v (TV), partial sums (groups x TV),
//! partial q^T z (groups), beta (32).
size_t stepSharedFloats(int dk)
{
    return static_cast<size_t>(dk) * kStepTileV + 4 * static_cast<size_t>(dk) + kStepTileV + kStepGroups * kStepTileV
        + kStepGroups + 32;
}

template <typename T> __global__ void __launch_bounds__(kThreads) recurrentKernel(Problem p, Tensors<T> x)
{
    RNNX_DYNAMIC_SHARED_MEMORY(float, smem, 16);
    const int dk = p.dk, dv = p.dv, TV = kStepTileV;
    float* S = smem;                        // [dk][TV]
    float* ks = S + dk * TV;                // [dk]
    float* qs = ks + dk;                    // [dk]
    float* as = qs + dk;                    // [dk] exp(decay), or [1]
    float* zs = as + dk;                    // [dk] normaliser z (zeros without one)
    float* vs = zs + dk;                    // [TV]
    float* partial = vs + TV;               // [groups][TV]
    float* qz = partial + kStepGroups * TV; // [groups] partial q^T z
    float* flags = qz + kStepGroups;        // [0] = beta
    const int tid = threadIdx.x;
    const int m = tid % TV, g = tid / TV;
    const int bh = blockIdx.x;
    const int b = bh / p.Hkv, h = bh % p.Hkv;
    const int m0 = blockIdx.y * TV;
    const bool col = m0 + m < dv;
    const size_t state0 = static_cast<size_t>(bh) * dk * dv;

    for (int e = g; e < dk; e += kStepGroups)
        S[e * TV + m] = (col && x.S_in != nullptr) ? x.S_in[state0 + static_cast<size_t>(e) * dv + m0 + m] : 0.f;
    for (int e = tid; e < dk; e += kThreads) // z[e] is only ever written by thread e % kThreads
        zs[e] = (p.normalised && x.z_in != nullptr) ? x.z_in[static_cast<size_t>(bh) * dk + e] : 0.f;

    for (int t = 0; t < p.T; ++t)
    {
        const size_t row = tokenRow(p, b, t);
        const bool pad = isPad(x.mask, p.mask_type, row); // uniform over the block
        if (!pad)
        {
            for (int e = tid; e < dk; e += kThreads)
                ks[e] = featureMap(p, toFloat(x.k[(row * p.Hk + h / p.R) * dk + e]));
            if (p.qk_l2_norm)
            {
                __syncthreads();
                normalizeRows(ks, 1, dk, dk);
            }
            for (int e = tid; e < p.Dg; e += kThreads)
                as[e] = expf(toFloat(x.decay[(row * p.Hkv + h) * p.Dg + e]));
            if (tid < TV)
                vs[tid] = m0 + tid < dv ? toFloat(x.v[(row * p.Hkv + h) * dv + m0 + tid]) : 0.f;
            if (tid == 0 && p.delta)
                flags[0] = toFloat(x.beta[row * (p.beta_per_head ? p.Hkv : 1) + (p.beta_per_head ? h : 0)]);
            __syncthreads();
            float r = 0.f;
            for (int e = g; e < dk; e += kStepGroups)
            {
                float s = S[e * TV + m];
                if (p.Dg > 0)
                    s *= as[p.Dg == 1 ? 0 : e];
                S[e * TV + m] = s;
                r += s * ks[e];
            }
            float w = vs[m];
            if (p.delta)
            {
                partial[g * TV + m] = r;
                __syncthreads();
                float total = 0.f;
                for (int j = 0; j < kStepGroups; ++j)
                    total += partial[j * TV + m];
                w = flags[0] * (w - total);
            }
            for (int e = g; e < dk; e += kStepGroups)
                S[e * TV + m] += ks[e] * w;
            if (p.normalised) // the linear rule: ks is k itself
            {
                for (int e = tid; e < dk; e += kThreads)
                    zs[e] += ks[e];
            }
            __syncthreads(); // partial, ks, vs free again; zs visible
        }
        for (int j = 0; j < p.G; ++j)
        {
            const int hq = h / p.R * p.G + j, ho = h * p.G + j; // query head, output head
            for (int e = tid; e < dk; e += kThreads)
                qs[e] = featureMap(p, toFloat(x.q[(row * p.Hq + hq) * dk + e]));
            if (p.qk_l2_norm)
            {
                __syncthreads();
                normalizeRows(qs, 1, dk, dk);
            }
            __syncthreads();
            float o = 0.f, d = 0.f; // d: q^T z, 0 without a normaliser
            for (int e = g; e < dk; e += kStepGroups)
            {
                o += qs[e] * S[e * TV + m];
                d += qs[e] * zs[e];
            }
            partial[g * TV + m] = o;
            if (m == 0)
                qz[g] = d;
            __syncthreads();
            if (g == 0 && col)
            {
                float total = 0.f, dot = 0.f;
                for (int i = 0; i < kStepGroups; ++i)
                {
                    total += partial[i * TV + m];
                    dot += qz[i];
                }
                const float den = p.normalised ? p.scale * dot + p.eps : 1.f;
                x.out[(row * p.Ho + ho) * dv + m0 + m] = fromFloat<T>(p.scale * total / den);
            }
            __syncthreads(); // qs, partial, qz free again
        }
    }

    if (col)
    {
        for (int e = g; e < dk; e += kStepGroups)
            x.S_out[state0 + static_cast<size_t>(e) * dv + m0 + m] = S[e * TV + m];
    }
    if (p.normalised && blockIdx.y == 0)
    {
        for (int e = tid; e < dk; e += kThreads)
            x.z_out[static_cast<size_t>(bh) * dk + e] = zs[e];
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Chunked kernel

//! Chunk length and column tile of the chunked kernel, and its shared memory.
struct ChunkShape
{
    int chunk;
    int tile_v;

    //! Shared floats: S (dk x TV), K, Q (C x (dk+1) each), cumulative log decay (C x Dg), W (C x TV), A (C x C),
    //! beta (C); with a normaliser z (dk) and the denominators (C).
    size_t sharedFloats(int dk, int Dg, bool normalised) const
    {
        const size_t C = chunk, TV = tile_v, d = dk;
        return d * TV + 2 * C * (d + 1) + C * (Dg > 0 ? Dg : 1) + C * TV + C * C + C + (normalised ? d + C : 0);
    }

    //! The largest chunk (then the widest tile) whose shared memory fits 48 KiB.
    static ChunkShape choose(int dk, int Dg, bool normalised)
    {
        const ChunkShape candidates[] = {{32, 32}, {32, 16}, {16, 32}, {16, 16}, {8, 16}, {8, 8}};
        for (const ChunkShape& c : candidates)
            if (c.sharedFloats(dk, Dg, normalised) * sizeof(float) <= kMaxSharedBytes)
                return c;
        return ChunkShape{0, 0};
    }
};

template <typename T> __global__ void __launch_bounds__(kThreads) chunkedKernel(Problem p, Tensors<T> x, int C, int TV)
{
    RNNX_DYNAMIC_SHARED_MEMORY(float, smem, 16);
    const int dk = p.dk, dv = p.dv, Dg = p.Dg > 0 ? p.Dg : 1;
    const int ldk = dk + 1; // K and Q rows padded: threads reading rows s, s+1, ... hit different banks
    const bool gated = p.Dg > 0;
    float* S = smem;          // [dk][TV]
    float* Ks = S + dk * TV;  // [C][ldk]
    float* Qs = Ks + C * ldk; // [C][ldk]
    float* Bs = Qs + C * ldk; // [C][Dg] cumulative log decay
    float* W = Bs + C * Dg;   // [C][TV] values, then written values
    float* A = W + C * TV;    // [C][C]
    float* betas = A + C * C; // [C]
    float* zs = betas + C;    // [dk] normaliser z (with a normaliser only)
    float* dens = zs + dk;    // [C] output denominators (with a normaliser only)
    const int tid = threadIdx.x;
    const int bh = blockIdx.x;
    const int b = bh / p.Hkv, h = bh % p.Hkv;
    const int m0 = blockIdx.y * TV;
    const size_t state0 = static_cast<size_t>(bh) * dk * dv;

    for (int i = tid; i < dk * TV; i += kThreads)
    {
        const int e = i / TV, m = i % TV;
        S[i] = (m0 + m < dv && x.S_in != nullptr) ? x.S_in[state0 + static_cast<size_t>(e) * dv + m0 + m] : 0.f;
    }
    if (p.normalised) // z[e] is only ever written by thread e % kThreads
    {
        for (int e = tid; e < dk; e += kThreads)
            zs[e] = x.z_in != nullptr ? x.z_in[static_cast<size_t>(bh) * dk + e] : 0.f;
    }
    // Exponent of the decay between b_t[e] (or b_t alone) and b_s[e]: the chunk's cumulative log decay.
    auto logDecay = [&](int t, int e) { return gated ? Bs[t * Dg + (Dg == 1 ? 0 : e)] : 0.f; };

    for (int t0 = 0; t0 < p.T; t0 += C)
    {
        const int n = p.T - t0 < C ? p.T - t0 : C;
        // Load the chunk: K (feature-mapped; pad rows zero), V, log decay (pad rows zero), beta.
        for (int i = tid; i < n * dk; i += kThreads)
        {
            const int t = i / dk, e = i % dk;
            const size_t row = tokenRow(p, b, t0 + t);
            Ks[t * ldk + e] =
                isPad(x.mask, p.mask_type, row) ? 0.f : featureMap(p, toFloat(x.k[(row * p.Hk + h / p.R) * dk + e]));
        }
        for (int i = tid; i < n * TV; i += kThreads)
        {
            const int t = i / TV, m = i % TV;
            W[i] = m0 + m < dv ? toFloat(x.v[(tokenRow(p, b, t0 + t) * p.Hkv + h) * dv + m0 + m]) : 0.f;
        }
        if (gated)
        {
            for (int d = tid; d < Dg; d += kThreads)
            {
                float sum = 0.f;
                for (int t = 0; t < n; ++t)
                {
                    const size_t row = tokenRow(p, b, t0 + t);
                    if (!isPad(x.mask, p.mask_type, row))
                        sum += toFloat(x.decay[(row * p.Hkv + h) * Dg + d]);
                    Bs[t * Dg + d] = sum;
                }
            }
        }
        if (p.delta)
        {
            for (int t = tid; t < n; t += kThreads)
            {
                const size_t row = tokenRow(p, b, t0 + t);
                betas[t] = toFloat(x.beta[row * (p.beta_per_head ? p.Hkv : 1) + (p.beta_per_head ? h : 0)]);
            }
        }
        __syncthreads();
        if (p.qk_l2_norm) // a pad row stays zero
        {
            normalizeRows(Ks, n, dk, ldk);
            __syncthreads();
        }

        if (p.delta)
        {
            // KK (strictly lower) and the right-hand side beta_t (v_t - (e^{b_t} k_t)^T S), in place in W.
            for (int i = tid; i < n * n; i += kThreads)
            {
                const int t = i / n, s = i % n;
                float sum = 0.f;
                if (s < t)
                {
                    for (int e = 0; e < dk; ++e)
                    {
                        const float k2 = Ks[t * ldk + e] * Ks[s * ldk + e];
                        sum += Dg > 1 && gated ? k2 * expf(logDecay(t, e) - logDecay(s, e)) : k2;
                    }
                    if (gated && Dg == 1)
                        sum *= expf(logDecay(t, 0) - logDecay(s, 0));
                }
                A[t * C + s] = sum;
            }
            for (int i = tid; i < n * dk; i += kThreads) // K~ = e^{b_t} k_t, in the Q buffer (free until then)
            {
                const int t = i / dk, e = i % dk;
                Qs[t * ldk + e] = gated ? Ks[t * ldk + e] * expf(logDecay(t, e)) : Ks[t * ldk + e];
            }
            __syncthreads();
            for (int i = tid; i < n * TV; i += kThreads)
            {
                const int t = i / TV, m = i % TV;
                float r = 0.f;
                for (int e = 0; e < dk; ++e)
                    r += Qs[t * ldk + e] * S[e * TV + m];
                W[i] = betas[t] * (W[i] - r);
            }
            __syncthreads();
            // Forward substitution: W_t -= beta_t sum_{s<t} KK[t, s] W_s, one thread per column.
            for (int m = tid; m < TV; m += kThreads)
            {
                for (int t = 1; t < n; ++t)
                {
                    float sum = 0.f;
                    for (int s = 0; s < t; ++s)
                        sum += A[t * C + s] * W[s * TV + m];
                    W[t * TV + m] -= betas[t] * sum;
                }
            }
            __syncthreads();
        }

        for (int j = 0; j < p.G; ++j)
        {
            const int hq = h / p.R * p.G + j, ho = h * p.G + j; // query head, output head
            for (int i = tid; i < n * dk; i += kThreads)
            {
                const int t = i / dk, e = i % dk;
                Qs[t * ldk + e] = featureMap(p, toFloat(x.q[(tokenRow(p, b, t0 + t) * p.Hq + hq) * dk + e]));
            }
            __syncthreads();
            if (p.qk_l2_norm)
            {
                normalizeRows(Qs, n, dk, ldk);
                __syncthreads();
            }
            // A[t, s] = <q_t, e^{b_t - b_s} k_s> for s <= t.
            for (int i = tid; i < n * n; i += kThreads)
            {
                const int t = i / n, s = i % n;
                float sum = 0.f;
                if (s <= t)
                {
                    for (int e = 0; e < dk; ++e)
                    {
                        const float qk = Qs[t * ldk + e] * Ks[s * ldk + e];
                        sum += Dg > 1 && gated ? qk * expf(logDecay(t, e) - logDecay(s, e)) : qk;
                    }
                    if (gated && Dg == 1)
                        sum *= expf(logDecay(t, 0) - logDecay(s, 0));
                }
                A[t * C + s] = sum;
            }
            __syncthreads();
            if (gated)
            {
                for (int i = tid; i < n * dk; i += kThreads) // e^{b_t} q_t
                    Qs[i / dk * ldk + i % dk] *= expf(logDecay(i / dk, i % dk));
                __syncthreads();
            }
            if (p.normalised) // den_t = scale * (q_t^T z + sum_{s<=t} A[t, s]) + eps (no decay)
            {
                for (int t = tid; t < n; t += kThreads)
                {
                    float d = 0.f;
                    for (int e = 0; e < dk; ++e)
                        d += Qs[t * ldk + e] * zs[e];
                    for (int s = 0; s <= t; ++s)
                        d += A[t * C + s];
                    dens[t] = p.scale * d + p.eps;
                }
                __syncthreads();
            }
            for (int i = tid; i < n * TV; i += kThreads)
            {
                const int t = i / TV, m = i % TV;
                float inter = 0.f;
                for (int e = 0; e < dk; ++e)
                    inter += Qs[t * ldk + e] * S[e * TV + m];
                float intra = 0.f;
                for (int s = 0; s <= t; ++s)
                    intra += A[t * C + s] * W[s * TV + m];
                const float den = p.normalised ? dens[t] : 1.f;
                if (m0 + m < dv)
                    x.out[(tokenRow(p, b, t0 + t) * p.Ho + ho) * dv + m0 + m] =
                        fromFloat<T>(p.scale * (inter + intra) / den);
            }
            __syncthreads(); // Qs, A, dens free again
        }

        // S = diag(e^{b_end}) S + sum_s diag(e^{b_end - b_s}) k_s w_s^T, with e^{b_end - b_s} k_s in place in Ks.
        if (gated)
        {
            for (int i = tid; i < n * dk; i += kThreads)
            {
                const int t = i / dk, e = i % dk;
                Ks[t * ldk + e] *= expf(logDecay(n - 1, e) - logDecay(t, e));
            }
            __syncthreads();
        }
        for (int i = tid; i < dk * TV; i += kThreads)
        {
            const int e = i / TV, m = i % TV;
            float s = gated ? expf(logDecay(n - 1, e)) * S[i] : S[i];
            for (int t = 0; t < n; ++t)
                s += Ks[t * ldk + e] * W[t * TV + m];
            S[i] = s;
        }
        if (p.normalised) // z += sum_t k_t (no decay: Ks holds the keys)
        {
            for (int e = tid; e < dk; e += kThreads)
            {
                float sum = 0.f;
                for (int t = 0; t < n; ++t)
                    sum += Ks[t * ldk + e];
                zs[e] += sum;
            }
        }
        __syncthreads(); // Ks, W, Bs free for the next chunk; zs visible
    }

    for (int i = tid; i < dk * TV; i += kThreads)
    {
        const int e = i / TV, m = i % TV;
        if (m0 + m < dv)
            x.S_out[state0 + static_cast<size_t>(e) * dv + m0 + m] = S[i];
    }
    if (p.normalised && blockIdx.y == 0)
    {
        for (int e = tid; e < dk; e += kThreads)
            x.z_out[static_cast<size_t>(bh) * dk + e] = zs[e];
    }
}

bool validRule(LinearRecurrenceRule rule)
{
    return rule == LinearRecurrenceRule::kLINEAR || rule == LinearRecurrenceRule::kGATED
        || rule == LinearRecurrenceRule::kDELTA || rule == LinearRecurrenceRule::kGATED_DELTA;
}

//! Sizes, enums and the normaliser's rule as linear_recurrence.h allows them (tensors are checked once the call is
//! known not to be empty).
bool validParams(const LinearRecurrenceParams& pr, const LinearRecurrenceNormaliser* normaliser)
{
    if (pr.batch < 0 || pr.length < 0 || pr.q_heads < 0 || pr.kv_heads < 0 || pr.dim_k < 1 || pr.dim_k > kMaxDimK
        || pr.dim_v < 1 || !validRule(pr.rule) || !detail::validMaskType(pr.mask_type))
        return false;
    // one of H_q, H_kv a multiple of the other (both 0 is an empty launch)
    if (pr.kv_heads == 0 || pr.q_heads == 0 ? pr.q_heads != pr.kv_heads
                                            : pr.q_heads % pr.kv_heads != 0 && pr.kv_heads % pr.q_heads != 0)
        return false;
    const bool kernel = pr.kernel == LinearRecurrenceKernel::kAUTO || pr.kernel == LinearRecurrenceKernel::kRECURRENT
        || pr.kernel == LinearRecurrenceKernel::kCHUNKED || pr.kernel == LinearRecurrenceKernel::kCHUNKED_MMA;
    const bool feature_map = pr.feature_map == LinearRecurrenceFeatureMap::kNONE
        || pr.feature_map == LinearRecurrenceFeatureMap::kELU_PLUS_ONE;
    return kernel && feature_map && (normaliser == nullptr || pr.rule == LinearRecurrenceRule::kLINEAR);
}

//! The kernel that runs `pr` (kAUTO resolved); kAUTO itself when kCHUNKED_MMA is asked for and not eligible.
LinearRecurrenceKernel kernelFor(const LinearRecurrenceParams& pr)
{
    const bool mma = detail::chunkedMmaEligible(pr);
    switch (pr.kernel)
    {
    case LinearRecurrenceKernel::kAUTO:
        return pr.length <= 1 ? LinearRecurrenceKernel::kRECURRENT
            : mma             ? LinearRecurrenceKernel::kCHUNKED_MMA
                              : LinearRecurrenceKernel::kCHUNKED;
    case LinearRecurrenceKernel::kCHUNKED_MMA: return mma ? pr.kernel : LinearRecurrenceKernel::kAUTO;
    default: return pr.kernel;
    }
}

//! What the kernels read, from checked params.
Problem problemOf(const LinearRecurrenceParams& pr, const LinearRecurrenceNormaliser* normaliser)
{
    const bool gated = pr.rule == LinearRecurrenceRule::kGATED || pr.rule == LinearRecurrenceRule::kGATED_DELTA;
    Problem p{};
    p.B = pr.batch;
    p.T = pr.length;
    p.Hq = pr.q_heads;
    p.Hkv = pr.kv_heads;
    p.Hk = pr.q_heads < pr.kv_heads ? pr.q_heads : pr.kv_heads;
    p.Ho = pr.q_heads < pr.kv_heads ? pr.kv_heads : pr.q_heads;
    p.G = pr.q_heads >= pr.kv_heads ? pr.q_heads / pr.kv_heads : 1;
    p.R = pr.kv_heads > pr.q_heads ? pr.kv_heads / pr.q_heads : 1;
    p.dk = pr.dim_k;
    p.dv = pr.dim_v;
    p.Dg = gated ? (pr.decay_per_key ? pr.dim_k : 1) : 0;
    p.delta = pr.rule == LinearRecurrenceRule::kDELTA || pr.rule == LinearRecurrenceRule::kGATED_DELTA;
    p.beta_per_head = pr.beta_per_head;
    p.qk_l2_norm = pr.qk_l2_norm;
    p.elu_plus_one = pr.feature_map == LinearRecurrenceFeatureMap::kELU_PLUS_ONE;
    p.time_major = pr.time_major;
    p.normalised = normaliser != nullptr;
    p.scale = pr.scale != 0.f ? pr.scale : 1.f / std::sqrt(static_cast<float>(pr.dim_k));
    p.eps = normaliser != nullptr ? normaliser->eps : 0.f;
    p.mask_type = pr.mask_type;
    return p;
}

//! Column tiles (blocks per kv head) of `kernel` for `p`.
int columnTiles(LinearRecurrenceKernel kernel, const Problem& p, DataType type)
{
    if (kernel == LinearRecurrenceKernel::kRECURRENT)
        return (p.dv + kStepTileV - 1) / kStepTileV;
    if (kernel == LinearRecurrenceKernel::kCHUNKED_MMA)
        return detail::chunkedMmaTiles(p.dk, p.dv, type);
    const ChunkShape shape = ChunkShape::choose(p.dk, p.Dg, p.normalised);
    return shape.chunk == 0 ? 1 : (p.dv + shape.tile_v - 1) / shape.tile_v;
}

//! The z the kernels read: z_in, or its copy in the workspace (enqueued on `stream`) when z_out aliases it and
//! several column tiles read it (one of them writes z_out).
cudaError_t stageZ(
    const LinearRecurrenceNormaliser& n, const Problem& p, int tiles, cudaStream_t stream, const float** z_in)
{
    *z_in = n.z_in;
    if (n.z_in == nullptr || n.z_in != n.z_out || tiles <= 1)
        return cudaSuccess;
    if (n.workspace == nullptr)
        return cudaErrorInvalidValue;
    const size_t bytes = static_cast<size_t>(p.B) * p.Hkv * p.dk * sizeof(float);
    *z_in = static_cast<const float*>(n.workspace);
    return cudaMemcpyAsync(n.workspace, n.z_in, bytes, cudaMemcpyDeviceToDevice, stream);
}

template <typename T> cudaError_t launchRecurrent(const Problem& p, const Tensors<T>& x, cudaStream_t stream)
{
    const size_t smem = stepSharedFloats(p.dk) * sizeof(float);
    const dim3 grid(static_cast<unsigned>(static_cast<size_t>(p.B) * p.Hkv), (p.dv + kStepTileV - 1) / kStepTileV);
    const auto kernel = &recurrentKernel<T>;
    RNNX_LAUNCH(kernel, grid, kThreads, smem, stream)(p, x);
    return cudaGetLastError();
}

template <typename T> cudaError_t launchChunked(const Problem& p, const Tensors<T>& x, cudaStream_t stream)
{
    const ChunkShape shape = ChunkShape::choose(p.dk, p.Dg, p.normalised);
    if (shape.chunk == 0)
        return cudaErrorInvalidValue;
    const size_t smem = shape.sharedFloats(p.dk, p.Dg, p.normalised) * sizeof(float);
    const dim3 grid(static_cast<unsigned>(static_cast<size_t>(p.B) * p.Hkv), (p.dv + shape.tile_v - 1) / shape.tile_v);
    const auto kernel = &chunkedKernel<T>;
    RNNX_LAUNCH(kernel, grid, kThreads, smem, stream)(p, x, shape.chunk, shape.tile_v);
    return cudaGetLastError();
}

} // namespace

size_t linearRecurrenceWorkspaceSize(const LinearRecurrenceParams& params, DataType, bool normalised)
{
    if (!normalised || params.batch <= 0 || params.kv_heads <= 0 || params.dim_k <= 0)
        return 0;
    const size_t z_bytes = static_cast<size_t>(params.batch) * params.kv_heads * params.dim_k * sizeof(float);
    return (z_bytes + 255) / 256 * 256;
}

cudaError_t linearRecurrenceForward(const LinearRecurrenceParams& params, DataType type, const void* query,
    const void* key, const void* value, const float* past_state, const void* decay, const void* beta,
    const void* mask_pad, void* output, float* present_state, cudaStream_t stream,
    const LinearRecurrenceNormaliser* normaliser)
{
    const LinearRecurrenceParams& pr = params;
    if (!validParams(pr, normaliser))
        return cudaErrorInvalidValue;
    const LinearRecurrenceKernel kernel = kernelFor(pr);
    if (kernel == LinearRecurrenceKernel::kAUTO) // kCHUNKED_MMA, not eligible
        return cudaErrorInvalidValue;
    const size_t blocks = static_cast<size_t>(pr.batch) * pr.kv_heads;
    const bool z_in_place = normaliser == nullptr || normaliser->z_in == normaliser->z_out;
    if (blocks == 0 || (pr.length == 0 && past_state == present_state && z_in_place))
        return cudaSuccess;
    const Problem p = problemOf(pr, normaliser);
    const bool missing = query == nullptr || key == nullptr || value == nullptr || output == nullptr
        || (p.Dg > 0 && decay == nullptr) || (p.delta && beta == nullptr);
    if (blocks > 0x7fffffffu || present_state == nullptr || (normaliser != nullptr && normaliser->z_out == nullptr)
        || (pr.length > 0 && missing))
        return cudaErrorInvalidValue;
    const float* z_in = nullptr;
    if (normaliser != nullptr)
    {
        const cudaError_t err = stageZ(*normaliser, p, columnTiles(kernel, p, type), stream, &z_in);
        if (err != cudaSuccess)
            return err;
    }
    return detail::dispatchType(type,
        [&](auto tag)
        {
            using T = decltype(tag);
            const Tensors<T> x{static_cast<const T*>(query), static_cast<const T*>(key), static_cast<const T*>(value),
                past_state, p.Dg > 0 ? static_cast<const T*>(decay) : nullptr,
                p.delta ? static_cast<const T*>(beta) : nullptr, mask_pad, static_cast<T*>(output), present_state, z_in,
                normaliser != nullptr ? normaliser->z_out : nullptr};
            switch (kernel)
            {
            case LinearRecurrenceKernel::kRECURRENT: return launchRecurrent(p, x, stream);
            case LinearRecurrenceKernel::kCHUNKED_MMA: return detail::launchChunkedMma(p, x, stream);
            default: return launchChunked(p, x, stream);
            }
        });
}

} // namespace kernels
} // namespace rnnx
