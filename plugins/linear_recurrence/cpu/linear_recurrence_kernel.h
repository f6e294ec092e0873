// The linear recurrence CPU kernel (forward, token loop), host-independent: ONNX opset 27's LinearAttention rules
// (linear, gated, delta, gated_delta) with rnnx's pad mask (docs/ops.md, "Linear recurrence").
//
// rnnx's ONNX Runtime custom-op library includes this header (plugins/ort/); a host passes its own parallel-for, a
// callable parallel_for(begin, end, grain, fn) running fn(b, e) over disjoint ranges [b, e) covering [begin, end).
// No torch, no ORT here. Its slow, obviously-correct twin is models/ops/linear_recurrence/naive.py
// (linear_recurrence_naive), which the tests compare it with.
//
// Per kv head, state S (dk x dv), a_t = exp(decay_t) (a scalar per head, or one per key row of S), beta_t:
//     linear:      S_t = S_{t-1} + k_t v_t^T
//     gated:       S_t = a_t S_{t-1} + k_t v_t^T
//     delta:       S_t = S_{t-1} + k_t w_t^T,       w_t = beta_t (v_t - S_{t-1}^T k_t)
//     gated_delta: S_t = a_t S_{t-1} + k_t w_t^T,   w_t = beta_t (v_t - (a_t S_{t-1})^T k_t)
//     o_t = scale S_t^T q_t
// Two groupings (Hq and Hkv one a multiple of the other; Hk = min(Hq, Hkv) key heads, Ho = max(Hq, Hkv) output heads):
//     grouped query (Hq = G Hkv): kv head h has key head h and is read by the G query heads h*G .. h*G+G-1, which
//                                 give the output heads h*G .. h*G+G-1;
//     grouped value (Hkv = R Hq): state h reads query and key head h / R and gives output head h.
// With feature_map each query and key head x is first phi(x) = elu(x) + 1, elementwise; with qk_l2_norm each query
// and key head x (dk values, after phi) is then x / sqrt(sum(x^2) + kQK_L2_NORM_EPS), in acc_t.
// Layouts, row-major, heads packed: query (B, T, Hq*dk); key (B, T, Hk*dk); value (B, T, Hkv*dv); out
// (B, T, Ho*dv); decay (B, T, Hkv*Dg), Dg = 1 or dk; beta (B, T, Hb), Hb = Hkv or 1; past_state, present_state
// (B, Hkv, dk, dv); pad (B, T), one byte per step, non-zero = pad: the state is carried over a pad step (its key,
// value, decay and beta are ignored) and its output is read from the carried state. With time_major the token rows
// are (T, B, ...) and pad is (T, B). past_state / pad may be null (zeros / no pads); decay is read by the gated rules
// only, beta by the delta rules only. The state and all arithmetic are in acc_t (float for float activations).
//
// The normaliser (the linear rule only; rnnx's causal linear attention is the linear rule with phi and scale 1 plus
// this): a second state z (B, Hkv, dk), the column a ones column of value would add to S,
//     z_t = z_{t-1} + k_t (a pad step carries it),      o_t = scale S_t^T q_t / (scale z_t^T q_t + eps)
// which is LinearAttention(linear, scale) on [v | 1] followed by o[:dv] / (o[dv] + eps). z_in may be null (zeros);
// z_out must not alias z_in (every column tile reads z_in; the first writes z_out).
//
// The columns of S evolve independently under every rule (S^T k, w and S^T q are per column), so one task owns
// (batch row, kv head, tile of TW columns) and walks the T steps with its dk x TW block of S (present_state itself
// when dv fits one tile, else a contiguous copy); each step sweeps the block once (update and output together; the
// delta rules' S^T k in the previous step's sweep or in a sweep before), the tile's accumulators in registers,
// vectorised over the tile with the build's widest vectors (AVX-512, AVX2 or SSE: ort/linear_recurrence_isa.cpp is
// built for each). The first update sweep reads past_state and writes the block, so a decode step reads and writes
// the state once (no copy first). Each step loads its key and query heads (phi, qk_l2_norm) once into acc_t
// coefficients.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../../cpu/vector_math.h"
#include "../linear_recurrence_constants.h"

namespace rnnx::linear_recurrence_cpu
{

//! The update rules, in the order of the standard's spelling (linear, gated, delta, gated_delta).
enum class Rule
{
    linear,
    gated,
    delta,
    gated_delta,
};

inline bool is_gated(Rule r)
{
    return r == Rule::gated || r == Rule::gated_delta;
}

inline bool is_delta(Rule r)
{
    return r == Rule::delta || r == Rule::gated_delta;
}

struct Problem
{
    //! Hq and Hkv: one a multiple of the other (the two groupings above).
    int64_t B, T, Hq, Hkv, dk, dv;
    Rule rule;
    //! decay holds dk values per kv head (else one).
    bool decay_per_key;
    //! beta holds one value per kv head (else one shared by all heads).
    bool beta_per_head;
    //! The output scale, already resolved (not 0).
    double scale;
    //! Each query and key head is divided by its L2 norm (sqrt(sum(x^2) + kQK_L2_NORM_EPS)) first.
    bool qk_l2_norm{false};
    //! Token rows are (T, B, ...) and the pad mask (T, B); else (B, T, ...) and (B, T).
    bool time_major{false};
    //! Queries and keys go through phi(x) = elu(x) + 1 first (before qk_l2_norm).
    bool feature_map{false};
    //! The linear rule's normaliser (z_in / z_out of forward_impl) with this epsilon; linear rule only.
    bool normalise{false};
    double eps{0.0};

    //! Query heads read per state (and output heads per state): Hq / Hkv for grouped query, 1 for grouped value.
    int64_t group() const
    {
        return Hq >= Hkv ? Hq / Hkv : 1;
    }
    //! States per query / key head: Hkv / Hq for grouped value, 1 for grouped query.
    int64_t repeat() const
    {
        return Hkv > Hq ? Hkv / Hq : 1;
    }
};

//! Columns of S per task: 256 bytes of acc_t (eight AVX2 registers per accumulator row: enough independent FMAs).
template <typename acc_t> constexpr int64_t tile_width = 256 / static_cast<int64_t>(sizeof(acc_t));

//! Element updates one task does below which the tasks are run in one chunk (a decode step is cheaper than a wake).
constexpr int64_t min_parallel_work = int64_t(1) << 15;

namespace detail
{

//! Pointers and strides of one task: state (kv head) h of batch row b, columns [j0, j0 + width).
template <typename scalar_t, typename acc_t> struct Task
{
    const scalar_t *q, *k, *v, *decay, *beta;
    const uint8_t* pad;
    scalar_t* out;
    acc_t* S;
    int64_t ld;        // row stride of S
    const acc_t* S_in; // the block's values at the start (past_state's tile, row stride ld_in); null = zeros
    int64_t ld_in;
    int64_t q_step, k_step, v_step, out_step, decay_step, beta_step, pad_step;
    const acc_t* z_in; // the normaliser's z (dk) at the start, null = zeros (Problem::normalise)
    acc_t* z_out;      // where the task writes z at the end; null: another tile of the state writes it
};

// The widest vector of the build (64 bytes with AVX-512, else 32: an AVX2 register, two SSE ones in the base build) as
// one value (GCC / Clang vector extension); `at` views unaligned memory of S or of a row buffer as one (no vector
// crosses a call, so no ABI question).
#if defined(__AVX512F__)
constexpr int64_t vector_bytes = 64;
#else
constexpr int64_t vector_bytes = 32;
#endif
template <typename acc_t> struct Vec;
template <> struct Vec<float>
{
    typedef float type __attribute__((vector_size(vector_bytes)));
    typedef float unaligned __attribute__((vector_size(vector_bytes), aligned(4), may_alias));
};
template <> struct Vec<double>
{
    typedef double type __attribute__((vector_size(vector_bytes)));
    typedef double unaligned __attribute__((vector_size(vector_bytes), aligned(8), may_alias));
};
template <typename acc_t> using vec = typename Vec<acc_t>::type;
template <typename acc_t> constexpr int64_t lanes = vector_bytes / static_cast<int64_t>(sizeof(acc_t));

template <typename acc_t> inline typename Vec<acc_t>::unaligned& at(acc_t* p)
{
    return *reinterpret_cast<typename Vec<acc_t>::unaligned*>(p);
}

template <typename acc_t> inline const typename Vec<acc_t>::unaligned& at(const acc_t* p)
{
    return *reinterpret_cast<const typename Vec<acc_t>::unaligned*>(p);
}

// The sweeps over a block of dk rows (stride ld) of N columns: FULL ? TW (in registers) : n (a partial tile).

// out[j] = sum_i c[i] S[i, j]: S^T q for an output, S^T (a k) for the delta rules' retrieval.
template <int64_t TW, bool FULL, typename acc_t>
void read(const acc_t* S, int64_t ld, int64_t dk, int64_t n, const acc_t* c, acc_t* out)
{
    if constexpr (FULL)
    {
        constexpr int64_t NV = TW / lanes<acc_t>;
        vec<acc_t> r0[NV], r1[NV]; // two chains of FMAs unless NV already gives eight
        for (int64_t v = 0; v < NV; ++v)
            r0[v] = r1[v] = vec<acc_t>{};
        int64_t i = 0;
        for (; NV < 8 && i + 1 < dk; i += 2)
        {
            const acc_t* row = S + i * ld;
            const acc_t c0 = c[i], c1 = c[i + 1];
            for (int64_t v = 0; v < NV; ++v)
            {
                r0[v] += c0 * at(row + v * lanes<acc_t>);
                r1[v] += c1 * at(row + ld + v * lanes<acc_t>);
            }
        }
        for (; i < dk; ++i)
            for (int64_t v = 0; v < NV; ++v)
                r0[v] += c[i] * at(S + i * ld + v * lanes<acc_t>);
        for (int64_t v = 0; v < NV; ++v)
            at(out + v * lanes<acc_t>) = r0[v] + r1[v];
    }
    else
    {
        for (int64_t j = 0; j < n; ++j)
            out[j] = acc_t(0);
        for (int64_t i = 0; i < dk; ++i)
        {
            const acc_t* row = S + i * ld;
            const acc_t ci = c[i];
            for (int64_t j = 0; j < n; ++j)
                out[j] += ci * row[j];
        }
    }
}

// S[i, j] = f[i] Sin[i, j] + k[i] w[j] (f = 1 unless SCALE) and o[j] = sum_i q[i] S[i, j] of the new S, in one sweep;
// with NEXT also r[j] = sum_i kn[i] S[i, j] of the new S (the delta rules' retrieval for the next step). Sin (row
// stride ld_in) is where the block's values are before its first sweep (past_state: read once, no copy) with FROM;
// without FROM it is S itself (Sin and ld_in are not read: the compiler sees one block). Inlined into the step loop:
// as a call it spent a fifth of a delta rule's step outside the sweep (its accumulators set up through the stack).
template <int64_t TW, bool FULL, bool SCALE, bool NEXT, bool FROM, typename acc_t>
__attribute__((always_inline)) inline void update(acc_t* S, int64_t ld, const acc_t* Sin, int64_t ld_in, int64_t dk,
    int64_t n, const acc_t* f, const acc_t* k, const acc_t* w, const acc_t* q, acc_t* o, const acc_t* kn, acc_t* r)
{
    if constexpr (FULL)
    {
        constexpr int64_t NV = TW / lanes<acc_t>;
        // two chains of FMAs for o (and r) unless NV gives four: a row's update FMAs then already separate two FMAs
        // of one chain by more than an FMA's latency (a second chain only costs registers: measured 4-8% slower)
        vec<acc_t> wv[NV], o0[NV], o1[NV], r0[NV], r1[NV];
        for (int64_t v = 0; v < NV; ++v)
        {
            wv[v] = at(w + v * lanes<acc_t>);
            o0[v] = o1[v] = r0[v] = r1[v] = vec<acc_t>{};
        }
        int64_t i = 0;
        for (; NV < 4 && i + 1 < dk; i += 2)
        {
            acc_t* row = S + i * ld;
            const acc_t* row_in = FROM ? Sin + i * ld_in : row;
            const int64_t ld_row = FROM ? ld_in : ld;
            const acc_t k0 = k[i], q0 = q[i], k1 = k[i + 1], q1 = q[i + 1];
            const acc_t f0 = SCALE ? f[i] : acc_t(1), f1 = SCALE ? f[i + 1] : acc_t(1);
            for (int64_t v = 0; v < NV; ++v)
            {
                vec<acc_t> s0 = at(row_in + v * lanes<acc_t>), s1 = at(row_in + ld_row + v * lanes<acc_t>);
                if constexpr (SCALE)
                {
                    s0 = f0 * s0;
                    s1 = f1 * s1;
                }
                s0 += k0 * wv[v];
                s1 += k1 * wv[v];
                at(row + v * lanes<acc_t>) = s0;
                at(row + ld + v * lanes<acc_t>) = s1;
                o0[v] += q0 * s0;
                o1[v] += q1 * s1;
                if constexpr (NEXT)
                {
                    r0[v] += kn[i] * s0;
                    r1[v] += kn[i + 1] * s1;
                }
            }
        }
        for (; i < dk; ++i)
        {
            acc_t* row = S + i * ld;
            const acc_t* row_in = FROM ? Sin + i * ld_in : row;
            const acc_t ki = k[i], qi = q[i], fi = SCALE ? f[i] : acc_t(1);
            for (int64_t v = 0; v < NV; ++v)
            {
                vec<acc_t> s0 = at(row_in + v * lanes<acc_t>);
                if constexpr (SCALE)
                    s0 = fi * s0;
                s0 += ki * wv[v];
                at(row + v * lanes<acc_t>) = s0;
                o0[v] += qi * s0;
                if constexpr (NEXT)
                    r0[v] += kn[i] * s0;
            }
        }
        for (int64_t v = 0; v < NV; ++v)
        {
            at(o + v * lanes<acc_t>) = o0[v] + o1[v];
            if constexpr (NEXT)
                at(r + v * lanes<acc_t>) = r0[v] + r1[v];
        }
    }
    else
    {
        for (int64_t j = 0; j < n; ++j)
            o[j] = r[j] = acc_t(0);
        for (int64_t i = 0; i < dk; ++i)
        {
            acc_t* row = S + i * ld;
            const acc_t* row_in = FROM ? Sin + i * ld_in : row;
            const acc_t ki = k[i], qi = q[i], ri = NEXT ? kn[i] : acc_t(0), fi = SCALE ? f[i] : acc_t(1);
            for (int64_t j = 0; j < n; ++j)
            {
                const acc_t s = (SCALE ? fi * row_in[j] : row_in[j]) + ki * w[j];
                row[j] = s;
                o[j] += qi * s;
                if constexpr (NEXT)
                    r[j] += ri * s;
            }
        }
    }
}

// S[i, j] *= f[i].
// 1 / sqrt(sum_i x[i]^2 + kQK_L2_NORM_EPS) of dk values, in acc_t: qk_l2_norm's factor of one head.
template <typename acc_t, typename scalar_t> acc_t inverse_l2_norm(const scalar_t* x, int64_t dk)
{
    acc_t sum = acc_t(0);
    for (int64_t i = 0; i < dk; ++i)
    {
        const acc_t xi = static_cast<acc_t>(x[i]);
        sum += xi * xi;
    }
    return acc_t(1) / std::sqrt(sum + static_cast<acc_t>(kQK_L2_NORM_EPS));
}

template <typename acc_t> void scale_rows(acc_t* S, int64_t ld, int64_t dk, int64_t n, const acc_t* f)
{
    for (int64_t i = 0; i < dk; ++i)
    {
        acc_t* row = S + i * ld;
        const acc_t fi = f[i];
        for (int64_t j = 0; j < n; ++j)
            row[j] *= fi;
    }
}

//! The range of the gated rules' row factors c outside which they are folded into the block.
template <typename acc_t> constexpr acc_t factor_min = acc_t(8.673617379884035e-19); // 2^-60
template <typename acc_t> constexpr acc_t factor_max = acc_t(1.152921504606847e18);  // 2^60

//! Whether a delta rule's sweep also accumulates the next step's retrieval: when the accumulators fit the registers
//! (four vectors per row: the AVX-512 build; with eight AVX2 registers per row the extra ones would spill).
template <typename acc_t, int64_t TW> constexpr bool fuse_retrieval = TW / lanes<acc_t> <= 4;

// One task over the T steps, on a block of FULL ? TW : width columns (width <= TW). GATED, DELTA: the rule.
//
// The gated rules keep S = diag(c) S' with S' the block in present_state and c the product of the decays since the
// last fold: a step's decay multiplies c (dk values) instead of the block, its write k w^T adds (k / c) w^T to S',
// a read of S is one of S' with c q (output) or c k (retrieval). A step folds instead (its sweep multiplies the rows
// by c a, and c is 1 again) when a factor leaves [factor_min, factor_max] or is not a number, and when c is 1 (the
// first step of a call: a decode step is one sweep); after the last step c is folded into the block.
// With fuse_retrieval, the delta rules' retrieval S^T (a k) of a step is accumulated by the previous step's sweep when
// that step was not a pad (a fold leaves diag(c) S', so the retrieval, unchanged): each step is one sweep of the
// block; else it is a read sweep and then the update sweep.
template <int64_t TW, bool FULL, bool GATED, bool DELTA, typename scalar_t, typename acc_t>
void run_tile(const Problem& p, const Task<scalar_t, acc_t>& x, int64_t width, acc_t* scratch)
{
    const int64_t n = FULL ? TW : width;
    const int64_t dk = p.dk, G = p.group(), T = p.T;
    const acc_t scale = static_cast<acc_t>(p.scale);
    const bool normalise = !GATED && !DELTA && p.normalise; // the normaliser of the linear rule
    const acc_t eps = static_cast<acc_t>(p.eps);
    // factor times a query / key head in acc_t: phi(src) with feature_map, then divided by its L2 norm with qk_l2_norm
    auto load_head = [&](const scalar_t* src, acc_t* dst, acc_t factor)
    {
        const bool last = !p.qk_l2_norm; // the factor goes in with the first pass unless the norm needs one more
        const acc_t f0 = last ? factor : acc_t(1);
        if (p.feature_map)
            for (int64_t i = 0; i < dk; ++i)
                dst[i] = f0 * vmath::elu_plus_one(static_cast<acc_t>(src[i]));
        else
            for (int64_t i = 0; i < dk; ++i)
                dst[i] = f0 * static_cast<acc_t>(src[i]);
        if (!last)
        {
            const acc_t f = factor * inverse_l2_norm<acc_t>(dst, dk);
            for (int64_t i = 0; i < dk; ++i)
                dst[i] *= f;
        }
    };
    acc_t* c = scratch;   // dk: GATED: the row factors (S = diag(c) S')
    acc_t* prod = c + dk; // dk: GATED: c times the step's decay, before a fold
    acc_t* prod_next = prod + dk;
    acc_t* kr = prod_next + dk; // dk: decay per key: the retrieval coefficients (c a) k of the step (else k itself)
    acc_t* kr_next = kr + dk;
    acc_t* kv = kr_next + dk; // dk: the step's key head (load_head)
    acc_t* kv_next = kv + dk;
    acc_t* kw = kv_next + dk; // dk: decay per key: the write coefficients k / c (else k itself)
    acc_t* z = kw + dk;       // dk: the normaliser's z
    acc_t* qs = z + dk;       // G * dk: scale * c * q for the G query heads
    acc_t w[TW];              // the column write: v, or beta (v - (a S)^T k)
    acc_t o[TW];
    acc_t r[TW]; // DELTA: the step's retrieval, when the previous sweep accumulated it
    acc_t* S = x.S;
    const int64_t ld = x.ld;
    // where the block's current values are: past_state's tile until the first update sweep writes S (read once)
    const acc_t* src = x.S_in != nullptr ? x.S_in : S;
    int64_t ld_src = x.S_in != nullptr ? x.ld_in : ld;
    if (x.S_in == nullptr)
        for (int64_t i = 0; i < dk; ++i)
            std::fill(S + i * ld, S + i * ld + n, acc_t(0));
    auto keeps = [&](int64_t t) { return x.pad == nullptr || x.pad[t * x.pad_step] == 0; };
    // One decay per head (GATED): every row has the same factor, so c[0] and pr[0] hold c and c a (the other rows are
    // filled where a sweep scales rows), and the scalars go into the step's column vectors instead of the key: the
    // write k / c w^T is k (w / c)^T, the retrieval S'^T ((c a) k) is (c a) S'^T k.
    const bool scalar_decay = GATED && !p.decay_per_key;
    // the step's key head (into kvv), c a (into pr) and, with a decay per key, (c a) k (into krv) from the current c;
    // true when c a must be folded
    auto prepare = [&](int64_t t, acc_t* pr, acc_t* krv, acc_t* kvv) -> bool
    {
        load_head(x.k + t * x.k_step, kvv, acc_t(1));
        if constexpr (!GATED)
            return false;
        const scalar_t* dt = x.decay + t * x.decay_step;
        if (scalar_decay)
        {
            const acc_t a = c[0] * std::exp(static_cast<acc_t>(dt[0]));
            pr[0] = a;
            return !(a >= factor_min<acc_t> && a <= factor_max<acc_t>); // NaN folds too
        }
        for (int64_t i = 0; i < dk; ++i)
            pr[i] = c[i] * vmath::vexp(static_cast<acc_t>(dt[i]));
        int64_t outside = 0; // factors out of range, NaN included
        for (int64_t i = 0; i < dk; ++i)
        {
            outside += (pr[i] >= factor_min<acc_t>)&(pr[i] <= factor_max<acc_t>) ? 0 : 1;
            krv[i] = kvv[i] * pr[i];
        }
        return outside != 0;
    };
    for (int64_t i = 0; i < dk; ++i)
    {
        c[i] = acc_t(1);
        z[i] = x.z_in != nullptr ? x.z_in[i] : acc_t(0);
    }
    bool prepared = false, fold_next = false, have_r = false, unit = true, direct = false;
    for (int64_t t = 0; t < T; ++t)
    {
        const bool keep = keeps(t);
        bool next = false; // DELTA: this step's sweep accumulates the next step's retrieval
        if (keep)
        {
            bool fold = fold_next;
            if (prepared)
            {
                acc_t* swap = prod; // the next step's prepared values become this step's
                prod = prod_next;
                prod_next = swap;
                swap = kr;
                kr = kr_next;
                kr_next = swap;
                swap = kv;
                kv = kv_next;
                kv_next = swap;
            }
            else
            {
                fold = prepare(t, prod, kr, kv);
            }
            // fold: this step multiplies the block by c a in its sweep and c is 1 again; the last step of a call
            // folds too, so that no pass over the block is left after it (a decode step is one sweep)
            direct = GATED && (fold || t + 1 == T);
            if constexpr (GATED)
            {
                if (p.decay_per_key)
                    for (int64_t i = 0; i < dk; ++i)
                        c[i] = direct ? acc_t(1) : prod[i];
                else
                {
                    c[0] = direct ? acc_t(1) : prod[0];
                    if (direct) // the sweep multiplies every row by the factor
                        std::fill(prod + 1, prod + dk, prod[0]);
                }
                unit = direct;
            }
            if (GATED && !scalar_decay)
                for (int64_t i = 0; i < dk; ++i)
                    kw[i] = kv[i] / c[i];
            if (normalise)
                for (int64_t i = 0; i < dk; ++i)
                    z[i] += kv[i];
            next = fuse_retrieval<acc_t, TW> && DELTA && t + 1 < T && keeps(t + 1);
            prepared = next;
            if (next)
                fold_next = prepare(t + 1, prod_next, kr_next, kv_next);
        }
        const scalar_t* qt = x.q + t * x.q_step;
        for (int64_t g = 0; g < G; ++g)
        {
            acc_t* qg = qs + g * dk;
            load_head(qt + g * dk, qg, scalar_decay ? scale * c[0] : scale);
            if (GATED && !scalar_decay)
                for (int64_t i = 0; i < dk; ++i)
                    qg[i] *= c[i];
        }
        // the normaliser's 1 / (scale z^T q + eps) of query head g (1 without it)
        auto inverse_denominator = [&](int64_t g)
        {
            if (!normalise)
                return acc_t(1);
            const acc_t* qg = qs + g * dk;
            acc_t den = eps;
            for (int64_t i = 0; i < dk; ++i)
                den += qg[i] * z[i];
            return acc_t(1) / den;
        };
        if (keep)
        {
            const scalar_t* vt = x.v + t * x.v_step;
            // the write and retrieval coefficients: k / c and (c a) k with a decay per key, else k itself (and the
            // scalars c a of the retrieval and 1 / c of the write on the column vectors)
            const bool row_factors = GATED && !scalar_decay;
            const acc_t* kwp = row_factors ? kw : kv;
            const acc_t* krp_next = row_factors ? kr_next : kv_next;
            const acc_t r_factor = scalar_decay ? prod[0] : acc_t(1),
                        w_factor = scalar_decay ? acc_t(1) / c[0] : acc_t(1);
            if constexpr (DELTA)
            {
                if (!have_r)
                    read<TW, FULL>(src, ld_src, dk, n, row_factors ? kr : kv, r);
                const acc_t beta = static_cast<acc_t>(x.beta[t * x.beta_step]);
                for (int64_t j = 0; j < n; ++j)
                    w[j] = w_factor * beta * (static_cast<acc_t>(vt[j]) - r_factor * r[j]);
            }
            else
            {
                for (int64_t j = 0; j < n; ++j)
                    w[j] = w_factor * static_cast<acc_t>(vt[j]);
            }
            // the first sweep reads the block from past_state (FROM), every later one from the block itself
            auto sweep = [&](auto from)
            {
                constexpr bool FROM = decltype(from)::value;
                if (direct && next)
                    update<TW, FULL, GATED, true, FROM>(S, ld, src, ld_src, dk, n, prod, kwp, w, qs, o, krp_next, r);
                else if (direct)
                    update<TW, FULL, GATED, false, FROM>(S, ld, src, ld_src, dk, n, prod, kwp, w, qs, o, krp_next, r);
                else if (next)
                    update<TW, FULL, false, true, FROM>(S, ld, src, ld_src, dk, n, prod, kwp, w, qs, o, krp_next, r);
                else
                    update<TW, FULL, false, false, FROM>(S, ld, src, ld_src, dk, n, prod, kwp, w, qs, o, krp_next, r);
            };
            if (src != S)
                sweep(std::true_type{});
            else
                sweep(std::false_type{});
            src = S;
            ld_src = ld;
            have_r = next;
        }
        else
        {
            read<TW, FULL>(src, ld_src, dk, n, qs, o);
        }
        scalar_t* ot = x.out + t * x.out_step;
        const acc_t inv0 = inverse_denominator(0);
        for (int64_t j = 0; j < n; ++j)
            ot[j] = static_cast<scalar_t>(o[j] * inv0);
        // the other query heads of the group read the (updated) block
        for (int64_t g = 1; g < G; ++g)
        {
            read<TW, FULL>(src, ld_src, dk, n, qs + g * dk, o);
            scalar_t* og = ot + g * p.dv;
            const acc_t inv = inverse_denominator(g);
            for (int64_t j = 0; j < n; ++j)
                og[j] = static_cast<scalar_t>(o[j] * inv);
        }
    }
    if (src != S) // no step wrote the block (no steps, or only pads): it is past_state's tile
        for (int64_t i = 0; i < dk; ++i)
            std::copy(src + i * ld_src, src + i * ld_src + n, S + i * ld);
    if (GATED && !unit)
    {
        if (!p.decay_per_key)
            std::fill(c + 1, c + dk, c[0]);
        scale_rows(S, ld, dk, n, c);
    }
    if (normalise && x.z_out != nullptr)
        for (int64_t i = 0; i < dk; ++i)
            x.z_out[i] = z[i];
}

template <int64_t TW, bool GATED, bool DELTA, typename scalar_t, typename acc_t>
void run_task(const Problem& p, const Task<scalar_t, acc_t>& x, int64_t width, acc_t* scratch)
{
    if (width == TW)
        run_tile<TW, true, GATED, DELTA>(p, x, width, scratch);
    else
        run_tile<TW, false, GATED, DELTA>(p, x, width, scratch);
}

} // namespace detail

// The forward pass: out (B, T, Ho*dv) and present_state (B, Hkv, dk, dv) from the inputs (layouts above); with
// p.normalise also z_out (B, Hkv, dk) from z_in (null: zeros).
template <typename scalar_t, typename acc_t, typename ParallelFor>
void forward_impl(const ParallelFor& parallel_for, const Problem& p, const scalar_t* query, const scalar_t* key,
    const scalar_t* value, const acc_t* past_state, const scalar_t* decay, const scalar_t* beta, const uint8_t* pad,
    scalar_t* out, acc_t* present_state, const acc_t* z_in = nullptr, acc_t* z_out = nullptr)
{
    constexpr int64_t TW = tile_width<acc_t>;
    const int64_t dk = p.dk, dv = p.dv, Hq = p.Hq, Hkv = p.Hkv, G = p.group(), R = p.repeat(), T = p.T;
    const int64_t Hk = std::min(Hq, Hkv), Ho = std::max(Hq, Hkv); // key heads, output heads
    const int64_t tiles = (dv + TW - 1) / TW, tasks = p.B * Hkv * tiles;
    const int64_t work = std::max<int64_t>(T * dk * std::min(TW, dv) * G, 1);
    const int64_t grain = std::max<int64_t>(min_parallel_work / work, 1);
    const int64_t decay_width = p.decay_per_key ? dk : 1, beta_width = p.beta_per_head ? Hkv : 1;
    const bool gated = is_gated(p.rule), delta = is_delta(p.rule);
    const bool normalise = p.normalise && p.rule == Rule::linear;
    // token (b, t) is row b * T + t of the (B * T) rows, or row t * B + b of the (T * B) rows with time_major
    const int64_t row_step = p.time_major ? p.B : 1;
    auto first_row = [&](int64_t b) { return p.time_major ? b : b * T; };
    parallel_for(0, tasks, grain,
        [&](int64_t begin, int64_t end)
        {
            std::vector<acc_t> scratch(static_cast<size_t>((G + 9) * dk)), block(tiles > 1 ? size_t(dk * TW) : 0);
            for (int64_t task = begin; task < end; ++task)
            {
                const int64_t tile = task % tiles, bh = task / tiles, b = bh / Hkv, h = bh % Hkv;
                const int64_t j0 = tile * TW, width = std::min(TW, dv - j0);
                // the task's block of S: present_state itself when the tile is whole rows, else a contiguous copy
                // (rows of TW: no cache set conflicts between rows)
                const bool whole = tiles == 1;
                acc_t* S = whole ? present_state + bh * dk * dv : block.data();
                const int64_t ld = whole ? dv : TW;
                // state h: key head h / R, query heads (h / R) * G .. + G - 1, output heads h * G .. + G - 1
                const int64_t r0 = first_row(b), rs = row_step;
                const detail::Task<scalar_t, acc_t> x{query + r0 * Hq * dk + h / R * G * dk,
                    key + r0 * Hk * dk + h / R * dk, value + r0 * Hkv * dv + h * dv + j0,
                    gated ? decay + r0 * Hkv * decay_width + h * decay_width : nullptr,
                    delta ? beta + r0 * beta_width + (p.beta_per_head ? h : 0) : nullptr,
                    pad != nullptr ? pad + r0 : nullptr, out + r0 * Ho * dv + h * G * dv + j0, S, ld,
                    past_state != nullptr ? past_state + bh * dk * dv + j0 : nullptr, dv, rs * Hq * dk, rs * Hk * dk,
                    rs * Hkv * dv, rs * Ho * dv, rs * Hkv * decay_width, rs * beta_width, rs,
                    normalise && z_in != nullptr ? z_in + bh * dk : nullptr,
                    normalise && tile == 0 ? z_out + bh * dk : nullptr};
                switch (p.rule)
                {
                case Rule::linear: detail::run_task<TW, false, false>(p, x, width, scratch.data()); break;
                case Rule::gated: detail::run_task<TW, true, false>(p, x, width, scratch.data()); break;
                case Rule::delta: detail::run_task<TW, false, true>(p, x, width, scratch.data()); break;
                case Rule::gated_delta: detail::run_task<TW, true, true>(p, x, width, scratch.data()); break;
                }
                for (int64_t i = 0; !whole && i < dk; ++i)
                    for (int64_t j = 0; j < width; ++j)
                        present_state[bh * dk * dv + i * dv + j0 + j] = S[i * TW + j];
            }
        });
}

} // namespace rnnx::linear_recurrence_cpu
