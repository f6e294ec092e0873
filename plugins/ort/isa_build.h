// What an op's instruction-set build (plugins/<op>/ort/<op>_isa.cpp, compiled once per RNNX_ISA by
// rnnx.runtime.ortops) shares: the host's parallel-for in the form the kernel headers call, and RNNX_ISA_DEFINE,
// which defines the build's fp32 and fp64 entry points (RNNX_ISA_ENTRY, isa_kernels.h). Include it in those files
// only, before the op's kernel header.
//
// The ISA file includes its kernel header inside an anonymous namespace: its inline functions and template
// instances get internal linkage, so the avx512, avx2 and base builds of the file never share (and the linker never
// merges) a definition; a CPU without AVX2 runs only base code. HostParallelFor is in an anonymous namespace for the
// same reason. A standard header must not open inside that namespace, so this file includes, once for every op,
// each standard header the kernel headers (plugins/<op>/cpu/<op>_kernel.h, plugins/cpu/vector_math.h) include:
// a kernel header that takes another adds it here.
#pragma once

#include "isa_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#ifndef RNNX_ISA
#error "compile an op's _isa.cpp with -DRNNX_ISA=avx512, avx2 or base (rnnx.runtime.ortops does)"
#endif

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

#define RNNX_ISA_CONCAT_(a, b) a##_##b
#define RNNX_ISA_CONCAT(a, b) RNNX_ISA_CONCAT_(a, b)

// Defines this build's entry points name_<RNNX_ISA> for Args<float> and Args<double>, each calling
// impl(parallel_for, args) (a function template of the ISA file, in an anonymous namespace). Use inside namespace
// rnnx_ort.
#define RNNX_ISA_DEFINE(name, Args, impl)                                                                              \
    void RNNX_ISA_CONCAT(name, RNNX_ISA)(const ParallelFor& parallel_for, const Args<float>& args)                     \
    {                                                                                                                  \
        impl(parallel_for, args);                                                                                      \
    }                                                                                                                  \
    void RNNX_ISA_CONCAT(name, RNNX_ISA)(const ParallelFor& parallel_for, const Args<double>& args)                    \
    {                                                                                                                  \
        impl(parallel_for, args);                                                                                      \
    }
