/*
 * CausalConvWithState plugin: runtime behaviour: onShapeChange validation and enqueue's arguments to the kernel
 * (recorded by its test double, <op>KernelDouble.cpp; nothing is launched).
 */
#include "kernelsDouble.h"
#include "runtimeTestUtils.h"
#include "testHarness.h"
#include "testUtils.h"
#include "causal_conv_with_state/tests/causalConvWithStateTestUtils.h"

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;

TEST_CASE("CausalConvWithState enqueue reports kernel errors and an unconfigured plugin")
{
    auto const f = DataType::kFLOAT;
    void const* inPtr[7] = {address(0), address(1), address(2), address(3), address(4), address(5), address(6)};
    void* outPtr[2] = {address(10), address(11)};
    takeLoggedMessages();
    auto conv = makeConv();
    std::vector<nvinfer1::PluginTensorDesc> const convIn{
        desc({1, 2, 3}, f), desc({2, 1, 3}, f), desc({2}, f), desc({1, 2, 2}, f), desc({1, 3}, DataType::kINT32)};
    std::vector<nvinfer1::PluginTensorDesc> convOut{desc({1, 2, 3}, f), desc({1, 2, 2}, f)};
    CHECK(conv->enqueue(convIn.data(), convOut.data(), inPtr, outPtr, nullptr, kStream) != 0);
    REQUIRE(conv->onShapeChange(convIn.data(), 5, convOut.data(), 2) == 0);
    kernelsDouble().status = cudaErrorInvalidValue;
    CHECK(conv->enqueue(convIn.data(), convOut.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK(takeLoggedMessages().find("CausalConvWithState 'layer': kernel launch failed") != std::string::npos);
    takeLoggedErrors();
}

TEST_CASE("CausalConvWithState enqueue passes sizes, K, activation, pointers and mask type")
{
    int32_t const B = 3, C = 5, T = 7;
    for (int32_t K : {1, 4})
    {
        for (char const* activation : {"none", "silu", "swish"})
        {
            for (DataType type : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
            {
                auto plugin = makeConv(activation);
                std::vector<nvinfer1::PluginTensorDesc> in{desc({B, C, T}, type), desc({C, 1, K}, type),
                    desc({C}, type), desc({B, C, K - 1}, DataType::kFLOAT), desc({B, T}, DataType::kINT32)};
                std::vector<nvinfer1::PluginTensorDesc> out{
                    desc({B, C, T}, type), desc({B, C, K - 1}, DataType::kFLOAT)};
                FakeBindings const bound = enqueueOnFakeBindings(*plugin, in, out);
                std::vector<void const*> const& inPtr = bound.inputs;
                std::vector<void*> const& outPtr = bound.outputs;
                CausalConvCall const& call = checkLaunchedOnce<CausalConvCall>(type, DataType::kINT32);
                CHECK(call.params.batch == B && call.params.channels == C && call.params.length == T);
                CHECK_EQ(call.params.kernel_size, K);
                CHECK_EQ(call.params.silu, std::string(activation) != "none");
                CHECK(call.input == inPtr[0] && call.weight == inPtr[1] && call.bias == inPtr[2]);
                CHECK(static_cast<void const*>(call.pastState) == inPtr[3] && call.maskPad == inPtr[4]);
                CHECK(call.output == outPtr[0] && static_cast<void*>(call.presentState) == outPtr[1]);
            }
        }
    }
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("CausalConvWithState onShapeChange refuses shapes that do not fit, naming tensor, got and expected")
{
    auto plugin = makeConv("silu");
    auto const h = DataType::kHALF;
    std::vector<nvinfer1::PluginTensorDesc> const good{desc({2, 4, 6}, h), desc({4, 1, 3}, h), desc({4}, h),
        desc({2, 4, 2}, DataType::kFLOAT), desc({2, 6}, DataType::kINT32)};
    std::vector<nvinfer1::PluginTensorDesc> out{desc({2, 4, 6}, h), desc({2, 4, 2}, DataType::kFLOAT)};
    CHECK_EQ(plugin->onShapeChange(good.data(), 5, out.data(), 2), 0);
    CHECK_EQ(takeLoggedErrors(), 0);
    expectShapesRefused(*plugin, good, out,
        {BadShape{0, desc({2, 4}, h), "input (input 0) is (2, 4), expected (B, C, T)"},
            BadShape{1, desc({3, 1, 3}, h), "weight (input 1) is (3, 1, 3), expected (C, 1, K)"},
            BadShape{1, desc({4, 1, 0}, h), "weight (input 1)"}, BadShape{2, desc({5}, h), "bias (input 2) is (5)"},
            BadShape{3, desc({2, 4, 3}, DataType::kFLOAT), "past_state (input 3) is (2, 4, 3), expected (B, C, K-1)"},
            BadShape{4, desc({6, 2}, DataType::kINT32), "mask_pad (input 4) is (6, 2), expected (B, T)"}},
        "CausalConvWithState 'layer': ");
    takeLoggedErrors();
}
