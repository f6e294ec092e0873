/*
 * Build-phase behaviour: output shapes for symbolic dimensions (through the IExprBuilder test double), output
 * types, the format-combination matrix, configurePlugin, the workspace size, and that the plugins declare no
 * aliasing (their build capability is IPluginV3OneBuild, which has no getAliasedInput).
 */
#include "exprBuilderDouble.h"
#include "kernelsDouble.h"
#include "testHarness.h"
#include "testUtils.h"

#include <functional>
#include <string>
#include <vector>

using namespace rnnx;

namespace
{

//! The build capability's interface info as TensorRT reads it: "PLUGIN_V3ONE_BUILD" version 1 is
//! IPluginV3OneBuild (no getAliasedInput: outputs never alias inputs); version 2 would be IPluginV3OneBuildV2.
std::string buildInterface(nvinfer1::IPluginV3& plugin)
{
    auto* capability = plugin.getCapabilityInterface(nvinfer1::PluginCapabilityType::kBUILD);
    if (capability == nullptr)
    {
        return "none";
    }
    nvinfer1::InterfaceInfo const info = capability->getInterfaceInfo();
    return std::string(info.kind) + " " + std::to_string(info.major) + "." + std::to_string(info.minor);
}

} // namespace
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

//! One input of a plugin replaced by a shape getOutputShapes must refuse, and why.
struct BadInput
{
    char const* what;
    int32_t input;
    nvinfer1::DimsExprs dims;
};

//! Each of `bad`, put in place of its input in `base(input)` (six inputs), makes getOutputShapes fail and log a
//! line containing `message`.
void checkRefused(nvinfer1::IPluginV3OneBuild& plugin, std::vector<BadInput> const& bad,
    std::function<std::vector<nvinfer1::DimsExprs>(int32_t)> const& base, int32_t nbOutputs, std::string const& message,
    nvinfer1::IExprBuilder& b)
{
    std::vector<nvinfer1::DimsExprs> out(static_cast<size_t>(nbOutputs));
    for (BadInput const& c : bad)
    {
        std::vector<nvinfer1::DimsExprs> in = base(c.input);
        in[static_cast<size_t>(c.input)] = c.dims;
        takeLoggedMessages();
        RNNX_CHECK_OR(plugin.getOutputShapes(in.data(), 6, nullptr, 0, out.data(), nbOutputs, b) != 0, c.what, );
        RNNX_CHECK_OR(takeLoggedMessages().find(message) != std::string::npos, c.what, );
    }
}

} // namespace

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
        in.push_back(exprs({L, B})); // spare, for the too-many check
        nvinfer1::DimsExprs out[2]{};
        REQUIRE(plugin->getOutputShapes(in.data(), 6, nullptr, 0, out, 2, b) == 0);
        CHECK_EQ(text(out[0]), "(L, B, " + std::to_string(width) + ")");
        CHECK_EQ(text(out[1]), "(B, " + std::to_string(width) + ")");
        CHECK(out[1].d[0] == B);
        // Any other count is refused, whatever the attributes: the old 4 / 5 input layouts included.
        for (int32_t n : {0, 3, 4, 5, 7})
        {
            takeLoggedMessages();
            CHECK(plugin->getOutputShapes(in.data(), n, nullptr, 0, out, 2, b) != 0);
            std::string const logged = takeLoggedMessages();
            CHECK(logged.find("SRUScan 'layer': expected exactly 6 inputs") != std::string::npos);
            CHECK(logged.find("got " + std::to_string(n)) != std::string::npos);
        }
        CHECK(plugin->getOutputShapes(in.data(), 6, nullptr, 0, out, 1, b) != 0);
    }
}

TEST_CASE("CausalLinearAttention output shapes: six inputs q, k, v, S0, z0, mask_pad at fixed positions")
{
    // Heads packed: q, k (d0, d1, H*E), v (d0, d1, H*M); out is v's shape in either layout.
    for (int32_t timeMajor : {0, 1})
    {
        auto plugin = makeAttention(4, 1e-6F, timeMajor);
        REQUIRE(plugin != nullptr);
        TestExprBuilder b;
        auto const* B = b.symbol("B");
        auto const* L = b.symbol("L");
        auto const* H = b.constant(4);
        auto const* E = b.constant(64);
        auto const* HE = b.constant(4 * 64);
        auto const* HM = b.symbol("HM");
        auto const* M = b.symbol("M");
        auto const* d0 = timeMajor != 0 ? L : B;
        auto const* d1 = timeMajor != 0 ? B : L;
        auto const q = exprs({d0, d1, HE});
        auto const v = exprs({d0, d1, HM});
        auto const S0 = exprs({B, H, E, M});
        auto const z0 = exprs({B, H, E});
        auto const mask = exprs({d0, d1});
        std::vector<nvinfer1::DimsExprs> const all{q, q, v, S0, z0, mask};
        nvinfer1::DimsExprs out[3]{};
        REQUIRE(plugin->getOutputShapes(all.data(), 6, nullptr, 0, out, 3, b) == 0);
        CHECK_EQ(text(out[0]), timeMajor != 0 ? "(L, B, HM)" : "(B, L, HM)");
        CHECK_EQ(text(out[1]), "(B, 4, 64, M)");
        CHECK_EQ(text(out[2]), "(B, 4, 64)");
        // The old layouts (no state: 3 inputs; one state tensor: 4; no mask: 5) are refused, naming the count.
        for (std::vector<nvinfer1::DimsExprs> const& old : {std::vector<nvinfer1::DimsExprs>{q, q, v},
                 std::vector<nvinfer1::DimsExprs>{q, q, v, S0}, std::vector<nvinfer1::DimsExprs>{q, q, v, S0, z0}})
        {
            takeLoggedMessages();
            auto const n = static_cast<int32_t>(old.size());
            CHECK(plugin->getOutputShapes(old.data(), n, nullptr, 0, out, 3, b) != 0);
            std::string const logged = takeLoggedMessages();
            CHECK(logged.find("CausalLinearAttention 'layer': expected exactly 6 inputs") != std::string::npos);
            CHECK(logged.find("got " + std::to_string(n)) != std::string::npos);
        }
        // Wrong ranks: the state swapped, the old (B, H, L, E) q, a 1-D mask.
        std::vector<nvinfer1::DimsExprs> swapped{q, q, v, z0, S0, mask};
        CHECK(plugin->getOutputShapes(swapped.data(), 6, nullptr, 0, out, 3, b) != 0);
        std::vector<nvinfer1::DimsExprs> unpacked{
            exprs({B, H, L, E}), exprs({B, H, L, E}), exprs({B, H, L, M}), S0, z0, mask};
        CHECK(plugin->getOutputShapes(unpacked.data(), 6, nullptr, 0, out, 3, b) != 0);
        std::vector<nvinfer1::DimsExprs> flatMask{q, q, v, S0, z0, exprs({B})};
        CHECK(plugin->getOutputShapes(flatMask.data(), 6, nullptr, 0, out, 3, b) != 0);
        CHECK(plugin->getOutputShapes(all.data(), 6, nullptr, 0, out, 2, b) != 0);
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

TEST_CASE("CausalLinearAttention getOutputShapes refuses constant extents that disagree")
{
    // num_heads 4: q, k (B, L, 4*16), v (B, L, 4*8), S0 (B, 4, 16, 8), z0 (B, 4, 16), mask_pad (B, L).
    for (int32_t timeMajor : {0, 1})
    {
        auto plugin = makeAttention(4, 1e-6F, timeMajor);
        REQUIRE(plugin != nullptr);
        TestExprBuilder b;
        auto const* B = b.constant(2);
        auto const* L = b.symbol("L");
        auto const* d0 = timeMajor != 0 ? L : B;
        auto const* d1 = timeMajor != 0 ? B : L;
        auto const good = [&]
        {
            return std::vector<nvinfer1::DimsExprs>{exprs({d0, d1, b.constant(64)}), exprs({d0, d1, b.constant(64)}),
                exprs({d0, d1, b.constant(32)}), exprs({B, b.constant(4), b.constant(16), b.constant(8)}),
                exprs({B, b.constant(4), b.constant(16)}), exprs({d0, d1})};
        };
        nvinfer1::DimsExprs out[3]{};
        REQUIRE(plugin->getOutputShapes(good().data(), 6, nullptr, 0, out, 3, b) == 0);
        // A symbolic head dim in the state passes (checked at onShapeChange).
        std::vector<nvinfer1::DimsExprs> symbolic = good();
        symbolic[3] = exprs({b.symbol("B"), b.constant(4), b.symbol("E"), b.symbol("M")});
        CHECK(plugin->getOutputShapes(symbolic.data(), 6, nullptr, 0, out, 3, b) == 0);
        std::vector<BadInput> const bad{
            {"q's last extent is not a multiple of num_heads", 0, exprs({d0, d1, b.constant(66)})},
            {"k's last extent is not q's", 1, exprs({d0, d1, b.constant(32)})},
            {"v's last extent is not a multiple of num_heads", 2, exprs({d0, d1, b.constant(30)})},
            {"v's batch is not q's", 2,
                timeMajor != 0 ? exprs({d0, b.constant(3), b.constant(32)})
                               : exprs({b.constant(3), d1, b.constant(32)})},
            {"S0's heads are not num_heads", 3, exprs({B, b.constant(2), b.constant(16), b.constant(8)})},
            {"S0's E is not q's head dim", 3, exprs({B, b.constant(4), b.constant(8), b.constant(8)})},
            {"S0's M is not v's head dim", 3, exprs({B, b.constant(4), b.constant(16), b.constant(16)})},
            {"S0's batch is not q's", 3, exprs({b.constant(5), b.constant(4), b.constant(16), b.constant(8)})},
            {"z0's E is not q's head dim", 4, exprs({B, b.constant(4), b.constant(32)})},
            {"z0's heads are not num_heads", 4, exprs({B, b.constant(1), b.constant(16)})},
            {"mask_pad's batch is not q's", 5,
                timeMajor != 0 ? exprs({d0, b.constant(3)}) : exprs({b.constant(3), d1})},
        };
        checkRefused(*plugin, bad, [&](int32_t) { return good(); }, 3, "do not match num_heads 4", b);
    }
}

TEST_CASE("output data types: activations follow the first input, state is fp32")
{
    auto sru = makeSru(4);
    auto attention = makeAttention();
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        DataType in[6] = {t, t, t, t, DataType::kFLOAT, DataType::kBOOL};
        DataType out[3]{};
        REQUIRE(sru->getOutputDataTypes(out, 2, in, 6) == 0);
        CHECK(out[0] == t && out[1] == DataType::kFLOAT);
        CHECK(sru->getOutputDataTypes(out, 2, in, 5) != 0);
        CHECK(sru->getOutputDataTypes(out, 2, in, 3) != 0);
        DataType qkv[6] = {t, t, t, DataType::kFLOAT, DataType::kFLOAT, DataType::kBOOL};
        REQUIRE(attention->getOutputDataTypes(out, 3, qkv, 6) == 0);
        CHECK(out[0] == t && out[1] == DataType::kFLOAT && out[2] == DataType::kFLOAT);
        CHECK(attention->getOutputDataTypes(out, 2, qkv, 6) != 0);
        CHECK(attention->getOutputDataTypes(out, 3, qkv, 3) != 0);
        CHECK(attention->getOutputDataTypes(out, 3, qkv, 5) != 0);
    }
    CHECK_EQ(sru->getNbOutputs(), 2);
    CHECK_EQ(attention->getNbOutputs(), 3);
}

//! The roles of a plugin's tensors (inputs then outputs) for its format-combination rules.
enum Role
{
    kAct,
    kState,
    kMask
};

//! Every (first activation type, position, type at that position) combination of ``plugin``'s tensors, all linear and
//! of shape ``dims``: supported exactly when the position's role allows the type (activations fp32 / fp16 / bf16 and
//! all like the first, states fp32, masks int32 only: TensorRT has no bool / uint8 plugin tensors, "DataType:kBOOL and
//! DataType::kUINT8 are not supported", PluginTensorDesc::type in NvInferRuntimePlugin.h), and never in kCHW32.
//! Returns how many were checked.
template <typename Plugin>
int32_t checkFormatCombinations(
    Plugin& plugin, std::vector<Role> const& roles, int32_t nbInputs, std::vector<int64_t> const& dims)
{
    int32_t const nbOutputs = static_cast<int32_t>(roles.size()) - nbInputs;
    int32_t checked = 0;
    for (DataType first : kAllTypes)
    {
        for (size_t pos = 0; pos < roles.size(); ++pos)
        {
            for (DataType t : kAllTypes)
            {
                DataType const type = pos == 0 ? first : t;
                std::vector<nvinfer1::DynamicPluginTensorDesc> io(roles.size(), dynDesc(desc(dims, first)));
                io[pos] = dynDesc(desc(dims, type));
                bool expected = false;
                switch (roles[pos])
                {
                case kAct: expected = isActivation(type) && type == first; break;
                case kState: expected = type == DataType::kFLOAT; break;
                case kMask: expected = type == DataType::kINT32; break;
                }
                CHECK_EQ(plugin.supportsFormatCombination(static_cast<int32_t>(pos), io.data(), nbInputs, nbOutputs),
                    expected);
                io[pos].desc.format = nvinfer1::TensorFormat::kCHW32;
                CHECK(!plugin.supportsFormatCombination(static_cast<int32_t>(pos), io.data(), nbInputs, nbOutputs));
                ++checked;
            }
        }
    }
    return checked;
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

TEST_CASE("CausalLinearAttention format combinations: linear; q, k, v, out alike; state fp32; mask int32 only")
{
    // q, k, v, S0, z0, mask_pad | out, S_last, z_last
    std::vector<Role> const roles{kAct, kAct, kAct, kState, kState, kMask, kAct, kState, kState};
    int32_t const nbInputs = 6;
    int32_t checked = 0;
    for (int32_t timeMajor : {0, 1})
    {
        auto plugin = makeAttention(2, 1e-6F, timeMajor);
        checked += checkFormatCombinations(*plugin, roles, nbInputs, {1, 1, 2});
    }
    CHECK(checked > 2000);
    auto plugin = makeAttention();
    std::vector<nvinfer1::DynamicPluginTensorDesc> io(10, dynDesc(desc({1}, DataType::kFLOAT)));
    CHECK(!plugin->supportsFormatCombination(0, io.data(), 7, 3));
    CHECK(!plugin->supportsFormatCombination(9, io.data(), 6, 3));
    CHECK(!plugin->supportsFormatCombination(-1, io.data(), 6, 3));
    // The old layouts without state, with one state tensor or without the mask: refused at every position.
    for (int32_t n : {3, 4, 5})
    {
        for (int32_t pos = 0; pos < n + 3; ++pos)
        {
            CHECK(!plugin->supportsFormatCombination(pos, io.data(), n, 3));
        }
    }
    CHECK(!plugin->supportsFormatCombination(0, io.data(), 6, 2));
    // The node as the exporter emits it: fp16 q, k, v, fp32 state, an int32 (B, L) mask.
    std::vector<nvinfer1::DynamicPluginTensorDesc> node{dynDesc(desc({2, 5, 64}, DataType::kHALF)),
        dynDesc(desc({2, 5, 64}, DataType::kHALF)), dynDesc(desc({2, 5, 32}, DataType::kHALF)),
        dynDesc(desc({2, 2, 32, 16}, DataType::kFLOAT)), dynDesc(desc({2, 2, 32}, DataType::kFLOAT)),
        dynDesc(desc({2, 5}, DataType::kINT32)), dynDesc(desc({2, 5, 32}, DataType::kHALF)),
        dynDesc(desc({2, 2, 32, 16}, DataType::kFLOAT)), dynDesc(desc({2, 2, 32}, DataType::kFLOAT))};
    for (int32_t pos = 0; pos < 9; ++pos)
    {
        CHECK(plugin->supportsFormatCombination(pos, node.data(), 6, 3));
    }
    for (DataType wrongMask : {DataType::kHALF, DataType::kBOOL, DataType::kUINT8, DataType::kINT64})
    {
        node[5] = dynDesc(desc({2, 5}, wrongMask));
        CHECK(!plugin->supportsFormatCombination(5, node.data(), 6, 3));
    }
    node[0].desc.format = nvinfer1::TensorFormat::kHWC8;
    CHECK(!plugin->supportsFormatCombination(0, node.data(), 6, 3));
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

TEST_CASE("CausalLinearAttention configurePlugin takes exactly q, k, v, S0, z0, mask_pad; asks for no workspace")
{
    auto plugin = makeAttention(4);
    auto const q = dynDesc(desc({2, 16, 4 * 32}, DataType::kHALF));
    auto const S = dynDesc(desc({2, 4, 32, 32}, DataType::kFLOAT));
    auto const z = dynDesc(desc({2, 4, 32}, DataType::kFLOAT));
    auto const mask = dynDesc(desc({2, 16}, DataType::kINT32));
    std::vector<nvinfer1::DynamicPluginTensorDesc> out{q, S, z};
    std::vector<nvinfer1::DynamicPluginTensorDesc> all{q, q, q, S, z, mask};
    REQUIRE(plugin->configurePlugin(all.data(), 6, out.data(), 3) == 0);
    // S_last / z_last get their own buffers: the build capability has no getAliasedInput.
    CHECK_EQ(buildInterface(*plugin), "PLUGIN_V3ONE_BUILD 1.0");
    std::unique_ptr<nvinfer1::IPluginV3> copy(plugin->clone());
    CHECK_EQ(buildInterface(*copy), "PLUGIN_V3ONE_BUILD 1.0");
    for (int32_t n : {3, 4, 5, 7})
    {
        takeLoggedMessages();
        CHECK(plugin->configurePlugin(all.data(), n, out.data(), 3) != 0);
        std::string const logged = takeLoggedMessages();
        CHECK(logged.find("CausalLinearAttention 'layer': expected exactly 6 inputs") != std::string::npos);
        CHECK(logged.find("got " + std::to_string(n)) != std::string::npos);
    }
    // No workspace, whatever the kernels would report: they need one only to copy z0 when z_last aliases it, and
    // TensorRT gives z_last its own buffer (no in-place I/O declared). enqueue passes the kernel no workspace.
    kernelsDouble().workspaceSize = 12345;
    CHECK_EQ(plugin->getWorkspaceSize(all.data(), 6, out.data(), 3), size_t{0});
    auto sru = makeSru(4);
    CHECK_EQ(sru->getWorkspaceSize(all.data(), 6, out.data(), 2), size_t{0});
}
