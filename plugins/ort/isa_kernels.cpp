// One instruction-set build of the library's CPU kernels (see isa_kernels.h): rnnx's torch CPU kernel of the
// SRU scan (plugins/sru_scan/cpu/sru_scan_kernel.h) and the kernels of the causal linear attention, the linear
// recurrence and the causal convolution with state (plugins/<op>/cpu/<op>_kernel.h), on the host's parallel-for.
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
#include "causal_conv_with_state_kernel.h"
#include "causal_linear_attention_kernel.h"
#include "linear_recurrence_kernel.h"
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

template <typename acc_t>
void linear_recurrence_forward_impl(const ParallelFor& parallel_for, const LinearRecurrenceArgs<acc_t>& a)
{
    namespace lr = rnnx::linear_recurrence_cpu;
    const lr::Problem p{
        a.B, a.T, a.Hq, a.Hkv, a.dk, a.dv, static_cast<lr::Rule>(a.rule), a.decay_per_key, a.beta_per_head, a.scale};
    lr::forward_impl<acc_t, acc_t>(HostParallelFor{&parallel_for}, p, a.query, a.key, a.value, a.past_state, a.decay,
        a.beta, a.pad, a.out, a.present_state);
}

template <typename acc_t> void causal_conv_forward_impl(const ParallelFor& parallel_for, const CausalConvArgs<acc_t>& a)
{
    const rnnx::causal_conv_cpu::Problem p{a.B, a.C, a.T, a.K, a.silu};
    rnnx::causal_conv_cpu::forward_impl<acc_t, acc_t>(
        HostParallelFor{&parallel_for}, p, a.input, a.weight, a.bias, a.past_state, a.pad, a.out, a.present_state);
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

void RNNX_CONCAT(linear_recurrence_forward, RNNX_ISA)(
    const ParallelFor& parallel_for, const LinearRecurrenceArgs<float>& a)
{
    linear_recurrence_forward_impl(parallel_for, a);
}

void RNNX_CONCAT(linear_recurrence_forward, RNNX_ISA)(
    const ParallelFor& parallel_for, const LinearRecurrenceArgs<double>& a)
{
    linear_recurrence_forward_impl(parallel_for, a);
}

void RNNX_CONCAT(causal_conv_forward, RNNX_ISA)(const ParallelFor& parallel_for, const CausalConvArgs<float>& a)
{
    causal_conv_forward_impl(parallel_for, a);
}

void RNNX_CONCAT(causal_conv_forward, RNNX_ISA)(const ParallelFor& parallel_for, const CausalConvArgs<double>& a)
{
    causal_conv_forward_impl(parallel_for, a);
}
} // namespace rnnx_ort
