// One instruction-set build (RNNX_ISA) of LinearRecurrence's entry points (linear_recurrence_isa.h): the
// host-independent kernel on the host's parallel-for.
#include "linear_recurrence_isa.h"
#include "isa_build.h"

// The kernel header and this build's implementation inside an anonymous namespace (isa_build.h says why).
namespace
{
#include "../cpu/linear_recurrence_kernel.h"

template <typename acc_t>
void linear_recurrence_forward_impl(
    const rnnx_ort::ParallelFor& parallel_for, const rnnx_ort::LinearRecurrenceArgs<acc_t>& a)
{
    namespace lr = rnnx::linear_recurrence_cpu;
    const lr::Problem p{a.B, a.T, a.Hq, a.Hkv, a.dk, a.dv, static_cast<lr::Rule>(a.rule), a.decay_per_key,
        a.beta_per_head, a.scale, a.qk_l2_norm, a.time_major, a.feature_map, a.normalise, a.eps};
    lr::forward_impl<acc_t, acc_t>(HostParallelFor{&parallel_for}, p, a.query, a.key, a.value, a.past_state, a.decay,
        a.beta, a.pad, a.out, a.present_state, a.z_in, a.z_out);
}
} // namespace

namespace rnnx_ort
{
RNNX_ISA_DEFINE(linear_recurrence_forward, LinearRecurrenceArgs, linear_recurrence_forward_impl)
} // namespace rnnx_ort
