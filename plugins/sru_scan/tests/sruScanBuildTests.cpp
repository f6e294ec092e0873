/*
 * SRUScan plugin: build-phase behaviour: output shapes for symbolic dimensions (through the IExprBuilder test double),
 * output types, the format-combination matrix, configurePlugin, the workspace size, no aliasing.
 */
#include "buildTestUtils.h"
#include "kernelsDouble.h"
#include "testHarness.h"
#include "testUtils.h"
#include "sru_scan/tests/sruScanTestUtils.h"

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;

TEST_CASE("SRUScan output shapes for symbolic L and B: six inputs at fixed positions, x a dummy unless read")
{
    struct Case
    {
        int32_t directions, matrices, skip;
    };
    for (Case c : {Case{1, 3, 1}, Case{2, 3, 1}, Case{2, 4, 1}, Case{2, 3, 0}, Case{1, 4, 0}})
    {
        auto plugin = makeSru(8, c.directions, c.matrices, c.skip);
        REQUIRE(plugin != nullptr);
        TestExprBuilder b;
        auto const* L = b.symbol("L");
        auto const* B = b.symbol("B");
        int64_t const width = 8 * c.directions;
        bool const readsX = c.matrices == 3 && c.skip == 1;
        std::vector<nvinfer1::DimsExprs> in;
        in.push_back(exprs({L, B, b.constant(width * c.matrices)}));
        // x: (L, B, D*d) when read, else the exporter's 1-element dummy.
        in.push_back(readsX ? exprs({L, B, b.constant(width)}) : exprs({b.constant(1)}));
        in.push_back(exprs({b.constant(2 * width)}));
        in.push_back(exprs({b.constant(2 * width)}));
        in.push_back(exprs({B, b.constant(width)}));
        in.push_back(exprs({L, B}));
        nvinfer1::DimsExprs out[2]{};
        REQUIRE(plugin->getOutputShapes(in.data(), 6, nullptr, 0, out, 2, b) == 0);
        CHECK_EQ(text(out[0]), "(L, B, " + std::to_string(width) + ")");
        CHECK_EQ(text(out[1]), "(B, " + std::to_string(width) + ")");
        CHECK(out[1].d[0] == B);
        // Any other count is refused, whatever the attributes: the old 4 / 5 input layouts included.
        checkInputCountsRefused(*plugin, in, {0, 3, 4, 5, 7}, 2, "SRUScan 'layer': expected exactly 6 inputs", b);
        CHECK(plugin->getOutputShapes(in.data(), 6, nullptr, 0, out, 1, b) != 0);
    }
}

TEST_CASE("SRUScan getOutputShapes refuses constant extents that do not fit the fields")
{
    // hidden_size 8, D = 2, k = 3 with the skip term: U (L, B, 48), x (L, B, 16), weight_c / bias 32, c0 (B, 16).
    auto plugin = makeSru(8, 2, 3, 1);
    REQUIRE(plugin != nullptr);
    TestExprBuilder b;
    auto const* L = b.symbol("L");
    auto const* B = b.symbol("B");
    auto const good = [&]
    {
        return std::vector<nvinfer1::DimsExprs>{exprs({L, B, b.constant(48)}), exprs({L, B, b.constant(16)}),
            exprs({b.constant(32)}), exprs({b.constant(32)}), exprs({B, b.constant(16)}), exprs({L, B})};
    };
    nvinfer1::DimsExprs out[2]{};
    REQUIRE(plugin->getOutputShapes(good().data(), 6, nullptr, 0, out, 2, b) == 0);
    // Constant batch / length agreeing with each other pass too.
    std::vector<nvinfer1::DimsExprs> constants = good();
    constants[0] = exprs({b.constant(5), b.constant(3), b.constant(48)});
    constants[1] = exprs({b.constant(5), b.constant(3), b.constant(16)});
    constants[4] = exprs({b.constant(3), b.constant(16)});
    constants[5] = exprs({b.constant(5), b.constant(3)});
    REQUIRE(plugin->getOutputShapes(constants.data(), 6, nullptr, 0, out, 2, b) == 0);
    std::vector<BadInput> const bad{
        {"U's last extent is not D*d*k", 0, exprs({L, B, b.constant(64)})},
        {"x's last extent is not D*d", 1, exprs({L, B, b.constant(8)})},
        {"weight_c is not 2*D*d", 2, exprs({b.constant(16)})},
        {"bias is not 2*D*d", 3, exprs({b.constant(2), b.constant(8)})},
        {"c0's last extent is not D*d", 4, exprs({B, b.constant(8)})},
        {"c0's batch is not U's", 4, exprs({b.constant(4), b.constant(16)})},
        {"mask_pad's batch is not U's", 5, exprs({L, b.constant(4)})},
    };
    checkRefused(
        *plugin, bad, [&](int32_t input) { return input == 4 || input == 5 ? constants : good(); }, 2,
        "do not match hidden_size 8", b);
    // x is a dummy of any shape when it is not read (k = 4).
    auto k4 = makeSru(8, 2, 4, 1);
    std::vector<nvinfer1::DimsExprs> k4in = good();
    k4in[0] = exprs({L, B, b.constant(64)});
    k4in[1] = exprs({b.constant(1)});
    CHECK(k4->getOutputShapes(k4in.data(), 6, nullptr, 0, out, 2, b) == 0);
}

TEST_CASE("SRUScan output data types: activations follow the first input, state is fp32")
{
    auto sru = makeSru(4);
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        DataType in[6] = {t, t, t, t, DataType::kFLOAT, DataType::kBOOL};
        DataType out[3]{};
        REQUIRE(sru->getOutputDataTypes(out, 2, in, 6) == 0);
        CHECK(out[0] == t && out[1] == DataType::kFLOAT);
        CHECK(sru->getOutputDataTypes(out, 2, in, 5) != 0);
        CHECK(sru->getOutputDataTypes(out, 2, in, 3) != 0);
    }
    CHECK_EQ(sru->getNbOutputs(), 2);
}

TEST_CASE("SRUScan format combinations: linear; activations fp32/fp16/bf16 alike; state fp32; mask int32 only")
{
    // Every variant: U, x (read or dummy), weight_c, bias, c0, mask_pad | h, c_last
    std::vector<Role> const roles{kAct, kAct, kAct, kAct, kState, kMask, kAct, kState};
    int32_t const nbInputs = 6;
    int32_t checked = 0;
    struct Variant
    {
        int32_t matrices, skip;
    };
    for (Variant variant : {Variant{3, 1}, Variant{3, 0}, Variant{4, 1}, Variant{4, 0}})
    {
        auto plugin = makeSru(4, 1, variant.matrices, variant.skip);
        checked += checkFormatCombinations(*plugin, roles, nbInputs, {2, 2});
    }
    CHECK(checked > 3600);
    auto plugin = makeSru(4);
    std::vector<nvinfer1::DynamicPluginTensorDesc> io(8, dynDesc(desc({2}, DataType::kFLOAT)));
    CHECK(!plugin->supportsFormatCombination(8, io.data(), 6, 2));
    CHECK(!plugin->supportsFormatCombination(-1, io.data(), 6, 2));
    CHECK(!plugin->supportsFormatCombination(0, io.data(), 3, 2));
    // The old count-based layouts are refused at every position (5 inputs: no mask, or k = 4 without x).
    io[4] = dynDesc(desc({2}, DataType::kFLOAT));
    io[5] = dynDesc(desc({2}, DataType::kINT32));
    for (int32_t pos = 0; pos < 7; ++pos)
    {
        CHECK(!plugin->supportsFormatCombination(pos, io.data(), 5, 2));
    }
    // k = 4: x is a 1-element dummy in the activation type at position 1; c0 stays at position 4.
    auto k4 = makeSru(4, 1, 4);
    std::vector<nvinfer1::DynamicPluginTensorDesc> k4io(8, dynDesc(desc({2, 3, 16}, DataType::kHALF)));
    k4io[1] = dynDesc(desc({1}, DataType::kHALF));
    k4io[4] = dynDesc(desc({3, 4}, DataType::kFLOAT));
    k4io[5] = dynDesc(desc({2, 3}, DataType::kINT32));
    k4io[7] = dynDesc(desc({3, 4}, DataType::kFLOAT));
    for (int32_t pos = 0; pos < 8; ++pos)
    {
        CHECK(k4->supportsFormatCombination(pos, k4io.data(), 6, 2));
    }
    // The mask as TensorRT gives it is int32; bool and uint8 (no TensorRT plugin tensor types) are refused.
    for (DataType byteMask : {DataType::kBOOL, DataType::kUINT8})
    {
        k4io[5] = dynDesc(desc({2, 3}, byteMask));
        CHECK(!k4->supportsFormatCombination(5, k4io.data(), 6, 2));
    }
    k4io[5] = dynDesc(desc({2, 3}, DataType::kINT32));
    k4io[1] = dynDesc(desc({1}, DataType::kFLOAT));
    CHECK(!k4->supportsFormatCombination(1, k4io.data(), 6, 2));
    k4io[1] = dynDesc(desc({1}, DataType::kHALF));
    k4io[4] = dynDesc(desc({3, 4}, DataType::kHALF));
    CHECK(!k4->supportsFormatCombination(4, k4io.data(), 6, 2));
}

TEST_CASE("SRUScan configurePlugin takes exactly six inputs in every variant and declares no aliasing")
{
    std::vector<nvinfer1::DynamicPluginTensorDesc> in(6, dynDesc(desc({2}, DataType::kFLOAT)));
    std::vector<nvinfer1::DynamicPluginTensorDesc> out(2, dynDesc(desc({2}, DataType::kFLOAT)));
    for (int32_t matrices : {3, 4})
    {
        for (int32_t skip : {0, 1})
        {
            auto plugin = makeSru(4, 2, matrices, skip);
            CHECK_EQ(buildInterface(*plugin), "PLUGIN_V3ONE_BUILD 1.0");
            REQUIRE(plugin->configurePlugin(in.data(), 6, out.data(), 2) == 0);
            for (int32_t n : {3, 4, 5, 7})
            {
                takeLoggedMessages();
                CHECK(plugin->configurePlugin(in.data(), n, out.data(), 2) != 0);
                CHECK(takeLoggedMessages().find("expected exactly 6 inputs") != std::string::npos);
            }
            std::unique_ptr<nvinfer1::IPluginV3> copy(plugin->clone());
            CHECK_EQ(buildInterface(*copy), "PLUGIN_V3ONE_BUILD 1.0");
        }
    }
}

TEST_CASE("SRUScan asks for no workspace")
{
    // hidden_size 4, one direction, k = 3 with the skip term; L = 16, B = 2.
    auto const h = dynDesc(desc({16, 2, 4}, DataType::kHALF));
    auto const c = dynDesc(desc({2, 4}, DataType::kFLOAT));
    auto const vector = dynDesc(desc({8}, DataType::kHALF));
    std::vector<nvinfer1::DynamicPluginTensorDesc> const in{
        dynDesc(desc({16, 2, 12}, DataType::kHALF)), h, vector, vector, c, dynDesc(desc({16, 2}, DataType::kINT32))};
    std::vector<nvinfer1::DynamicPluginTensorDesc> const out{h, c};
    auto sru = makeSru(4);
    CHECK_EQ(sru->getWorkspaceSize(in.data(), 6, out.data(), 2), size_t{0});
}
