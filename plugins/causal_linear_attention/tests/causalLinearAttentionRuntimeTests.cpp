/*
 * CausalLinearAttention plugin: runtime behaviour: onShapeChange validation and enqueue's arguments to the kernel
 * (recorded by its test double, <op>KernelDouble.cpp; nothing is launched).
 */
#include "kernelsDouble.h"
#include "runtimeTestUtils.h"
#include "testHarness.h"
#include "testUtils.h"
#include "causal_linear_attention/tests/causalLinearAttentionTestUtils.h"

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;

TEST_CASE("CausalLinearAttention refuses the old input counts, naming the expected count")
{
    auto attention = makeAttention();
    // 3 / 4 / 5: the version 1 layouts (no state, one state tensor, no mask); 7: one too many.
    for (int32_t n : {3, 4, 5, 7})
    {
        expectInputCountRefused(*attention, n, 3, "CausalLinearAttention 'layer': expected exactly 6 inputs");
    }
    // The static layout says the same without a plugin instance.
    plugin::CausalLinearAttentionInputs attentionLayout;
    CHECK(!plugin::CausalLinearAttentionPlugin::inputLayout(5, attentionLayout));
    CHECK(takeLoggedMessages().find("CausalLinearAttention: expected exactly 6 inputs") != std::string::npos);
    REQUIRE(plugin::CausalLinearAttentionPlugin::inputLayout(6, attentionLayout));
    CHECK(attentionLayout.q == 0 && attentionLayout.k == 1 && attentionLayout.v == 2);
    CHECK(attentionLayout.S0 == 3 && attentionLayout.z0 == 4 && attentionLayout.maskPad == 5);
}

TEST_CASE("CausalLinearAttention enqueue passes sizes, eps, heads, layout, state and mask pointers, mask type")
{
    int32_t const B = 2, H = 3, L = 7, E = 16, M = 8;
    for (int32_t timeMajor : {0, 1})
    {
        for (DataType maskType : {DataType::kINT32, DataType::kBOOL, DataType::kUINT8})
        {
            int32_t const d0 = timeMajor != 0 ? L : B, d1 = timeMajor != 0 ? B : L;
            auto const q = desc({d0, d1, H * E}, DataType::kFLOAT);
            auto const v = desc({d0, d1, H * M}, DataType::kFLOAT);
            auto const S = desc({B, H, E, M}, DataType::kFLOAT);
            auto const z = desc({B, H, E}, DataType::kFLOAT);
            auto const mask = desc({d0, d1}, maskType);
            // The TensorRT node always lists q, k, v, S0, z0, mask_pad (S0 / z0 zeros when the model gave no state,
            // mask_pad all false without padding); every one goes to the kernel, and S_last / z_last have their own
            // buffers (the plugin declares no aliasing).
            auto plugin = makeAttention(H, 0.5F, timeMajor);
            std::vector<nvinfer1::PluginTensorDesc> in{q, q, v, S, z, mask};
            std::vector<nvinfer1::PluginTensorDesc> out{v, S, z};
            FakeBindings const bound = enqueueOnFakeBindings(*plugin, in, out, address(20));
            std::vector<void const*> const& inPtr = bound.inputs;
            std::vector<void*> const& outPtr = bound.outputs;
            AttentionCall const& call = checkLaunchedOnce<AttentionCall>(DataType::kFLOAT, maskType);
            CHECK(call.params.batch == B && call.params.heads == H && call.params.length == L);
            CHECK(call.params.dim_k == E && call.params.dim_v == M && call.params.eps == 0.5F);
            CHECK(call.params.time_major == (timeMajor != 0));
            CHECK(call.q == inPtr[0] && call.k == inPtr[1] && call.v == inPtr[2]);
            CHECK(static_cast<void const*>(call.S0) == inPtr[3]);
            CHECK(static_cast<void const*>(call.z0) == inPtr[4]);
            CHECK(static_cast<void const*>(call.maskPad) == inPtr[5]);
            CHECK(call.out == outPtr[0] && call.SLast == outPtr[1] && call.zLast == outPtr[2]);
            // No workspace (the plugin asks for none; the kernels need one only for an aliased z0).
            CHECK(call.workspace == nullptr);
        }
    }
}

TEST_CASE("CausalLinearAttention onShapeChange rejects shapes that do not match num_heads and time_major")
{
    int32_t const B = 2, H = 3, L = 7, E = 16, M = 8;
    auto plugin = makeAttention(H);
    auto const q = desc({B, L, H * E}, DataType::kHALF);
    auto const v = desc({B, L, H * M}, DataType::kHALF);
    auto const S = desc({B, H, E, M}, DataType::kFLOAT);
    auto const z = desc({B, H, E}, DataType::kFLOAT);
    auto const mask = desc({B, L}, DataType::kBOOL);
    std::vector<nvinfer1::PluginTensorDesc> out{v, S, z};
    std::vector<nvinfer1::PluginTensorDesc> const good{q, q, v, S, z, mask};
    CHECK_EQ(plugin->onShapeChange(good.data(), 6, out.data(), 3), 0);
    CHECK_EQ(takeLoggedErrors(), 0);
    auto const rejects = [&](int32_t pos, nvinfer1::PluginTensorDesc const& bad)
    {
        auto in = good;
        in[static_cast<size_t>(pos)] = bad;
        takeLoggedMessages();
        CHECK(plugin->onShapeChange(in.data(), 6, out.data(), 3) != 0);
        CHECK(takeLoggedMessages().find("inconsistent shapes for num_heads 3") != std::string::npos);
    };
    rejects(1, desc({B, L - 1, H * E}, DataType::kHALF)); // k shorter than q
    rejects(2, desc({B + 1, L, H * M}, DataType::kHALF)); // v of another batch
    rejects(0, desc({B, L, H * E + 1}, DataType::kHALF)); // q's last axis not a multiple of num_heads
    rejects(2, desc({B, L, H * M + 2}, DataType::kHALF)); // v's likewise
    rejects(3, desc({B, H, M, E}, DataType::kFLOAT));     // S0 transposed
    rejects(3, desc({B, H + 1, E, M}, DataType::kFLOAT)); // S0 with another head count
    rejects(4, desc({B, H, M}, DataType::kFLOAT));        // z0 of v's head dim
    rejects(5, desc({L, B}, DataType::kBOOL));            // the time-major mask for a batch-first node
    rejects(5, desc({B * L}, DataType::kBOOL));           // a flat mask
    rejects(0, desc({B, H, L, E}, DataType::kHALF));      // the version 1 layout, heads apart
    std::vector<nvinfer1::PluginTensorDesc> swapped{q, q, v, z, S, mask};
    CHECK(plugin->onShapeChange(swapped.data(), 6, out.data(), 3) != 0);
    // The same node time-major: q, k, v (L, B, H*.), mask_pad (L, B).
    auto timeMajor = makeAttention(H, 1e-6F, 1);
    auto const qt = desc({L, B, H * E}, DataType::kHALF);
    auto const vt = desc({L, B, H * M}, DataType::kHALF);
    std::vector<nvinfer1::PluginTensorDesc> tm{qt, qt, vt, S, z, desc({L, B}, DataType::kUINT8)};
    std::vector<nvinfer1::PluginTensorDesc> tmOut{vt, S, z};
    CHECK_EQ(timeMajor->onShapeChange(tm.data(), 6, tmOut.data(), 3), 0);
    tm[5] = mask;
    CHECK(timeMajor->onShapeChange(tm.data(), 6, tmOut.data(), 3) != 0);
    CHECK(timeMajor->onShapeChange(good.data(), 6, out.data(), 3) != 0); // batch-first S0 / z0 batch is L here
    void const* inPtr[6]{};
    void* outPtr[3]{};
    auto fresh = makeAttention(H);
    CHECK(fresh->enqueue(good.data(), out.data(), inPtr, outPtr, nullptr, kStream) != 0);
}
