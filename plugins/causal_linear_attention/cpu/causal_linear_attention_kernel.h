// The causal linear attention CPU kernel (forward, recurrent form), host-independent.
//
// rnnx's ONNX Runtime custom-op library includes this header (plugins/ort/); a host passes its own
// parallel-for, a callable parallel_for(begin, end, grain, fn) running fn(b, e) over disjoint ranges [b, e)
// covering [begin, end). No torch, no ORT here. Its slow, obviously-correct twin is
// models/ops/causal_linear_attention/naive.py, which the tests compare it with.
//
// Per (batch row, head), with phi(x) = elu(x) + 1 (docs/ops.md):
//     S_t = S_{t-1} + phi(k_t) v_t^T      (E x M)        z_t = z_{t-1} + phi(k_t)      (E)
//     o_t = phi(q_t)^T S_t / (phi(q_t)^T z_t + eps)
// Layouts, row-major, heads packed: q, k (B, L, H*E); v, out (B, L, H*M) — with time_major, (L, B, H*E) and
// (L, B, H*M); S0, S_last (B, H, E, M); z0, z_last (B, H, E); pad (B, L), or (L, B) with time_major, one byte per
// step, non-zero = pad: S and z are carried over a pad step and its out is read from them. S0 / z0 / pad may be
// null (zeros / no pads). The state and all arithmetic are in acc_t (float for float activations).
// One task per (b, h) walks the L steps; each step reads and writes the E x M state once (the S update and
// phi(q)^T S in one sweep over its rows, vectorised over M).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../../cpu/vector_math.h"

namespace rnnx::linear_attention_cpu
{

struct Problem
{
    int64_t B, H, L, E, M;
    double eps;
    bool time_major;
    int64_t tasks() const
    {
        return B * H;
    }
    //! Steps between consecutive time steps of one (b, h), in units of a head's width.
    int64_t time_stride() const
    {
        return time_major ? B * H : H;
    }
    //! Offset of (b, h, t = 0) in units of a head's width.
    int64_t first_step(int64_t b, int64_t h) const
    {
        return (time_major ? b * H : b * L * H) + h;
    }
    //! Index of (b, t) in the pad mask.
    int64_t mask_index(int64_t b, int64_t t) const
    {
        return time_major ? t * B + b : b * L + t;
    }
};

template <typename scalar_t, typename acc_t, typename ParallelFor>
void forward_impl(const ParallelFor& parallel_for, const Problem& p, const scalar_t* q, const scalar_t* k,
    const scalar_t* v, const acc_t* S0, const acc_t* z0, const uint8_t* pad, scalar_t* out, acc_t* S_last,
    acc_t* z_last)
{
    const int64_t E = p.E, M = p.M, L = p.L, stride = p.time_stride();
    const acc_t eps = static_cast<acc_t>(p.eps);
    parallel_for(0, p.tasks(), 1,
        [&](int64_t begin, int64_t end)
        {
            std::vector<acc_t> pq(static_cast<size_t>(E)), pk(static_cast<size_t>(E)), vt(static_cast<size_t>(M)),
                num(static_cast<size_t>(M));
            for (int64_t task = begin; task < end; ++task)
            {
                acc_t* S = S_last + task * E * M;
                acc_t* z = z_last + task * E;
                for (int64_t i = 0; i < E * M; ++i)
                    S[i] = S0 != nullptr ? S0[task * E * M + i] : acc_t(0);
                for (int64_t e = 0; e < E; ++e)
                    z[e] = z0 != nullptr ? z0[task * E + e] : acc_t(0);
                const int64_t b = task / p.H, first = p.first_step(b, task % p.H);
                const scalar_t* qt = q + first * E;
                const scalar_t* kt = k + first * E;
                const scalar_t* vv = v + first * M;
                scalar_t* ot = out + first * M;
                for (int64_t t = 0; t < L; ++t, qt += stride * E, kt += stride * E, vv += stride * M, ot += stride * M)
                {
                    // a pad step adds phi(k) = 0 and v = 0: the state is carried
                    const bool keep = pad == nullptr || pad[p.mask_index(b, t)] == 0;
                    acc_t den = acc_t(0);
#pragma omp simd reduction(+ : den)
                    for (int64_t e = 0; e < E; ++e)
                    {
                        pq[e] = vmath::elu_plus_one(static_cast<acc_t>(qt[e]));
                        pk[e] = keep ? vmath::elu_plus_one(static_cast<acc_t>(kt[e])) : acc_t(0);
                        z[e] += pk[e];
                        den += pq[e] * z[e];
                    }
                    for (int64_t m = 0; m < M; ++m)
                    {
                        vt[m] = keep ? static_cast<acc_t>(vv[m]) : acc_t(0);
                        num[m] = acc_t(0);
                    }
                    for (int64_t e = 0; e < E; ++e)
                    {
                        acc_t* row = S + e * M;
                        const acc_t a = pk[e], b = pq[e];
#pragma omp simd
                        for (int64_t m = 0; m < M; ++m)
                        {
                            row[m] += a * vt[m];
                            num[m] += b * row[m];
                        }
                    }
                    const acc_t inv = acc_t(1) / (den + eps);
                    for (int64_t m = 0; m < M; ++m)
                        ot[m] = static_cast<scalar_t>(num[m] * inv);
                }
            }
        });
}

} // namespace rnnx::linear_attention_cpu
