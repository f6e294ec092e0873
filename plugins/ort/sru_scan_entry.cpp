// One instruction-set build of the SRU scan forward for the ONNX Runtime custom-op library.
//
// Compiled twice by rnnx.runtime.ortops: with -DRNNX_ISA=avx2 -mavx2 -mfma and with -DRNNX_ISA=base (no
// flags); rnnx_ort_ops.cc picks one at run time by the CPU's features, so the library never executes an
// instruction the CPU lacks. The kernel is rnnx's torch CPU kernel (models/ops/sru/csrc/sru_scan_kernel.h).
#include "sru_scan_kernel.h"
#include "sru_scan_entry.h"

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
void RNNX_CONCAT(sru_forward, RNNX_ISA)(const ParallelFor& parallel_for, const SruArgs& a)
{
    using rnnx::sru_cpu::Problem;
    const Problem p{a.L, a.B, a.D, a.d, a.scale_x};
    rnnx::sru_cpu::dispatch_variant(a.k, a.has_skip, a.use_tanh,
        [&](auto K, auto SKIP, auto TANH)
        {
            rnnx::sru_cpu::forward_impl<float, float, decltype(K)::value, decltype(SKIP)::value, decltype(TANH)::value>(
                HostParallelFor{&parallel_for}, p, a.U, a.x, a.weight_c, a.bias, a.c0, a.mask, a.h, a.c_last);
        });
}
} // namespace rnnx_ort
