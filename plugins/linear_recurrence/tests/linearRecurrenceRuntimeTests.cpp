/*
 * LinearRecurrence plugin: runtime behaviour: onShapeChange validation and enqueue's arguments to the kernel (recorded
 * by its test double, <op>KernelDouble.cpp; nothing is launched).
 */
#include "kernelsDouble.h"
#include "runtimeTestUtils.h"
#include "testHarness.h"
#include "testUtils.h"
#include "linear_recurrence/tests/linearRecurrenceTestUtils.h"

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;

TEST_CASE("LinearRecurrence enqueue passes sizes, rule, decay / beta layouts, scale, pointers and mask type")
{
    int32_t const B = 2, T = 5, Hkv = 2, dk = 16, dv = 8;
    struct Case
    {
        char const* rule;
        kernels::LinearRecurrenceRule expected;
        int32_t Hq;
        int64_t decayWidth; // Hkv per head, Hkv*dk per key dim
        int64_t betaWidth;  // Hkv or 1
    };
    for (Case const& c : {Case{"linear", kernels::LinearRecurrenceRule::kLINEAR, 2, Hkv, 1},
             Case{"gated", kernels::LinearRecurrenceRule::kGATED, 4, Hkv * dk, 1},
             Case{"gated", kernels::LinearRecurrenceRule::kGATED, 4, Hkv, 1},
             Case{"delta", kernels::LinearRecurrenceRule::kDELTA, 2, Hkv, Hkv},
             Case{"delta", kernels::LinearRecurrenceRule::kDELTA, 6, Hkv, 1},
             Case{"gated_delta", kernels::LinearRecurrenceRule::kGATED_DELTA, 4, Hkv * dk, Hkv},
             Case{"gated_delta", kernels::LinearRecurrenceRule::kGATED_DELTA, 2, Hkv, 1}})
    {
        for (DataType type : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
        {
            for (DataType maskType : {DataType::kINT32, DataType::kBOOL})
            {
                auto plugin = makeRecurrence(c.Hq, Hkv, c.rule, 0.25F);
                REQUIRE(plugin != nullptr);
                std::vector<nvinfer1::PluginTensorDesc> in{desc({B, T, c.Hq * dk}, type), desc({B, T, Hkv * dk}, type),
                    desc({B, T, Hkv * dv}, type), desc({B, Hkv, dk, dv}, DataType::kFLOAT),
                    desc({B, T, c.decayWidth}, type), desc({B, T, c.betaWidth}, type), desc({B, T}, maskType)};
                std::vector<nvinfer1::PluginTensorDesc> out{
                    desc({B, T, c.Hq * dv}, type), desc({B, Hkv, dk, dv}, DataType::kFLOAT)};
                FakeBindings const bound = enqueueOnFakeBindings(*plugin, in, out);
                std::vector<void const*> const& inPtr = bound.inputs;
                std::vector<void*> const& outPtr = bound.outputs;
                LinearRecurrenceCall const& call = checkLaunchedOnce<LinearRecurrenceCall>(type, maskType);
                bool const gated = c.expected == kernels::LinearRecurrenceRule::kGATED
                    || c.expected == kernels::LinearRecurrenceRule::kGATED_DELTA;
                bool const delta = c.expected == kernels::LinearRecurrenceRule::kDELTA
                    || c.expected == kernels::LinearRecurrenceRule::kGATED_DELTA;
                CHECK(call.params.batch == B && call.params.length == T && call.params.q_heads == c.Hq);
                CHECK(call.params.kv_heads == Hkv && call.params.dim_k == dk && call.params.dim_v == dv);
                CHECK(call.params.rule == c.expected);
                CHECK(call.params.scale == 0.25F);
                CHECK(call.params.kernel == kernels::LinearRecurrenceKernel::kAUTO);
                // The op itself: no feature map, batch-first, no normaliser (causal linear attention's options).
                CHECK(call.params.feature_map == kernels::LinearRecurrenceFeatureMap::kNONE);
                CHECK(!call.params.time_major && call.normaliser == nullptr);
                CHECK_EQ(call.params.decay_per_key, gated && c.decayWidth == Hkv * dk);
                CHECK_EQ(call.params.beta_per_head, delta && c.betaWidth == Hkv);
                CHECK(call.query == inPtr[0] && call.key == inPtr[1] && call.value == inPtr[2]);
                CHECK(static_cast<void const*>(call.pastState) == inPtr[3]);
                // decay / beta only when the rule reads them: the exporter's dummies are never passed.
                CHECK(call.decay == (gated ? inPtr[4] : nullptr));
                CHECK(call.beta == (delta ? inPtr[5] : nullptr));
                CHECK(call.maskPad == inPtr[6]);
                CHECK(call.output == outPtr[0]);
                CHECK(static_cast<void*>(call.presentState) == outPtr[1]);
            }
        }
    }
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("LinearRecurrence enqueue passes grouped value's heads and qk_l2_norm")
{
    int32_t const B = 2, T = 3, Hq = 2, Hkv = 4, dk = 8, dv = 5;
    for (int32_t qkL2Norm : {0, 1})
    {
        auto plugin = makeRecurrence(Hq, Hkv, "gated_delta", 0.F, qkL2Norm);
        REQUIRE(plugin != nullptr);
        std::vector<nvinfer1::PluginTensorDesc> in{desc({B, T, Hq * dk}, DataType::kHALF),
            desc({B, T, Hq * dk}, DataType::kHALF), desc({B, T, Hkv * dv}, DataType::kHALF),
            desc({B, Hkv, dk, dv}, DataType::kFLOAT), desc({B, T, Hkv}, DataType::kHALF),
            desc({B, T, Hkv}, DataType::kHALF), desc({B, T}, DataType::kINT32)};
        std::vector<nvinfer1::PluginTensorDesc> out{
            desc({B, T, Hkv * dv}, DataType::kHALF), desc({B, Hkv, dk, dv}, DataType::kFLOAT)};
        enqueueOnFakeBindings(*plugin, in, out);
        LinearRecurrenceCall const& call = checkLaunchedOnce<LinearRecurrenceCall>(DataType::kHALF, DataType::kINT32);
        CHECK(call.params.q_heads == Hq && call.params.kv_heads == Hkv && call.params.dim_k == dk);
        CHECK(call.params.dim_v == dv && call.params.beta_per_head && !call.params.decay_per_key);
        CHECK_EQ(call.params.qk_l2_norm, qkL2Norm != 0);
    }
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("LinearRecurrence onShapeChange refuses shapes that do not fit, naming tensor, got and expected")
{
    auto plugin = makeRecurrence(4, 2, "gated_delta");
    auto const f = DataType::kFLOAT;
    std::vector<nvinfer1::PluginTensorDesc> const good{desc({2, 5, 64}, f), desc({2, 5, 32}, f), desc({2, 5, 16}, f),
        desc({2, 2, 16, 8}, f), desc({2, 5, 2}, f), desc({2, 5, 1}, f), desc({2, 5}, DataType::kINT32)};
    std::vector<nvinfer1::PluginTensorDesc> out{desc({2, 5, 32}, f), desc({2, 2, 16, 8}, f)};
    CHECK_EQ(plugin->onShapeChange(good.data(), 7, out.data(), 2), 0);
    // T = 0 and B = 0 are valid shapes.
    std::vector<nvinfer1::PluginTensorDesc> empty{desc({2, 0, 64}, f), desc({2, 0, 32}, f), desc({2, 0, 16}, f),
        desc({2, 2, 16, 8}, f), desc({2, 0, 2}, f), desc({2, 0, 1}, f), desc({2, 0}, DataType::kINT32)};
    CHECK_EQ(plugin->onShapeChange(empty.data(), 7, out.data(), 2), 0);
    CHECK_EQ(takeLoggedErrors(), 0);
    expectShapesRefused(*plugin, good, out,
        {BadShape{0, desc({2, 5, 62}, f), "query (input 0) is (2, 5, 62)"},
            BadShape{1, desc({2, 4, 32}, f), "key (input 1) is (2, 4, 32), expected (B, T, 2*d_k = 32)"},
            BadShape{1, desc({2, 5, 64}, f), "key (input 1)"},
            BadShape{2, desc({3, 5, 16}, f), "value (input 2) is (3, 5, 16)"},
            BadShape{3, desc({2, 2, 16, 4}, f), "past_state (input 3) is (2, 2, 16, 4), expected (B, 2, 16, 8)"},
            BadShape{3, desc({1, 2, 16, 8}, f), "past_state (input 3)"},
            BadShape{4, desc({2, 5, 8}, f), "decay (input 4)"}, BadShape{5, desc({2, 5, 4}, f), "beta (input 5)"},
            BadShape{6, desc({5, 2}, DataType::kINT32), "mask_pad (input 6) is (5, 2)"}},
        "LinearRecurrence 'layer': ");
    // Head dims above 256.
    std::vector<nvinfer1::PluginTensorDesc> wide{desc({1, 1, 4 * 320}, f), desc({1, 1, 2 * 320}, f),
        desc({1, 1, 16}, f), desc({1, 2, 320, 8}, f), desc({1, 1, 2}, f), desc({1, 1, 1}, f),
        desc({1, 1}, DataType::kINT32)};
    takeLoggedMessages();
    CHECK(plugin->onShapeChange(wide.data(), 7, out.data(), 2) != 0);
    CHECK(takeLoggedMessages().find("head dim d_k = 320 exceeds 256") != std::string::npos);
    // 256 itself is taken.
    wide = {desc({1, 1, 4 * 256}, f), desc({1, 1, 2 * 256}, f), desc({1, 1, 2 * 256}, f), desc({1, 2, 256, 256}, f),
        desc({1, 1, 2 * 256}, f), desc({1, 1, 1}, f), desc({1, 1}, DataType::kINT32)};
    CHECK_EQ(plugin->onShapeChange(wide.data(), 7, out.data(), 2), 0);
    // A rule without decay / beta takes dummies of any shape.
    auto linear = makeRecurrence(4, 2, "linear");
    auto dummies = good;
    dummies[4] = desc({1}, f);
    dummies[5] = desc({}, f);
    CHECK_EQ(linear->onShapeChange(dummies.data(), 7, out.data(), 2), 0);
    CHECK(plugin->onShapeChange(dummies.data(), 7, out.data(), 2) != 0);
    takeLoggedErrors();
}

TEST_CASE("LinearRecurrence enqueue reports kernel errors and an unconfigured plugin")
{
    auto const f = DataType::kFLOAT;
    std::vector<nvinfer1::PluginTensorDesc> const in{desc({1, 2, 8}, f), desc({1, 2, 8}, f), desc({1, 2, 8}, f),
        desc({1, 1, 8, 8}, f), desc({1, 2, 1}, f), desc({1, 2, 1}, f), desc({1, 2}, DataType::kINT32)};
    std::vector<nvinfer1::PluginTensorDesc> out{desc({1, 2, 8}, f), desc({1, 1, 8, 8}, f)};
    void const* inPtr[7] = {address(0), address(1), address(2), address(3), address(4), address(5), address(6)};
    void* outPtr[2] = {address(10), address(11)};
    auto fresh = makeRecurrence(1, 1);
    takeLoggedMessages();
    CHECK(fresh->enqueue(in.data(), out.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK(takeLoggedMessages().find("enqueue before a valid onShapeChange") != std::string::npos);
    REQUIRE(fresh->onShapeChange(in.data(), 7, out.data(), 2) == 0);
    kernelsDouble().status = cudaErrorInvalidValue;
    CHECK(fresh->enqueue(in.data(), out.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK(takeLoggedMessages().find("kernel launch failed") != std::string::npos);
    kernelsDouble().status = cudaSuccess;
    // A mask type the kernels do not read (TensorRT never gives one: supportsFormatCombination takes int32 only).
    auto wrongMask = in;
    wrongMask[6] = desc({1, 2}, DataType::kHALF);
    CHECK(fresh->enqueue(wrongMask.data(), out.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK(takeLoggedMessages().find("mask_pad (input 6) must be int32") != std::string::npos);
    takeLoggedErrors();
}
