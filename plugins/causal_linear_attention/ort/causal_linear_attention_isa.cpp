// One instruction-set build (RNNX_ISA) of CausalLinearAttention's entry points (causal_linear_attention_isa.h): the
// host-independent kernel on the host's parallel-for.
#include "causal_linear_attention_isa.h"
#include "isa_build.h"

// The kernel header's own includes first, then the header inside an anonymous namespace (isa_build.h says why).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>
namespace
{
#include "../cpu/causal_linear_attention_kernel.h"
} // namespace

namespace rnnx_ort
{
namespace
{
template <typename acc_t> void attention_forward_impl(const ParallelFor& parallel_for, const AttentionArgs<acc_t>& a)
{
    const rnnx::linear_attention_cpu::Problem p{a.B, a.H, a.L, a.E, a.M, a.eps, a.time_major};
    rnnx::linear_attention_cpu::forward_impl<acc_t, acc_t>(
        HostParallelFor{&parallel_for}, p, a.q, a.k, a.v, a.S0, a.z0, a.pad, a.out, a.S_last, a.z_last);
}
} // namespace

RNNX_ISA_DEFINE(attention_forward, AttentionArgs, attention_forward_impl)
} // namespace rnnx_ort
