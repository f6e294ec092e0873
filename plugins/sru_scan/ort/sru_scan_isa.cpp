// One instruction-set build (RNNX_ISA) of SRUScan's entry points (sru_scan_isa.h): rnnx's torch CPU kernel of the
// scan on the host's parallel-for.
#include "sru_scan_isa.h"
#include "isa_build.h"

// The kernel header and this build's implementation inside an anonymous namespace (isa_build.h says why).
namespace
{
#include "../cpu/sru_scan_kernel.h"

template <typename acc_t>
void sru_forward_impl(const rnnx_ort::ParallelFor& parallel_for, const rnnx_ort::SruArgs<acc_t>& a)
{
    const rnnx::sru_cpu::Problem p{a.L, a.B, a.D, a.d, a.scale_x};
    rnnx::sru_cpu::dispatch_variant(a.k, a.has_skip, a.use_tanh,
        [&](auto K, auto SKIP, auto TANH)
        {
            rnnx::sru_cpu::forward_impl<acc_t, acc_t, decltype(K)::value, decltype(SKIP)::value, decltype(TANH)::value>(
                HostParallelFor{&parallel_for}, p, a.U, a.x, a.weight_c, a.bias, a.c0, a.mask, a.h, a.c_last);
        });
}
} // namespace

namespace rnnx_ort
{
RNNX_ISA_DEFINE(sru_forward, SruArgs, sru_forward_impl)
} // namespace rnnx_ort
