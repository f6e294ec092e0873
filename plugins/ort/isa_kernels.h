// The CPU kernels of the ONNX Runtime custom-op library, built per instruction set; names no op.
//
// Each op declares its entry points in its own folder (plugins/<op>/ort/<op>_isa.h: its Args struct, then
// RNNX_ISA_ENTRY(<op>_forward, <Op>Args)) and defines them in plugins/<op>/ort/<op>_isa.cpp, which
// rnnx.runtime.ortops compiles three times (-DRNNX_ISA=avx512 -mavx512f -mavx2 -mfma, -DRNNX_ISA=avx2 -mavx2 -mfma,
// and -DRNNX_ISA=base with no flags; isa_build.h says how). The op picks a build at run time by the CPU's features
// (isa_avx512(), isa_avx2_fma()), so the library never executes an instruction the CPU lacks. fp32 tensors (fp64 for
// fp64 activations, whose state is fp64 too); the ops stage fp16 / bf16 I/O to fp32 around these calls.
#pragma once

#include <cstdint>
#include <functional>

namespace rnnx_ort
{
using RangeFn = std::function<void(int64_t, int64_t)>;
// Runs fn over disjoint ranges covering [begin, end), each at least `grain` long where possible.
using ParallelFor = std::function<void(int64_t, int64_t, int64_t, const RangeFn&)>;

// Whether this CPU runs the avx2 build (AVX2 and FMA).
inline bool isa_avx2_fma()
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

// Whether this CPU runs the avx512 build (AVX-512F, AVX2 and FMA).
inline bool isa_avx512()
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx512f") && isa_avx2_fma();
#else
    return false;
#endif
}
} // namespace rnnx_ort

// The fp32 and fp64 entry point `name_<isa>` of each build, for an op's Args template (inside namespace rnnx_ort).
#define RNNX_ISA_DECLARE_(name, Args, isa)                                                                             \
    void name##_##isa(const ParallelFor& parallel_for, const Args<float>& args);                                       \
    void name##_##isa(const ParallelFor& parallel_for, const Args<double>& args);

// The dispatcher of RNNX_ISA_ENTRY / RNNX_ISA_ENTRY_AVX2: the three builds' declarations and
// `template <typename acc_t> void name(const ParallelFor&, const Args<acc_t>&)`, which runs avx512 when
// `use_avx512` (a constant) and the CPU has it, else avx2 when the CPU has it, else base.
#define RNNX_ISA_DISPATCH_(name, Args, use_avx512)                                                                     \
    RNNX_ISA_DECLARE_(name, Args, avx512)                                                                              \
    RNNX_ISA_DECLARE_(name, Args, avx2)                                                                                \
    RNNX_ISA_DECLARE_(name, Args, base)                                                                                \
    template <typename acc_t> void name(const ParallelFor& parallel_for, const Args<acc_t>& args)                      \
    {                                                                                                                  \
        if (use_avx512 && isa_avx512())                                                                                \
            name##_avx512(parallel_for, args);                                                                         \
        else if (isa_avx2_fma())                                                                                       \
            name##_avx2(parallel_for, args);                                                                           \
        else                                                                                                           \
            name##_base(parallel_for, args);                                                                           \
    }

// Declares an op's entry points name_avx512, name_avx2 and name_base (fp32 and fp64) and defines
// `template <typename acc_t> void name(const ParallelFor&, const Args<acc_t>&)`, which runs the build this CPU can
// run: avx512, else avx2, else base. Use inside namespace rnnx_ort.
#define RNNX_ISA_ENTRY(name, Args) RNNX_ISA_DISPATCH_(name, Args, true)

// RNNX_ISA_ENTRY for an op that stops at AVX2: its dispatcher runs avx2, else base (the avx512 build is compiled
// like every op's, and never runs).
#define RNNX_ISA_ENTRY_AVX2(name, Args) RNNX_ISA_DISPATCH_(name, Args, false)
