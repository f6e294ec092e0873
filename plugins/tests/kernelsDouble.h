/*
 * Test double of the CUDA kernels' launch API for rnnx_plugin_tests, op-agnostic part: the status every launcher
 * double returns, the workspace size the doubles report, and recordedCall<Call>(), the arguments of the last call
 * of one launcher. Each op's launcher double sits in its folder (plugins/<op>/tests/<opCamel>KernelDouble.cpp,
 * defining the launcher of plugins/<op>/cuda/<op>.h) with its call record (<opCamel>TestUtils.h), so enqueue is
 * checked on a machine without a GPU.
 */
#pragma once

#include "rnnx/kernel_types.h"

#include <cstddef>
#include <cstdint>

namespace rnnx
{
namespace test
{

struct KernelsDouble
{
    //! What every launcher double returns.
    cudaError_t status{cudaSuccess};
    //! What a workspace-size double reports.
    size_t workspaceSize{4096};
    //! Bumped by resetKernelsDouble(): a recorded call older than this is forgotten.
    uint64_t generation{0};
};

//! The double's state; reset between test cases (resetKernelsDouble).
KernelsDouble& kernelsDouble();

//! Back to the defaults, every recorded call forgotten (before each test case).
void resetKernelsDouble();

//! What every launcher double records besides its pointers: the calls since the reset, the launch parameters, the
//! element type and the stream. An op's call record (<opCamel>TestUtils.h) derives from it and adds the launcher's
//! pointers, in the launcher's order.
template <typename Params> struct LaunchRecord
{
    int32_t count{0};
    Params params{};
    kernels::DataType type{};
    cudaStream_t stream{};
};

//! The arguments of the last call of the launcher whose call record is `Call` (count 0: none since the reset).
template <typename Call> Call& recordedCall()
{
    static Call call{};
    static uint64_t generation = 0;
    if (generation != kernelsDouble().generation)
    {
        call = Call{};
        generation = kernelsDouble().generation;
    }
    return call;
}

} // namespace test
} // namespace rnnx
