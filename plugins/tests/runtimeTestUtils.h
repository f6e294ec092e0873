/*
 * Helpers of the ops' runtime tests (plugins/<op>/tests/<opCamel>RuntimeTests.cpp), op-agnostic: enqueue on fake
 * bindings, and the checks every launch the kernels' test double records shares (kernelsDouble.h).
 */
#pragma once

#include "common/pluginBase.h"
#include "kernelsDouble.h"
#include "testHarness.h"
#include "testUtils.h"

#include <vector>

namespace rnnx
{
namespace test
{

//! The fake device addresses of one enqueue: input i at address(i), output o at address(10 + o).
struct FakeBindings
{
    std::vector<void const*> inputs;
    std::vector<void*> outputs;
};

//! Forgets the recorded launches, then onShapeChange on `in` / `out` and enqueue on fake bindings with `workspace`
//! on kStream; REQUIREs that both succeed. Returns the bindings.
inline FakeBindings enqueueOnFakeBindings(nvinfer1::IPluginV3OneRuntime& plugin,
    std::vector<nvinfer1::PluginTensorDesc> const& in, std::vector<nvinfer1::PluginTensorDesc> const& out,
    void* workspace = nullptr)
{
    auto const nbInputs = static_cast<int32_t>(in.size());
    auto const nbOutputs = static_cast<int32_t>(out.size());
    FakeBindings bindings{addresses(nbInputs), {}};
    for (int32_t o = 0; o < nbOutputs; ++o)
    {
        bindings.outputs.push_back(address(static_cast<uintptr_t>(10 + o)));
    }
    resetKernelsDouble();
    REQUIRE(plugin.onShapeChange(in.data(), nbInputs, out.data(), nbOutputs) == 0);
    REQUIRE(plugin.enqueue(in.data(), out.data(), bindings.inputs.data(), bindings.outputs.data(), workspace, kStream)
        == 0);
    return bindings;
}

//! The launch recorded in `Call` (recordedCall), checked to be the only one since the reset, on kStream, of the
//! kernels' type for activations of `type`, with the mask type for a mask_pad bound as `maskType` (int32 read as
//! int32; bool / uint8, bound by a caller other than TensorRT, read as bytes).
template <typename Call> Call const& checkLaunchedOnce(nvinfer1::DataType type, nvinfer1::DataType maskType)
{
    Call const& call = recordedCall<Call>();
    CHECK_EQ(call.count, 1);
    kernels::DataType expectedType{};
    REQUIRE(plugin::toKernelType(type, expectedType));
    CHECK(call.type == expectedType);
    CHECK(call.params.mask_type
        == (maskType == nvinfer1::DataType::kINT32 ? kernels::MaskType::kINT32 : kernels::MaskType::kUINT8));
    CHECK(call.stream == kStream);
    return call;
}

} // namespace test
} // namespace rnnx
