// One instruction-set build of the library's CPU kernels (see isa_kernels.h): rnnx's torch CPU kernel of the
// SRU scan (plugins/sru_scan/cpu/sru_scan_kernel.h) and the causal linear attention kernel
// (plugins/causal_linear_attention/cpu/causal_linear_attention_kernel.h), on the host's parallel-for.
#include "isa_kernels.h"

// The kernel headers' own includes first, then the headers inside an anonymous namespace: their inline
// functions and template instances get internal linkage, so the avx2 and the base build of this file never
// share (and the linker never merges) a definition; a CPU without AVX2 runs only base code.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>
namespace
{
#include "causal_linear_attention_kernel.h"
#include "sru_scan_kernel.h"
} // namespace

#define RNNX_CONCAT_(a, b) a##_##b
#define RNNX_CONCAT(a, b) RNNX_CONCAT_(a, b)

namespace
{
struct HostParallelFor
{
    const rnnx_ort::ParallelFor* host;
    template <typename Fn> void operator()(int64_t begin, int64_t end, int64_t grain, Fn&& fn) const
    {
        rnnx_ort::RangeFn range = [&fn](int64_t b, int64_t e) { fn(b, e); };
        (*host)(begin, end, grain, range);
    }
};
} // namespace

namespace rnnx_ort
{
namespace
{
template <typename acc_t> void sru_forward_impl(const ParallelFor& parallel_for, const SruArgs<acc_t>& a)
{
    const rnnx::sru_cpu::Problem p{a.L, a.B, a.D, a.d, a.scale_x};
    rnnx::sru_cpu::dispatch_variant(a.k, a.has_skip, a.use_tanh,
        [&](auto K, auto SKIP, auto TANH)
        {
            rnnx::sru_cpu::forward_impl<acc_t, acc_t, decltype(K)::value, decltype(SKIP)::value, decltype(TANH)::value>(
                HostParallelFor{&parallel_for}, p, a.U, a.x, a.weight_c, a.bias, a.c0, a.mask, a.h, a.c_last);
        });
}

template <typename acc_t> void attention_forward_impl(const ParallelFor& parallel_for, const AttentionArgs<acc_t>& a)
{
    const rnnx::linear_attention_cpu::Problem p{a.B, a.H, a.L, a.E, a.M, a.eps, a.time_major};
    rnnx::linear_attention_cpu::forward_impl<acc_t, acc_t>(
        HostParallelFor{&parallel_for}, p, a.q, a.k, a.v, a.S0, a.z0, a.pad, a.out, a.S_last, a.z_last);
}
} // namespace

void RNNX_CONCAT(sru_forward, RNNX_ISA)(const ParallelFor& parallel_for, const SruArgs<float>& a)
{
    sru_forward_impl(parallel_for, a);
}

void RNNX_CONCAT(sru_forward, RNNX_ISA)(const ParallelFor& parallel_for, const SruArgs<double>& a)
{
    sru_forward_impl(parallel_for, a);
}

void RNNX_CONCAT(attention_forward, RNNX_ISA)(const ParallelFor& parallel_for, const AttentionArgs<float>& a)
{
    attention_forward_impl(parallel_for, a);
}

void RNNX_CONCAT(attention_forward, RNNX_ISA)(const ParallelFor& parallel_for, const AttentionArgs<double>& a)
{
    attention_forward_impl(parallel_for, a);
}
} // namespace rnnx_ort
