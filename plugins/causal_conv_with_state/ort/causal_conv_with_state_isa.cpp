// One instruction-set build (RNNX_ISA) of CausalConvWithState's entry points (causal_conv_with_state_isa.h): the
// host-independent kernel on the host's parallel-for.
#include "causal_conv_with_state_isa.h"
#include "isa_build.h"

// The kernel header and this build's implementation inside an anonymous namespace (isa_build.h says why).
namespace
{
#include "../cpu/causal_conv_with_state_kernel.h"

template <typename acc_t>
void causal_conv_forward_impl(const rnnx_ort::ParallelFor& parallel_for, const rnnx_ort::CausalConvArgs<acc_t>& a)
{
    const rnnx::causal_conv_cpu::Problem p{a.B, a.C, a.T, a.K, a.silu};
    rnnx::causal_conv_cpu::forward_impl<acc_t, acc_t>(
        HostParallelFor{&parallel_for}, p, a.input, a.weight, a.bias, a.past_state, a.pad, a.out, a.present_state);
}
} // namespace

namespace rnnx_ort
{
RNNX_ISA_DEFINE(causal_conv_forward, CausalConvArgs, causal_conv_forward_impl)
} // namespace rnnx_ort
