/*
 * Build-phase behaviour: output shapes for symbolic dimensions (through the IExprBuilder test double), output
 * types, the format-combination matrix, aliasing, configurePlugin and the workspace size.
 */
#include "exprBuilderDouble.h"
#include "kernelsDouble.h"
#include "testHarness.h"
#include "testUtils.h"

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;

namespace
{

nvinfer1::DimsExprs exprs(std::vector<nvinfer1::IDimensionExpr const*> const& d)
{
    nvinfer1::DimsExprs e{};
    e.nbDims = static_cast<int32_t>(d.size());
    for (size_t i = 0; i < d.size(); ++i)
    {
        e.d[i] = d[i];
    }
    return e;
}

std::string text(nvinfer1::DimsExprs const& e)
{
    std::string s = "(";
    for (int32_t i = 0; i < e.nbDims; ++i)
    {
        s += (i > 0 ? ", " : "") + exprText(e.d[i]);
    }
    return s + ")";
}

std::vector<DataType> const kAllTypes{DataType::kFLOAT, DataType::kHALF, DataType::kINT8, DataType::kINT32,
    DataType::kBOOL, DataType::kUINT8, DataType::kFP8, DataType::kBF16, DataType::kINT64, DataType::kINT4,
    DataType::kFP4};

bool isActivation(DataType t)
{
    return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16;
}

} // namespace

TEST_CASE("SRUScan output shapes for symbolic L and B")
{
    struct Case
    {
        int32_t directions, matrices, skip;
        bool mask;
        int32_t nbInputs;
    };
    for (Case c : {Case{1, 3, 1, false, 5}, Case{1, 3, 1, true, 6}, Case{2, 4, 1, false, 4}, Case{2, 3, 0, true, 5},
             Case{1, 4, 0, true, 5}})
    {
        auto plugin = makeSru(8, c.directions, c.matrices, c.skip);
        REQUIRE(plugin != nullptr);
        TestExprBuilder b;
        auto const* L = b.symbol("L");
        auto const* B = b.symbol("B");
        int64_t const width = 8 * c.directions;
        std::vector<nvinfer1::DimsExprs> in;
        in.push_back(exprs({L, B, b.constant(width * c.matrices)}));
        if (c.matrices == 3 && c.skip == 1)
        {
            in.push_back(exprs({L, B, b.constant(width)}));
        }
        in.push_back(exprs({b.constant(2 * width)}));
        in.push_back(exprs({b.constant(2 * width)}));
        in.push_back(exprs({B, b.constant(width)}));
        if (c.mask)
        {
            in.push_back(exprs({L, B}));
        }
        REQUIRE(static_cast<int32_t>(in.size()) == c.nbInputs);
        nvinfer1::DimsExprs out[2]{};
        REQUIRE(plugin->getOutputShapes(in.data(), c.nbInputs, nullptr, 0, out, 2, b) == 0);
        CHECK_EQ(text(out[0]), "(L, B, " + std::to_string(width) + ")");
        CHECK_EQ(text(out[1]), "(B, " + std::to_string(width) + ")");
        CHECK(out[1].d[0] == B);
        // One input too few or too many for this configuration.
        CHECK(plugin->getOutputShapes(in.data(), c.nbInputs - 2, nullptr, 0, out, 2, b) != 0);
        CHECK(plugin->getOutputShapes(in.data(), c.nbInputs + 2, nullptr, 0, out, 2, b) != 0);
        CHECK(plugin->getOutputShapes(in.data(), c.nbInputs, nullptr, 0, out, 1, b) != 0);
    }
}

TEST_CASE("CausalLinearAttention output shapes with and without S0 / z0")
{
    auto plugin = makeAttention();
    REQUIRE(plugin != nullptr);
    TestExprBuilder b;
    auto const* B = b.symbol("B");
    auto const* H = b.symbol("H");
    auto const* L = b.symbol("L");
    auto const* E = b.constant(64);
    auto const* M = b.symbol("M");
    auto const q = exprs({B, H, L, E});
    auto const v = exprs({B, H, L, M});
    auto const S0 = exprs({B, H, E, M});
    auto const z0 = exprs({B, H, E});
    struct Case
    {
        std::vector<nvinfer1::DimsExprs> inputs;
        int32_t S0, z0;
    };
    for (Case const& c : {Case{{q, q, v}, -1, -1}, Case{{q, q, v, S0}, 3, -1}, Case{{q, q, v, z0}, -1, 3},
             Case{{q, q, v, S0, z0}, 3, 4}})
    {
        nvinfer1::DimsExprs out[3]{};
        auto const n = static_cast<int32_t>(c.inputs.size());
        REQUIRE(plugin->getOutputShapes(c.inputs.data(), n, nullptr, 0, out, 3, b) == 0);
        CHECK_EQ(text(out[0]), "(B, H, L, M)");
        CHECK_EQ(text(out[1]), "(B, H, 64, M)");
        CHECK_EQ(text(out[2]), "(B, H, 64)");
        CHECK_EQ(plugin->getAliasedInput(0), -1);
        CHECK_EQ(plugin->getAliasedInput(1), c.S0);
        CHECK_EQ(plugin->getAliasedInput(2), c.z0);
    }
    std::vector<nvinfer1::DimsExprs> bad{q, q, v, exprs({B, H})};
    nvinfer1::DimsExprs out[3]{};
    CHECK(plugin->getOutputShapes(bad.data(), 4, nullptr, 0, out, 3, b) != 0);
    std::vector<nvinfer1::DimsExprs> badQ{exprs({B, L, E}), q, v};
    CHECK(plugin->getOutputShapes(badQ.data(), 3, nullptr, 0, out, 3, b) != 0);
    CHECK(plugin->getOutputShapes(badQ.data(), 2, nullptr, 0, out, 3, b) != 0);
}

TEST_CASE("output data types: activations follow the first input, state is fp32")
{
    auto sru = makeSru(4);
    auto attention = makeAttention();
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        DataType in[6] = {t, t, t, t, DataType::kFLOAT, DataType::kBOOL};
        DataType out[3]{};
        REQUIRE(sru->getOutputDataTypes(out, 2, in, 5) == 0);
        CHECK(out[0] == t && out[1] == DataType::kFLOAT);
        REQUIRE(sru->getOutputDataTypes(out, 2, in, 6) == 0);
        CHECK(sru->getOutputDataTypes(out, 2, in, 3) != 0);
        DataType qkv[5] = {t, t, t, DataType::kFLOAT, DataType::kFLOAT};
        REQUIRE(attention->getOutputDataTypes(out, 3, qkv, 5) == 0);
        CHECK(out[0] == t && out[1] == DataType::kFLOAT && out[2] == DataType::kFLOAT);
        CHECK(attention->getOutputDataTypes(out, 2, qkv, 5) != 0);
    }
    CHECK_EQ(sru->getNbOutputs(), 2);
    CHECK_EQ(attention->getNbOutputs(), 3);
}

TEST_CASE("SRUScan format combinations: linear; activations fp32/fp16/bf16 alike; state fp32; mask bool/uint8")
{
    // k = 3 with skip term and a mask: U, x, weight_c, bias, c0, mask_pad | h, c_last
    auto plugin = makeSru(4);
    enum Role
    {
        kAct,
        kState,
        kMask
    };
    std::vector<Role> const roles{kAct, kAct, kAct, kAct, kState, kMask, kAct, kState};
    int32_t const nbInputs = 6;
    int32_t checked = 0;
    for (DataType first : kAllTypes)
    {
        for (size_t pos = 0; pos < roles.size(); ++pos)
        {
            for (DataType t : kAllTypes)
            {
                std::vector<nvinfer1::DynamicPluginTensorDesc> io(roles.size(), dynDesc(desc({2, 2}, first)));
                io[pos] = dynDesc(desc({2, 2}, pos == 0 ? first : t));
                DataType const type = pos == 0 ? first : t;
                bool expected = false;
                switch (roles[pos])
                {
                case kAct: expected = isActivation(type) && type == first; break;
                case kState: expected = type == DataType::kFLOAT; break;
                case kMask: expected = type == DataType::kBOOL || type == DataType::kUINT8; break;
                }
                CHECK_EQ(
                    plugin->supportsFormatCombination(static_cast<int32_t>(pos), io.data(), nbInputs, 2), expected);
                io[pos].desc.format = nvinfer1::TensorFormat::kCHW32;
                CHECK(!plugin->supportsFormatCombination(static_cast<int32_t>(pos), io.data(), nbInputs, 2));
                ++checked;
            }
        }
    }
    CHECK(checked > 900);
    std::vector<nvinfer1::DynamicPluginTensorDesc> io(8, dynDesc(desc({2}, DataType::kFLOAT)));
    CHECK(!plugin->supportsFormatCombination(8, io.data(), 6, 2));
    CHECK(!plugin->supportsFormatCombination(-1, io.data(), 6, 2));
    CHECK(!plugin->supportsFormatCombination(0, io.data(), 3, 2));
    // Without the mask (5 inputs) position 5 is h, an activation.
    io[5] = dynDesc(desc({2}, DataType::kBOOL));
    CHECK(!plugin->supportsFormatCombination(5, io.data(), 5, 2));
    // k = 4: U, weight_c, bias, c0 | h, c_last; c0 at position 3.
    auto k4 = makeSru(4, 1, 4);
    std::vector<nvinfer1::DynamicPluginTensorDesc> k4io(6, dynDesc(desc({2}, DataType::kHALF)));
    CHECK(!k4->supportsFormatCombination(3, k4io.data(), 4, 2));
    k4io[3] = dynDesc(desc({2}, DataType::kFLOAT));
    CHECK(k4->supportsFormatCombination(3, k4io.data(), 4, 2));
}

TEST_CASE("CausalLinearAttention format combinations")
{
    auto plugin = makeAttention();
    for (int32_t nbInputs = 3; nbInputs <= 5; ++nbInputs)
    {
        int32_t const n = nbInputs + 3;
        for (DataType first : kAllTypes)
        {
            for (int32_t pos = 0; pos < n; ++pos)
            {
                for (DataType t : kAllTypes)
                {
                    std::vector<nvinfer1::DynamicPluginTensorDesc> io(n, dynDesc(desc({1, 1, 1, 1}, first)));
                    DataType const type = pos == 0 ? first : t;
                    io[pos] = dynDesc(desc({1, 1, 1, 1}, type));
                    bool const activation = pos < 3 || pos == nbInputs;
                    bool const expected = activation ? isActivation(type) && type == first : type == DataType::kFLOAT;
                    CHECK_EQ(plugin->supportsFormatCombination(pos, io.data(), nbInputs, 3), expected);
                }
            }
        }
    }
    std::vector<nvinfer1::DynamicPluginTensorDesc> io(8, dynDesc(desc({1}, DataType::kFLOAT)));
    CHECK(!plugin->supportsFormatCombination(0, io.data(), 6, 3));
    CHECK(!plugin->supportsFormatCombination(0, io.data(), 5, 2));
    io[0].desc.format = nvinfer1::TensorFormat::kHWC8;
    CHECK(!plugin->supportsFormatCombination(0, io.data(), 5, 3));
}

TEST_CASE("SRUScan aliases c_last to c0 once the inputs are known")
{
    auto plugin = makeSru(4);
    CHECK_EQ(plugin->getAliasedInput(1), -1);
    std::vector<nvinfer1::DynamicPluginTensorDesc> in(6, dynDesc(desc({2}, DataType::kFLOAT)));
    std::vector<nvinfer1::DynamicPluginTensorDesc> out(2, dynDesc(desc({2}, DataType::kFLOAT)));
    REQUIRE(plugin->configurePlugin(in.data(), 6, out.data(), 2) == 0);
    CHECK_EQ(plugin->getAliasedInput(0), -1);
    CHECK_EQ(plugin->getAliasedInput(1), 4);
    CHECK_EQ(plugin->getAliasedInput(2), -1);
    CHECK(plugin->configurePlugin(in.data(), 3, out.data(), 2) != 0);
    auto k4 = makeSru(4, 2, 4);
    REQUIRE(k4->configurePlugin(in.data(), 4, out.data(), 2) == 0);
    CHECK_EQ(k4->getAliasedInput(1), 3);
    std::unique_ptr<nvinfer1::IPluginV3> copy(k4->clone());
    auto* build = static_cast<nvinfer1::IPluginV3OneBuildV2*>(
        copy->getCapabilityInterface(nvinfer1::PluginCapabilityType::kBUILD));
    CHECK_EQ(build->getAliasedInput(1), 3);
}

TEST_CASE("CausalLinearAttention configurePlugin decides S0 / z0 by rank; workspace from the kernels")
{
    auto plugin = makeAttention();
    auto const q = dynDesc(desc({2, 4, 16, 32}, DataType::kHALF));
    auto const S = dynDesc(desc({2, 4, 32, 32}, DataType::kFLOAT));
    auto const z = dynDesc(desc({2, 4, 32}, DataType::kFLOAT));
    std::vector<nvinfer1::DynamicPluginTensorDesc> out{q, S, z};
    std::vector<nvinfer1::DynamicPluginTensorDesc> withZ{q, q, q, z};
    REQUIRE(plugin->configurePlugin(withZ.data(), 4, out.data(), 3) == 0);
    CHECK_EQ(plugin->getAliasedInput(1), -1);
    CHECK_EQ(plugin->getAliasedInput(2), 3);
    std::vector<nvinfer1::DynamicPluginTensorDesc> withS{q, q, q, S};
    REQUIRE(plugin->configurePlugin(withS.data(), 4, out.data(), 3) == 0);
    CHECK_EQ(plugin->getAliasedInput(1), 3);
    CHECK_EQ(plugin->getAliasedInput(2), -1);
    std::vector<nvinfer1::DynamicPluginTensorDesc> bad{q, q, q, dynDesc(desc({2}, DataType::kFLOAT))};
    CHECK(plugin->configurePlugin(bad.data(), 4, out.data(), 3) != 0);
    kernelsDouble().workspaceSize = 12345;
    CHECK_EQ(plugin->getWorkspaceSize(withS.data(), 4, out.data(), 3), size_t{12345});
    std::vector<nvinfer1::DynamicPluginTensorDesc> badType{dynDesc(desc({2, 4, 16, 32}, DataType::kINT8)), q, q};
    CHECK_EQ(plugin->getWorkspaceSize(badType.data(), 3, out.data(), 3), size_t{0});
    auto sru = makeSru(4);
    CHECK_EQ(sru->getWorkspaceSize(withS.data(), 4, out.data(), 2), size_t{0});
}
