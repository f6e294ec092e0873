/*
 * SRUScan plugin: runtime behaviour: onShapeChange validation and enqueue's arguments to the kernel (recorded by
 * its test double, <op>KernelDouble.cpp; nothing is launched).
 */
#include "kernelsDouble.h"
#include "runtimeTestUtils.h"
#include "testHarness.h"
#include "testUtils.h"
#include "sru_scan/tests/sruScanTestUtils.h"

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;

TEST_CASE("SRUScan enqueue passes sizes, attributes and pointers; x only when read, mask_pad always")
{
    int32_t const L = 5, B = 3, d = 4;
    for (int32_t matrices : {3, 4})
    {
        for (int32_t skip : {0, 1})
        {
            // int32: what TensorRT gives; bool / uint8: bound by a caller other than TensorRT, read as bytes.
            for (DataType maskType : {DataType::kINT32, DataType::kBOOL, DataType::kUINT8})
            {
                int32_t const D = 2;
                auto plugin = makeSru(d, D, matrices, skip, 1, 0.75F);
                bool const readsX = matrices == 3 && skip == 1;
                // The TensorRT node: U, x (the exporter's 1-element dummy unless read), weight_c, bias, c0, mask_pad.
                std::vector<nvinfer1::PluginTensorDesc> in{desc({L, B, D * d * matrices}, DataType::kHALF),
                    readsX ? desc({L, B, D * d}, DataType::kHALF) : desc({1}, DataType::kHALF),
                    desc({2 * D * d}, DataType::kHALF), desc({2 * D * d}, DataType::kHALF),
                    desc({B, D * d}, DataType::kFLOAT), desc({L, B}, maskType)};
                std::vector<nvinfer1::PluginTensorDesc> out{
                    desc({L, B, D * d}, DataType::kHALF), desc({B, D * d}, DataType::kFLOAT)};
                // c_last in its own buffer: the plugin declares no aliasing, so TensorRT never binds it to c0.
                FakeBindings const bound = enqueueOnFakeBindings(*plugin, in, out);
                std::vector<void const*> const& inPtr = bound.inputs;
                std::vector<void*> const& outPtr = bound.outputs;
                SruScanCall const& call = checkLaunchedOnce<SruScanCall>(DataType::kHALF, maskType);
                CHECK(call.params.length == L && call.params.batch == B && call.params.hidden_size == d);
                CHECK(call.params.num_directions == D && call.params.num_matrices == matrices);
                CHECK(call.params.has_skip_term == (skip == 1) && call.params.use_tanh && call.params.scale_x == 0.75F);
                CHECK(call.U == inPtr[0]);
                CHECK(call.x == (readsX ? inPtr[1] : nullptr));
                CHECK(call.weightC == inPtr[2]);
                CHECK(call.bias == inPtr[3]);
                CHECK(call.c0 == inPtr[4]);
                CHECK(call.maskPad == inPtr[5]);
                CHECK(call.h == outPtr[0]);
                CHECK(static_cast<void*>(call.cLast) == outPtr[1]);
            }
        }
    }
}

TEST_CASE("SRUScan onShapeChange rejects shapes that do not match the attributes; a dummy x has any shape")
{
    auto plugin = makeSru(4, 1, 4);
    std::vector<nvinfer1::PluginTensorDesc> out{desc({2, 2, 4}, DataType::kFLOAT), desc({2, 4}, DataType::kFLOAT)};
    std::vector<nvinfer1::PluginTensorDesc> good{desc({2, 2, 16}, DataType::kFLOAT), desc({1}, DataType::kFLOAT),
        desc({8}, DataType::kFLOAT), desc({8}, DataType::kFLOAT), desc({2, 4}, DataType::kFLOAT),
        desc({2, 2}, DataType::kBOOL)};
    CHECK_EQ(plugin->onShapeChange(good.data(), 6, out.data(), 2), 0);
    for (auto const& dummy : {desc({}, DataType::kFLOAT), desc({7, 3, 5}, DataType::kFLOAT),
             desc({2, 2, 4}, DataType::kFLOAT), desc({0}, DataType::kFLOAT)})
    {
        auto anyX = good;
        anyX[1] = dummy;
        CHECK_EQ(plugin->onShapeChange(anyX.data(), 6, out.data(), 2), 0);
    }
    CHECK_EQ(takeLoggedErrors(), 0);
    auto wrongWidth = good;
    wrongWidth[0] = desc({2, 2, 12}, DataType::kFLOAT);
    CHECK(plugin->onShapeChange(wrongWidth.data(), 6, out.data(), 2) != 0);
    auto wrongBatch = good;
    wrongBatch[4] = desc({3, 4}, DataType::kFLOAT);
    CHECK(plugin->onShapeChange(wrongBatch.data(), 6, out.data(), 2) != 0);
    auto wrongWeight = good;
    wrongWeight[2] = desc({4}, DataType::kFLOAT);
    CHECK(plugin->onShapeChange(wrongWeight.data(), 6, out.data(), 2) != 0);
    auto wrongMask = good;
    wrongMask[5] = desc({2, 3}, DataType::kUINT8);
    CHECK(plugin->onShapeChange(wrongMask.data(), 6, out.data(), 2) != 0);
    wrongMask[5] = desc({2, 2}, DataType::kUINT8);
    CHECK_EQ(plugin->onShapeChange(wrongMask.data(), 6, out.data(), 2), 0);
    CHECK(takeLoggedErrors() >= 4);
    // The old k = 4 layout without x (U, weight_c, bias, c0[, mask_pad]).
    std::vector<nvinfer1::PluginTensorDesc> old{good[0], good[2], good[3], good[4], good[5]};
    CHECK(plugin->onShapeChange(old.data(), 4, out.data(), 2) != 0);
    CHECK(plugin->onShapeChange(old.data(), 5, out.data(), 2) != 0);
    // With x read (k = 3, skip term), x must be (L, B, D*d).
    auto withX = makeSru(4);
    std::vector<nvinfer1::PluginTensorDesc> k3 = good;
    k3[0] = desc({2, 2, 12}, DataType::kFLOAT);
    k3[1] = desc({2, 2, 4}, DataType::kFLOAT);
    CHECK_EQ(withX->onShapeChange(k3.data(), 6, out.data(), 2), 0);
    k3[1] = desc({1}, DataType::kFLOAT);
    CHECK(withX->onShapeChange(k3.data(), 6, out.data(), 2) != 0);
}

TEST_CASE("SRUScan refuses the old input counts, naming the expected count")
{
    for (int32_t matrices : {3, 4})
    {
        for (int32_t skip : {0, 1})
        {
            auto plugin = makeSru(4, 1, matrices, skip);
            // 4 / 5: the count-based layouts (x left out, mask_pad optional); 7: one too many.
            for (int32_t n : {4, 5, 7})
            {
                expectInputCountRefused(*plugin, n, 2, "SRUScan 'layer': expected exactly 6 inputs");
            }
        }
    }
    // The static layouts say the same without a plugin instance.
    plugin::SruScanInputs sruLayout;
    CHECK(!plugin::SruScanPlugin::inputLayout(plugin::SruScanParameters{}, 5, sruLayout));
    CHECK(takeLoggedMessages().find("SRUScan: expected exactly 6 inputs") != std::string::npos);
    REQUIRE(plugin::SruScanPlugin::inputLayout(plugin::SruScanParameters{}, 6, sruLayout));
    CHECK(sruLayout.U == 0 && sruLayout.x == 1 && sruLayout.weightC == 2 && sruLayout.bias == 3);
    CHECK(sruLayout.c0 == 4 && sruLayout.maskPad == 5 && sruLayout.readsX);
    plugin::SruScanParameters k4;
    k4.numMatrices = 4;
    REQUIRE(plugin::SruScanPlugin::inputLayout(k4, 6, sruLayout));
    CHECK(sruLayout.x == 1 && sruLayout.c0 == 4 && !sruLayout.readsX);
}

TEST_CASE("SRUScan enqueue reports a kernel error and an unconfigured plugin without crashing")
{
    auto fresh = makeSru(4);
    std::vector<nvinfer1::PluginTensorDesc> in(6, desc({1}, DataType::kFLOAT));
    void const* inPtr[6]{};
    void* outPtr[2]{};
    CHECK(fresh->enqueue(in.data(), in.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK_EQ(recordedCall<SruScanCall>().count, 0);
    auto plugin = makeSru(4, 1, 4);
    std::vector<nvinfer1::PluginTensorDesc> good{desc({2, 2, 16}, DataType::kBF16), desc({1}, DataType::kBF16),
        desc({8}, DataType::kBF16), desc({8}, DataType::kBF16), desc({2, 4}, DataType::kFLOAT),
        desc({2, 2}, DataType::kBOOL)};
    REQUIRE(plugin->onShapeChange(good.data(), 6, good.data(), 2) == 0);
    kernelsDouble().status = cudaErrorInvalidValue;
    takeLoggedErrors();
    CHECK(plugin->enqueue(good.data(), good.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK(recordedCall<SruScanCall>().type == kernels::DataType::kBF16);
    CHECK(takeLoggedErrors() > 0);
}
