/*
 * Runtime behaviour: onShapeChange validation and enqueue's arguments to the kernels (recorded by the
 * kernels test double; nothing is launched), including absent optional inputs and in-place state.
 */
#include "kernelsDouble.h"
#include "testHarness.h"
#include "testUtils.h"

extern "C" nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators);

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;

namespace
{

//! Distinct fake device addresses.
void* address(uintptr_t i)
{
    return reinterpret_cast<void*>(0x1000 * (i + 1));
}

cudaStream_t const kStream = reinterpret_cast<cudaStream_t>(0xabc0);

} // namespace

TEST_CASE("SRUScan enqueue passes sizes, attributes and pointers; absent x / mask_pad are nullptr")
{
    int32_t const L = 5, B = 3, d = 4;
    for (int32_t matrices : {3, 4})
    {
        for (bool mask : {false, true})
        {
            int32_t const D = 2;
            auto plugin = makeSru(d, D, matrices, 1, 1, 0.75F);
            bool const hasX = matrices == 3;
            std::vector<nvinfer1::PluginTensorDesc> in{desc({L, B, D * d * matrices}, DataType::kHALF)};
            if (hasX)
            {
                in.push_back(desc({L, B, D * d}, DataType::kHALF));
            }
            in.push_back(desc({2 * D * d}, DataType::kHALF));
            in.push_back(desc({2 * D * d}, DataType::kHALF));
            in.push_back(desc({B, D * d}, DataType::kFLOAT));
            if (mask)
            {
                in.push_back(desc({L, B}, DataType::kBOOL));
            }
            std::vector<nvinfer1::PluginTensorDesc> out{
                desc({L, B, D * d}, DataType::kHALF), desc({B, D * d}, DataType::kFLOAT)};
            auto const n = static_cast<int32_t>(in.size());
            REQUIRE(plugin->onShapeChange(in.data(), n, out.data(), 2) == 0);
            std::vector<void const*> inPtr;
            for (int32_t i = 0; i < n; ++i)
            {
                inPtr.push_back(address(i));
            }
            // c_last aliased to c0, as TensorRT binds it when the aliasing preview feature is on.
            void* outPtr[2] = {address(10), const_cast<void*>(inPtr[hasX ? 4 : 3])};
            REQUIRE(plugin->enqueue(in.data(), out.data(), inPtr.data(), outPtr, nullptr, kStream) == 0);
            SruScanCall const& call = kernelsDouble().sru;
            CHECK_EQ(call.count, 1);
            CHECK(call.params.length == L && call.params.batch == B && call.params.hidden_size == d);
            CHECK(call.params.num_directions == D && call.params.num_matrices == matrices);
            CHECK(call.params.has_skip_term && call.params.use_tanh && call.params.scale_x == 0.75F);
            CHECK(call.type == kernels::DataType::kHALF);
            CHECK(call.U == inPtr[0]);
            CHECK(call.x == (hasX ? inPtr[1] : nullptr));
            CHECK(call.weightC == inPtr[hasX ? 2 : 1]);
            CHECK(call.bias == inPtr[hasX ? 3 : 2]);
            CHECK(call.c0 == inPtr[hasX ? 4 : 3]);
            CHECK(call.maskPad == (mask ? inPtr[n - 1] : nullptr));
            CHECK(call.h == outPtr[0]);
            CHECK(static_cast<void const*>(call.cLast) == static_cast<void const*>(call.c0));
            CHECK(call.stream == kStream);
            kernelsDouble() = KernelsDouble{};
        }
    }
}

TEST_CASE("SRUScan onShapeChange rejects shapes that do not match the attributes")
{
    auto plugin = makeSru(4, 1, 4);
    std::vector<nvinfer1::PluginTensorDesc> out{desc({2, 2, 4}, DataType::kFLOAT), desc({2, 4}, DataType::kFLOAT)};
    std::vector<nvinfer1::PluginTensorDesc> good{desc({2, 2, 16}, DataType::kFLOAT), desc({8}, DataType::kFLOAT),
        desc({8}, DataType::kFLOAT), desc({2, 4}, DataType::kFLOAT)};
    CHECK_EQ(plugin->onShapeChange(good.data(), 4, out.data(), 2), 0);
    auto wrongWidth = good;
    wrongWidth[0] = desc({2, 2, 12}, DataType::kFLOAT);
    CHECK(plugin->onShapeChange(wrongWidth.data(), 4, out.data(), 2) != 0);
    auto wrongBatch = good;
    wrongBatch[3] = desc({3, 4}, DataType::kFLOAT);
    CHECK(plugin->onShapeChange(wrongBatch.data(), 4, out.data(), 2) != 0);
    auto wrongWeight = good;
    wrongWeight[1] = desc({4}, DataType::kFLOAT);
    CHECK(plugin->onShapeChange(wrongWeight.data(), 4, out.data(), 2) != 0);
    auto withMask = good;
    withMask.push_back(desc({2, 3}, DataType::kUINT8));
    CHECK(plugin->onShapeChange(withMask.data(), 5, out.data(), 2) != 0);
    withMask.back() = desc({2, 2}, DataType::kUINT8);
    CHECK_EQ(plugin->onShapeChange(withMask.data(), 5, out.data(), 2), 0);
    CHECK(takeLoggedErrors() >= 4);
}

TEST_CASE("SRUScan enqueue reports a kernel error and an unconfigured plugin without crashing")
{
    auto fresh = makeSru(4);
    std::vector<nvinfer1::PluginTensorDesc> in(5, desc({1}, DataType::kFLOAT));
    void const* inPtr[5]{};
    void* outPtr[2]{};
    CHECK(fresh->enqueue(in.data(), in.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK_EQ(kernelsDouble().sru.count, 0);
    auto plugin = makeSru(4, 1, 4);
    std::vector<nvinfer1::PluginTensorDesc> good{desc({2, 2, 16}, DataType::kBF16), desc({8}, DataType::kBF16),
        desc({8}, DataType::kBF16), desc({2, 4}, DataType::kFLOAT)};
    REQUIRE(plugin->onShapeChange(good.data(), 4, good.data(), 2) == 0);
    kernelsDouble().status = cudaErrorInvalidValue;
    takeLoggedErrors();
    CHECK(plugin->enqueue(good.data(), good.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK(kernelsDouble().sru.type == kernels::DataType::kBF16);
    CHECK(takeLoggedErrors() > 0);
}

TEST_CASE("CausalLinearAttention enqueue passes sizes, eps, state pointers and the workspace")
{
    int32_t const B = 2, H = 3, L = 7, E = 16, M = 8;
    auto const q = desc({B, H, L, E}, DataType::kFLOAT);
    auto const v = desc({B, H, L, M}, DataType::kFLOAT);
    auto const S = desc({B, H, E, M}, DataType::kFLOAT);
    auto const z = desc({B, H, E}, DataType::kFLOAT);
    struct Case
    {
        std::vector<nvinfer1::PluginTensorDesc> in;
        int32_t S0, z0;
    };
    for (Case const& c :
        {Case{{q, q, v}, -1, -1}, Case{{q, q, v, S}, 3, -1}, Case{{q, q, v, z}, -1, 3}, Case{{q, q, v, S, z}, 3, 4}})
    {
        auto plugin = makeAttention(0.5F);
        std::vector<nvinfer1::PluginTensorDesc> out{v, S, z};
        auto const n = static_cast<int32_t>(c.in.size());
        REQUIRE(plugin->onShapeChange(c.in.data(), n, out.data(), 3) == 0);
        std::vector<void const*> inPtr;
        for (int32_t i = 0; i < n; ++i)
        {
            inPtr.push_back(address(i));
        }
        void* outPtr[3] = {address(10), address(11), address(12)};
        kernelsDouble() = KernelsDouble{};
        REQUIRE(plugin->enqueue(c.in.data(), out.data(), inPtr.data(), outPtr, address(20), kStream) == 0);
        AttentionCall const& call = kernelsDouble().attention;
        CHECK_EQ(call.count, 1);
        CHECK(call.params.batch == B && call.params.heads == H && call.params.length == L);
        CHECK(call.params.dim_k == E && call.params.dim_v == M && call.params.eps == 0.5F);
        CHECK(call.type == kernels::DataType::kFLOAT);
        CHECK(call.q == inPtr[0] && call.k == inPtr[1] && call.v == inPtr[2]);
        CHECK(static_cast<void const*>(call.S0) == (c.S0 >= 0 ? inPtr[c.S0] : nullptr));
        CHECK(static_cast<void const*>(call.z0) == (c.z0 >= 0 ? inPtr[c.z0] : nullptr));
        CHECK(call.out == outPtr[0] && call.SLast == outPtr[1] && call.zLast == outPtr[2]);
        CHECK(call.workspace == address(20) && call.stream == kStream);
    }
}

TEST_CASE("CausalLinearAttention onShapeChange rejects inconsistent shapes")
{
    auto plugin = makeAttention();
    auto const q = desc({2, 3, 7, 16}, DataType::kHALF);
    auto const v = desc({2, 3, 7, 8}, DataType::kHALF);
    std::vector<nvinfer1::PluginTensorDesc> out{
        v, desc({2, 3, 16, 8}, DataType::kFLOAT), desc({2, 3, 16}, DataType::kFLOAT)};
    std::vector<nvinfer1::PluginTensorDesc> kShort{q, desc({2, 3, 6, 16}, DataType::kHALF), v};
    CHECK(plugin->onShapeChange(kShort.data(), 3, out.data(), 3) != 0);
    std::vector<nvinfer1::PluginTensorDesc> wrongS{q, q, v, desc({2, 3, 8, 16}, DataType::kFLOAT)};
    CHECK(plugin->onShapeChange(wrongS.data(), 4, out.data(), 3) != 0);
    std::vector<nvinfer1::PluginTensorDesc> wrongZ{q, q, v, desc({2, 3, 8}, DataType::kFLOAT)};
    CHECK(plugin->onShapeChange(wrongZ.data(), 4, out.data(), 3) != 0);
    std::vector<nvinfer1::PluginTensorDesc> good{q, q, v};
    CHECK_EQ(plugin->onShapeChange(good.data(), 3, out.data(), 3), 0);
    void const* inPtr[3]{};
    void* outPtr[3]{};
    auto fresh = makeAttention();
    CHECK(fresh->enqueue(good.data(), out.data(), inPtr, outPtr, nullptr, kStream) != 0);
}

TEST_CASE("getCreators without TensorRT in the process returns both creators")
{
    int32_t nb = 0;
    nvinfer1::IPluginCreatorInterface* const* creators = getCreators(nb);
    REQUIRE(nb == 2);
    REQUIRE(creators != nullptr);
    std::vector<std::string> names;
    for (int32_t i = 0; i < nb; ++i)
    {
        CHECK_EQ(std::string(creators[i]->getInterfaceInfo().kind), "PLUGIN CREATOR_V3ONE");
        auto* creator = static_cast<nvinfer1::IPluginCreatorV3One*>(creators[i]);
        names.emplace_back(creator->getPluginName());
        CHECK_EQ(std::string(creator->getPluginNamespace()), "rnnx");
    }
    CHECK((names == std::vector<std::string>{"SRUScan", "CausalLinearAttention"}));
}
