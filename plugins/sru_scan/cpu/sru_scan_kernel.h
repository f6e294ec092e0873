// The SRU scan CPU kernel (forward and backward), host-independent: one kernel, two hosts.
//
// rnnx's torch extension (sru_scan_cpu.cpp) and its ONNX Runtime custom-op library include this header; each
// passes its own parallel-for, a callable parallel_for(begin, end, grain, fn) that runs fn(b, e) over
// disjoint ranges [b, e) covering [begin, end) (at::parallel_for in torch, ORT's thread pool in ONNX Runtime).
// Layouts and the scheme: see the comment at the top of sru_scan_cpu.cpp. No torch, no ORT here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../../cpu/vector_math.h"

namespace rnnx::sru_cpu
{
using rnnx::vmath::sigmoid;
using rnnx::vmath::vtanh;

constexpr int64_t kBlock = 32;

struct Problem
{
    int64_t L, B, D, d;
    double scale_x;
    int64_t columns() const
    {
        return B * D * d;
    }
    int64_t blocks_per_row() const
    {
        return (d + kBlock - 1) / kBlock;
    }
    int64_t tasks() const
    {
        return B * D * blocks_per_row();
    }
    // Enough column-steps per task that short problems (decode, L = 1) stay on one thread.
    int64_t grain() const
    {
        return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, L * kBlock));
    }
};

// One task: hidden units [i0, i0 + n) of row (b, dr).
struct Block
{
    int64_t b, dr, i0, n, col0;
    Block(const Problem& p, int64_t task)
    {
        const int64_t nb = p.blocks_per_row();
        const int64_t row = task / nb; // row = b * D + dr
        b = row / p.D;
        dr = row % p.D;
        i0 = (task % nb) * kBlock;
        n = std::min(kBlock, p.d - i0);
        col0 = row * p.d + i0;
    }
    // Time index of the s-th step this block processes.
    int64_t time(const Problem& p, int64_t s) const
    {
        return dr == 0 ? s : p.L - 1 - s;
    }
};

// Step inputs of a block, de-interleaved into contiguous arrays: u0 = x~, u1 = f, u2 = r
// pre-activations and the skip term sk (x' = U_x' or scale_x * x).
template <typename acc_t> struct StepInputs
{
    acc_t u0[kBlock], u1[kBlock], u2[kBlock], sk[kBlock];

    template <typename scalar_t, int K, bool SKIP> void load(const scalar_t* u, const acc_t* xp, acc_t scale, int64_t n)
    {
        for (int64_t j = 0; j < n; ++j)
        {
            u0[j] = static_cast<acc_t>(u[j * K]);
            u1[j] = static_cast<acc_t>(u[j * K + 1]);
            u2[j] = static_cast<acc_t>(u[j * K + 2]);
        }
        if constexpr (SKIP && K == 4)
        {
            for (int64_t j = 0; j < n; ++j)
                sk[j] = static_cast<acc_t>(u[j * K + 3]);
        }
        else if constexpr (SKIP)
        {
            for (int64_t j = 0; j < n; ++j)
                sk[j] = xp[j] * scale;
        }
    }
};

// Runs the tasks [begin, end) in groups of at most max_group tasks. Within a group time is the
// outer loop and the tasks the inner one, so each step sweeps neighbouring memory.
template <typename Fn> void for_each_group(const Problem& p, int64_t begin, int64_t end, int64_t max_group, Fn&& fn)
{
    std::vector<Block> blocks;
    for (int64_t g0 = begin; g0 < end; g0 += max_group)
    {
        blocks.clear();
        for (int64_t task = g0; task < std::min(end, g0 + max_group); ++task)
            blocks.emplace_back(p, task);
        fn(blocks);
    }
}

template <typename scalar_t, typename acc_t, int K, bool SKIP, bool TANH, typename ParallelFor>
void forward_impl(const ParallelFor& parallel_for, const Problem& p, const scalar_t* U, const acc_t* x, const acc_t* w,
    const acc_t* bias, const acc_t* c0, const uint8_t* mask, scalar_t* h, acc_t* c_last)
{
    const int64_t N = p.columns();
    const int64_t Dd = p.D * p.d;
    const acc_t scale = static_cast<acc_t>(p.scale_x);
    parallel_for(0, p.tasks(), p.grain(),
        [&](int64_t begin, int64_t end)
        {
            StepInputs<acc_t> in;
            acc_t out[kBlock];
            std::vector<acc_t> state;
            for_each_group(p, begin, end, end - begin,
                [&](const std::vector<Block>& blocks)
                {
                    const int64_t G = static_cast<int64_t>(blocks.size());
                    state.assign(static_cast<size_t>(G * kBlock), acc_t(0));
                    for (int64_t ti = 0; ti < G; ++ti)
                    {
                        for (int64_t j = 0; j < blocks[ti].n; ++j)
                            state[ti * kBlock + j] = c0[blocks[ti].col0 + j];
                    }
                    for (int64_t s = 0; s < p.L; ++s)
                    {
                        for (int64_t ti = 0; ti < G; ++ti)
                        {
                            const Block& blk = blocks[ti];
                            const int64_t n = blk.n, t = blk.time(p, s);
                            scalar_t* hp = h + t * N + blk.col0;
                            if (mask != nullptr && mask[t * p.B + blk.b] != 0)
                            {
                                for (int64_t j = 0; j < n; ++j)
                                    hp[j] = scalar_t(0);
                                continue;
                            }
                            in.template load<scalar_t, K, SKIP>(
                                U + (t * N + blk.col0) * K, SKIP && K == 3 ? x + t * N + blk.col0 : nullptr, scale, n);
                            acc_t* c = state.data() + ti * kBlock;
                            const int64_t wo = blk.dr * p.d + blk.i0;
                            const acc_t *vf = w + wo, *vr = w + Dd + wo, *bf = bias + wo, *br = bias + Dd + wo;
#pragma omp simd
                            for (int64_t j = 0; j < n; ++j)
                            {
                                const acc_t f = sigmoid<acc_t>(in.u1[j] + vf[j] * c[j] + bf[j]);
                                const acc_t r = sigmoid<acc_t>(in.u2[j] + vr[j] * c[j] + br[j]);
                                const acc_t cn = f * c[j] + (acc_t(1) - f) * in.u0[j];
                                const acc_t g = TANH ? vtanh<acc_t>(cn) : cn;
                                out[j] = SKIP ? r * g + (acc_t(1) - r) * in.sk[j] : r * g;
                                c[j] = cn;
                            }
                            for (int64_t j = 0; j < n; ++j)
                                hp[j] = static_cast<scalar_t>(out[j]);
                        }
                    }
                    for (int64_t ti = 0; ti < G; ++ti)
                    {
                        for (int64_t j = 0; j < blocks[ti].n; ++j)
                            c_last[blocks[ti].col0 + j] = state[ti * kBlock + j];
                    }
                });
        });
}

// Per-task running values of the backward, kBlock per task.
template <typename acc_t> struct BackwardState
{
    std::vector<acc_t> c, dc, gvf, gvr, gbf, gbr, c_hist;
    void reset(int64_t G, int64_t L)
    {
        for (auto* v : {&c, &dc, &gvf, &gvr, &gbf, &gbr})
            v->assign(static_cast<size_t>(G * kBlock), acc_t(0));
        c_hist.resize(static_cast<size_t>(std::max<int64_t>(L, 1) * G * kBlock));
    }
};

template <typename scalar_t, typename acc_t, int K, bool SKIP, bool TANH, typename ParallelFor>
void backward_impl(const ParallelFor& parallel_for, const Problem& p, const scalar_t* grad_h, const acc_t* grad_c,
    const scalar_t* U, const acc_t* x, const acc_t* w, const acc_t* bias, const acc_t* c0, const uint8_t* mask,
    scalar_t* dU, acc_t* dx, acc_t* dw, acc_t* dbias, acc_t* dc0)
{
    const int64_t N = p.columns();
    const int64_t Dd = p.D * p.d;
    const acc_t scale = static_cast<acc_t>(p.scale_x);
    // Tasks per group: the recomputed states of a group take about 1M values.
    const int64_t max_group = std::max<int64_t>(1, (int64_t(1) << 20) / (std::max<int64_t>(p.L, 1) * kBlock));
    parallel_for(0, p.tasks(), p.grain(),
        [&](int64_t begin, int64_t end)
        {
            StepInputs<acc_t> in;
            acc_t dh[kBlock], du0[kBlock], dzf[kBlock], dzr[kBlock], dsk[kBlock];
            BackwardState<acc_t> st;
            for_each_group(p, begin, end, max_group,
                [&](const std::vector<Block>& blocks)
                {
                    const int64_t G = static_cast<int64_t>(blocks.size());
                    st.reset(G, p.L);
                    for (int64_t ti = 0; ti < G; ++ti)
                    {
                        for (int64_t j = 0; j < blocks[ti].n; ++j)
                        {
                            st.c[ti * kBlock + j] = c0[blocks[ti].col0 + j];
                            st.dc[ti * kBlock + j] = grad_c[blocks[ti].col0 + j];
                        }
                    }
                    // Recompute the states: c_hist[(s * G + ti) * kBlock + j] = c_{t-1} of step s.
                    for (int64_t s = 0; s < p.L; ++s)
                    {
                        for (int64_t ti = 0; ti < G; ++ti)
                        {
                            const Block& blk = blocks[ti];
                            const int64_t n = blk.n, t = blk.time(p, s);
                            acc_t* c = st.c.data() + ti * kBlock;
                            acc_t* ch = st.c_hist.data() + (s * G + ti) * kBlock;
                            for (int64_t j = 0; j < n; ++j)
                                ch[j] = c[j];
                            if (mask != nullptr && mask[t * p.B + blk.b] != 0)
                                continue;
                            in.template load<scalar_t, K, false>(U + (t * N + blk.col0) * K, nullptr, scale, n);
                            const int64_t wo = blk.dr * p.d + blk.i0;
                            const acc_t *vf = w + wo, *bf = bias + wo;
#pragma omp simd
                            for (int64_t j = 0; j < n; ++j)
                            {
                                const acc_t f = sigmoid<acc_t>(in.u1[j] + vf[j] * c[j] + bf[j]);
                                c[j] = f * c[j] + (acc_t(1) - f) * in.u0[j];
                            }
                        }
                    }
                    // Reverse walk.
                    for (int64_t s = p.L - 1; s >= 0; --s)
                    {
                        for (int64_t ti = 0; ti < G; ++ti)
                        {
                            const Block& blk = blocks[ti];
                            const int64_t n = blk.n, t = blk.time(p, s);
                            scalar_t* du = dU + (t * N + blk.col0) * K;
                            acc_t* dxp = dx + t * N + blk.col0;
                            if (mask != nullptr && mask[t * p.B + blk.b] != 0)
                            {
                                for (int64_t j = 0; j < n * K; ++j)
                                    du[j] = scalar_t(0);
                                if constexpr (SKIP && K == 3)
                                {
                                    for (int64_t j = 0; j < n; ++j)
                                        dxp[j] = acc_t(0);
                                }
                                continue;
                            }
                            in.template load<scalar_t, K, SKIP>(
                                U + (t * N + blk.col0) * K, SKIP && K == 3 ? x + t * N + blk.col0 : nullptr, scale, n);
                            const scalar_t* gh = grad_h + t * N + blk.col0;
                            for (int64_t j = 0; j < n; ++j)
                                dh[j] = static_cast<acc_t>(gh[j]);
                            const acc_t* ch = st.c_hist.data() + (s * G + ti) * kBlock;
                            const int64_t o = ti * kBlock;
                            acc_t *dc = st.dc.data() + o, *gvf = st.gvf.data() + o, *gvr = st.gvr.data() + o;
                            acc_t *gbf = st.gbf.data() + o, *gbr = st.gbr.data() + o;
                            const int64_t wo = blk.dr * p.d + blk.i0;
                            const acc_t *vf = w + wo, *vr = w + Dd + wo, *bf = bias + wo, *br = bias + Dd + wo;
#pragma omp simd
                            for (int64_t j = 0; j < n; ++j)
                            {
                                const acc_t cp = ch[j];
                                const acc_t f = sigmoid<acc_t>(in.u1[j] + vf[j] * cp + bf[j]);
                                const acc_t r = sigmoid<acc_t>(in.u2[j] + vr[j] * cp + br[j]);
                                const acc_t cn = f * cp + (acc_t(1) - f) * in.u0[j];
                                const acc_t g = TANH ? vtanh<acc_t>(cn) : cn;
                                const acc_t d_r = SKIP ? dh[j] * (g - in.sk[j]) : dh[j] * g;
                                const acc_t dg = dh[j] * r;
                                const acc_t dcn = dc[j] + (TANH ? dg * (acc_t(1) - g * g) : dg);
                                const acc_t zf = dcn * (cp - in.u0[j]) * f * (acc_t(1) - f);
                                const acc_t zr = d_r * r * (acc_t(1) - r);
                                du0[j] = dcn * (acc_t(1) - f);
                                dzf[j] = zf;
                                dzr[j] = zr;
                                dsk[j] = SKIP ? dh[j] * (acc_t(1) - r) : acc_t(0);
                                gvf[j] += zf * cp;
                                gvr[j] += zr * cp;
                                gbf[j] += zf;
                                gbr[j] += zr;
                                dc[j] = dcn * f + zf * vf[j] + zr * vr[j];
                            }
                            for (int64_t j = 0; j < n; ++j)
                            {
                                du[j * K] = static_cast<scalar_t>(du0[j]);
                                du[j * K + 1] = static_cast<scalar_t>(dzf[j]);
                                du[j * K + 2] = static_cast<scalar_t>(dzr[j]);
                            }
                            if constexpr (K == 4)
                            {
                                for (int64_t j = 0; j < n; ++j)
                                    du[j * K + 3] = static_cast<scalar_t>(dsk[j]);
                            }
                            else if constexpr (SKIP)
                            {
                                for (int64_t j = 0; j < n; ++j)
                                    dxp[j] = dsk[j] * scale;
                            }
                        }
                    }
                    for (int64_t ti = 0; ti < G; ++ti)
                    {
                        const Block& blk = blocks[ti];
                        const int64_t o = ti * kBlock, wo = blk.dr * p.d + blk.i0, po = blk.b * 2 * Dd + wo;
                        for (int64_t j = 0; j < blk.n; ++j)
                        {
                            dc0[blk.col0 + j] = st.dc[o + j];
                            dw[po + j] = st.gvf[o + j];
                            dw[po + Dd + j] = st.gvr[o + j];
                            dbias[po + j] = st.gbf[o + j];
                            dbias[po + Dd + j] = st.gbr[o + j];
                        }
                    }
                });
        });
}

// Calls fn(K, SKIP, TANH) with compile-time constants for the runtime (k, has_skip, use_tanh).
template <typename Fn> void dispatch_variant(int64_t k, bool has_skip, bool use_tanh, Fn&& fn)
{
    auto with_tanh = [&](auto K, auto SKIP)
    {
        if (use_tanh)
            fn(K, SKIP, std::true_type{});
        else
            fn(K, SKIP, std::false_type{});
    };
    auto with_skip = [&](auto K)
    {
        if (has_skip)
            with_tanh(K, std::true_type{});
        else
            with_tanh(K, std::false_type{});
    };
    if (k == 3)
        with_skip(std::integral_constant<int, 3>{});
    else
        with_skip(std::integral_constant<int, 4>{});
}

} // namespace rnnx::sru_cpu
