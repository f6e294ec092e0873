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

namespace
{

//! getOutputShapes of `plugin` on `in` fails and logs a line containing every one of `messages`.
void checkShapeRefused(nvinfer1::IPluginV3OneBuild& plugin, std::vector<nvinfer1::DimsExprs> const& in,
    int32_t nbOutputs, std::vector<std::string> const& messages, nvinfer1::IExprBuilder& b, char const* what)
{
    std::vector<nvinfer1::DimsExprs> out(static_cast<size_t>(nbOutputs));
    takeLoggedMessages();
    RNNX_CHECK_OR(
        plugin.getOutputShapes(in.data(), static_cast<int32_t>(in.size()), nullptr, 0, out.data(), nbOutputs, b) != 0,
        what, );
    std::string const logged = takeLoggedMessages();
    for (std::string const& message : messages)
    {
        RNNX_CHECK_OR(logged.find(message) != std::string::npos,
            (std::string(what) + ": " + message + " in: " + logged).c_str(), );
    }
}

} // namespace

TEST_CASE("LinearRecurrence output shapes: (B, T, H_q*d_v) and past_state's shape, GQA, every rule")
{
    for (char const* rule : {"linear", "gated", "delta", "gated_delta"})
    {
        for (int32_t group : {1, 4})
        {
            int32_t const Hkv = 2;
            int32_t const Hq = Hkv * group;
            auto plugin = makeRecurrence(Hq, Hkv, rule);
            REQUIRE(plugin != nullptr);
            TestExprBuilder b;
            auto const* B = b.symbol("B");
            auto const* T = b.symbol("T");
            auto const q = exprs({B, T, b.constant(Hq * 64)});
            auto const k = exprs({B, T, b.constant(Hkv * 64)});
            // value's last extent symbolic: the output's is H_q * (it / H_kv), or value's itself when H_q = H_kv.
            auto const v = exprs({B, T, b.symbol("V")});
            auto const S = exprs({B, b.constant(Hkv), b.constant(64), b.symbol("dv")});
            auto const decay = exprs({B, T, b.constant(Hkv)});
            auto const beta = exprs({B, T, b.constant(1)});
            auto const mask = exprs({B, T});
            std::vector<nvinfer1::DimsExprs> const all{q, k, v, S, decay, beta, mask};
            nvinfer1::DimsExprs out[2]{};
            REQUIRE(plugin->getOutputShapes(all.data(), 7, nullptr, 0, out, 2, b) == 0);
            CHECK_EQ(text(out[0]), group == 1 ? "(B, T, V)" : "(B, T, (8*(V/2)))");
            CHECK_EQ(text(out[1]), "(B, 2, 64, dv)");
            // All constant: folded.
            auto const vc = exprs({B, T, b.constant(Hkv * 32)});
            std::vector<nvinfer1::DimsExprs> const constant{
                q, k, vc, exprs({B, b.constant(Hkv), b.constant(64), b.constant(32)}), decay, beta, mask};
            REQUIRE(plugin->getOutputShapes(constant.data(), 7, nullptr, 0, out, 2, b) == 0);
            CHECK_EQ(text(out[0]), "(B, T, " + std::to_string(Hq * 32) + ")");
            // Any other input count is refused, naming the count.
            for (int32_t n : {5, 6, 8})
            {
                std::vector<nvinfer1::DimsExprs> other(static_cast<size_t>(n), mask);
                for (int32_t i = 0; i < n && i < 7; ++i)
                {
                    other[static_cast<size_t>(i)] = all[static_cast<size_t>(i)];
                }
                takeLoggedMessages();
                CHECK(plugin->getOutputShapes(other.data(), n, nullptr, 0, out, 2, b) != 0);
                std::string const logged = takeLoggedMessages();
                CHECK(logged.find("LinearRecurrence 'layer': expected exactly 7 inputs") != std::string::npos);
                CHECK(logged.find("got " + std::to_string(n)) != std::string::npos);
            }
            CHECK(plugin->getOutputShapes(all.data(), 7, nullptr, 0, out, 1, b) != 0);
        }
    }
    CHECK_EQ(makeRecurrence()->getNbOutputs(), 2);
}

TEST_CASE("LinearRecurrence getOutputShapes refuses constant extents that disagree, naming tensor and expectation")
{
    TestExprBuilder b;
    auto const c = [&](int64_t v) { return b.constant(v); };
    // B and T constant (2, 5), so that every extent can disagree at build time; H_q 4, H_kv 2, d_k 16, d_v 8.
    auto const* B = c(2);
    auto const* T = c(5);
    auto const base = [&]() -> std::vector<nvinfer1::DimsExprs>
    {
        return {exprs({B, T, c(64)}), exprs({B, T, c(32)}), exprs({B, T, c(16)}), exprs({B, c(2), c(16), c(8)}),
            exprs({B, T, c(2)}), exprs({B, T, c(2)}), exprs({B, T})};
    };
    auto plugin = makeRecurrence(4, 2, "gated_delta");
    REQUIRE(plugin != nullptr);
    nvinfer1::DimsExprs out[2]{};
    {
        auto ok = base();
        CHECK_EQ(plugin->getOutputShapes(ok.data(), 7, nullptr, 0, out, 2, b), 0);
        ok[4] = exprs({B, T, c(32)}); // per key dim
        ok[5] = exprs({B, T, c(1)});  // one beta for every head
        CHECK_EQ(plugin->getOutputShapes(ok.data(), 7, nullptr, 0, out, 2, b), 0);
        CHECK_EQ(text(out[0]), "(2, 5, 32)");
    }
    struct Bad
    {
        char const* what;
        int32_t input;
        nvinfer1::DimsExprs dims;
        char const* message;
    };
    std::vector<Bad> const bad{
        {"query not a multiple of q_num_heads", 0, exprs({B, T, c(66)}),
            "query (input 0) is (2, 5, 66), expected (B, T, q_num_heads*d_k)"},
        {"query 2-D", 0, exprs({B, c(64)}), "query (input 0) is (2, 64)"},
        {"key of another d_k", 1, exprs({B, T, c(48)}), "key (input 1) is (2, 5, 48), expected (B, T, 2*d_k = 32)"},
        {"key of another batch", 1, exprs({c(3), T, c(32)}), "key (input 1) is (3, 5, 32)"},
        {"value not a multiple of kv_num_heads", 2, exprs({B, T, c(15)}),
            "value (input 2) is (2, 5, 15), expected (B, T, 2*d_v)"},
        {"value of another T", 2, exprs({B, c(7), c(16)}), "value (input 2)"},
        {"past_state with H_q heads", 3, exprs({B, c(4), c(16), c(8)}),
            "past_state (input 3) is (2, 4, 16, 8), expected (B, 2, 16, 8)"},
        {"past_state of another d_v", 3, exprs({B, c(2), c(16), c(4)}), "past_state (input 3)"},
        {"past_state of another d_k", 3, exprs({B, c(2), c(8), c(8)}), "past_state (input 3)"},
        {"past_state 3-D", 3, exprs({B, c(2), c(128)}), "past_state (input 3)"},
        {"decay neither per head nor per key", 4, exprs({B, T, c(3)}),
            "decay (input 4) is (2, 5, 3), expected (B, T, 2) per head or (B, T, 2*d_k = 32) per key dim"},
        {"decay of H_q heads", 4, exprs({B, T, c(4)}), "decay (input 4)"},
        {"beta of H_q heads", 5, exprs({B, T, c(4)}), "beta (input 5) is (2, 5, 4), expected (B, T, 2) or (B, T, 1)"},
        {"beta 2-D", 5, exprs({B, T}), "beta (input 5)"},
        {"mask (T, B)", 6, exprs({T, B}), "mask_pad (input 6)"},
        {"mask 3-D", 6, exprs({B, T, c(1)}), "mask_pad (input 6)"},
    };
    for (Bad const& x : bad)
    {
        auto in = base();
        in[static_cast<size_t>(x.input)] = x.dims;
        checkShapeRefused(*plugin, in, 2,
            {x.message, "LinearRecurrence 'layer': ", "q_num_heads 4, kv_num_heads 2, update_rule gated_delta"}, b,
            x.what);
    }
    // Head dims above 256 are refused, naming the dim.
    std::vector<nvinfer1::DimsExprs> wide{exprs({B, T, c(4 * 512)}), exprs({B, T, c(2 * 512)}), exprs({B, T, c(16)}),
        exprs({B, c(2), c(512), c(8)}), exprs({B, T, c(2)}), exprs({B, T, c(2)}), exprs({B, T})};
    checkShapeRefused(*plugin, wide, 2, {"head dim d_k = 512 exceeds 256"}, b, "d_k 512");
    std::vector<nvinfer1::DimsExprs> wideV{exprs({B, T, c(64)}), exprs({B, T, c(32)}), exprs({B, T, c(2 * 300)}),
        exprs({B, c(2), c(16), c(300)}), exprs({B, T, c(2)}), exprs({B, T, c(2)}), exprs({B, T})};
    checkShapeRefused(*plugin, wideV, 2, {"head dim d_v = 300 exceeds 256"}, b, "d_v 300");
    // d_k only from the state (query and key symbolic) is still limited.
    std::vector<nvinfer1::DimsExprs> stateOnly{exprs({B, T, b.symbol("Q")}), exprs({B, T, b.symbol("K")}),
        exprs({B, T, c(16)}), exprs({B, c(2), c(257), c(8)}), exprs({B, T, c(2)}), exprs({B, T, c(2)}), exprs({B, T})};
    checkShapeRefused(*plugin, stateOnly, 2, {"past_state (input 3)", "d_k = 257 exceeds 256"}, b, "state d_k 257");
    // Rules that do not read decay / beta take dummies of any shape (the exporter's zeros).
    auto linear = makeRecurrence(4, 2, "linear");
    auto dummies = base();
    dummies[4] = exprs({c(1)});
    dummies[5] = exprs({B, T, c(7), c(3)});
    CHECK_EQ(linear->getOutputShapes(dummies.data(), 7, nullptr, 0, out, 2, b), 0);
    auto gated = makeRecurrence(4, 2, "gated");
    CHECK_EQ(gated->getOutputShapes(dummies.data(), 7, nullptr, 0, out, 2, b) == 0, false);
    dummies[4] = exprs({B, T, c(32)});
    CHECK_EQ(gated->getOutputShapes(dummies.data(), 7, nullptr, 0, out, 2, b), 0);
    auto delta = makeRecurrence(4, 2, "delta");
    CHECK(delta->getOutputShapes(dummies.data(), 7, nullptr, 0, out, 2, b) != 0);
    dummies[4] = exprs({c(5)});
    dummies[5] = exprs({B, T, c(2)});
    CHECK_EQ(delta->getOutputShapes(dummies.data(), 7, nullptr, 0, out, 2, b), 0);
    takeLoggedMessages();
}

TEST_CASE("CausalConvWithState output shapes and refused constant extents")
{
    auto plugin = makeConv("silu");
    REQUIRE(plugin != nullptr);
    TestExprBuilder b;
    auto const* B = b.symbol("B");
    auto const* T = b.symbol("T");
    auto const c = [&](int64_t v) { return b.constant(v); };
    // For the refusals B and T are constants (2, 6), so that every extent can disagree at build time.
    auto const base = [&]() -> std::vector<nvinfer1::DimsExprs>
    {
        return {exprs({c(2), c(16), c(6)}), exprs({c(16), c(1), c(4)}), exprs({c(16)}), exprs({c(2), c(16), c(3)}),
            exprs({c(2), c(6)})};
    };
    auto const symbolicBase = [&]() -> std::vector<nvinfer1::DimsExprs>
    {
        return {
            exprs({B, c(16), T}), exprs({c(16), c(1), c(4)}), exprs({c(16)}), exprs({B, c(16), c(3)}), exprs({B, T})};
    };
    auto all = symbolicBase();
    nvinfer1::DimsExprs out[2]{};
    REQUIRE(plugin->getOutputShapes(all.data(), 5, nullptr, 0, out, 2, b) == 0);
    CHECK_EQ(text(out[0]), "(B, 16, T)");
    CHECK_EQ(text(out[1]), "(B, 16, 3)");
    // Symbolic channels and kernel: nothing to refuse yet.
    auto const* C = b.symbol("C");
    auto const* K = b.symbol("K");
    std::vector<nvinfer1::DimsExprs> symbolic{
        exprs({B, C, T}), exprs({C, c(1), K}), exprs({C}), exprs({B, C, b.symbol("K1")}), exprs({B, T})};
    REQUIRE(plugin->getOutputShapes(symbolic.data(), 5, nullptr, 0, out, 2, b) == 0);
    CHECK_EQ(text(out[0]), "(B, C, T)");
    CHECK_EQ(text(out[1]), "(B, C, K1)");
    // K = 1: an empty state (B, C, 0).
    auto k1 = symbolicBase();
    k1[1] = exprs({c(16), c(1), c(1)});
    k1[3] = exprs({B, c(16), c(0)});
    CHECK_EQ(plugin->getOutputShapes(k1.data(), 5, nullptr, 0, out, 2, b), 0);
    struct Bad
    {
        char const* what;
        int32_t input;
        nvinfer1::DimsExprs dims;
        char const* message;
    };
    std::vector<Bad> const bad{
        {"input 2-D", 0, exprs({c(2), c(6)}), "input (input 0) is (2, 6), expected (B, C, T)"},
        {"weight of other channels", 1, exprs({c(8), c(1), c(4)}),
            "weight (input 1) is (8, 1, 4), expected (C, 1, K) with input's C and K >= 1"},
        {"weight (C, 2, K)", 1, exprs({c(16), c(2), c(4)}), "weight (input 1)"},
        {"weight K = 0", 1, exprs({c(16), c(1), c(0)}), "weight (input 1)"},
        {"weight 2-D", 1, exprs({c(16), c(4)}), "weight (input 1)"},
        {"bias of other channels", 2, exprs({c(8)}), "bias (input 2) is (8), expected (C) with input's C"},
        {"bias 2-D", 2, exprs({c(16), c(1)}), "bias (input 2)"},
        {"state of K taps", 3, exprs({c(2), c(16), c(4)}), "past_state (input 3) is (2, 16, 4), expected (B, C, K-1)"},
        {"state of other channels", 3, exprs({c(2), c(8), c(3)}), "past_state (input 3)"},
        {"state of another batch", 3, exprs({c(5), c(16), c(3)}), "past_state (input 3)"},
        {"mask (T, B)", 4, exprs({c(6), c(2)}), "mask_pad (input 4)"},
        {"mask of other length", 4, exprs({c(2), c(9)}), "mask_pad (input 4) is (2, 9), expected (B, T)"},
    };
    for (Bad const& x : bad)
    {
        auto in = base();
        in[static_cast<size_t>(x.input)] = x.dims;
        checkShapeRefused(*plugin, in, 2, {x.message, "CausalConvWithState 'layer': "}, b, x.what);
    }
    for (int32_t n : {3, 4, 6})
    {
        std::vector<nvinfer1::DimsExprs> other(static_cast<size_t>(n), all[0]);
        takeLoggedMessages();
        CHECK(plugin->getOutputShapes(other.data(), n, nullptr, 0, out, 2, b) != 0);
        CHECK(takeLoggedMessages().find("CausalConvWithState 'layer': expected exactly 5 inputs") != std::string::npos);
    }
    CHECK_EQ(plugin->getNbOutputs(), 2);
}

TEST_CASE("LinearRecurrence and CausalConvWithState output types; format combinations; no aliasing, no workspace")
{
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        auto recurrence = makeRecurrence();
        DataType in[7] = {t, t, t, DataType::kFLOAT, t, t, DataType::kINT32};
        DataType out[2]{};
        REQUIRE(recurrence->getOutputDataTypes(out, 2, in, 7) == 0);
        CHECK(out[0] == t && out[1] == DataType::kFLOAT);
        CHECK(recurrence->getOutputDataTypes(out, 2, in, 6) != 0);
        auto conv = makeConv();
        DataType convIn[5] = {t, t, t, DataType::kFLOAT, DataType::kINT32};
        REQUIRE(conv->getOutputDataTypes(out, 2, convIn, 5) == 0);
        CHECK(out[0] == t && out[1] == DataType::kFLOAT);
        CHECK(conv->getOutputDataTypes(out, 1, convIn, 5) != 0);
    }
    int32_t checked = 0;
    // query, key, value, past_state, decay, beta, mask_pad | output, present_state; decay and beta are activations
    // whether read or dummies.
    std::vector<Role> const recurrenceRoles{kAct, kAct, kAct, kState, kAct, kAct, kMask, kAct, kState};
    for (char const* rule : {"linear", "gated", "delta", "gated_delta"})
    {
        auto plugin = makeRecurrence(2, 1, rule);
        checked += checkFormatCombinations(*plugin, recurrenceRoles, 7, {1, 1, 2});
        CHECK_EQ(buildInterface(*plugin), "PLUGIN_V3ONE_BUILD 1.0");
    }
    // input, weight, bias, past_state, mask_pad | output, present_state
    std::vector<Role> const convRoles{kAct, kAct, kAct, kState, kMask, kAct, kState};
    for (char const* activation : {"none", "silu"})
    {
        auto plugin = makeConv(activation);
        checked += checkFormatCombinations(*plugin, convRoles, 5, {1, 1, 2});
        CHECK_EQ(buildInterface(*plugin), "PLUGIN_V3ONE_BUILD 1.0");
    }
    CHECK(checked > 4000);
    // Other counts: refused at every position.
    auto recurrence = makeRecurrence();
    auto conv = makeConv();
    std::vector<nvinfer1::DynamicPluginTensorDesc> io(10, dynDesc(desc({1}, DataType::kFLOAT)));
    for (int32_t pos = 0; pos < 8; ++pos)
    {
        CHECK(!recurrence->supportsFormatCombination(pos, io.data(), 6, 2));
        CHECK(!conv->supportsFormatCombination(pos, io.data(), 6, 2));
    }
    CHECK(!recurrence->supportsFormatCombination(0, io.data(), 7, 3));
    // configurePlugin: exactly 7 / 5 inputs; no workspace.
    std::vector<nvinfer1::DynamicPluginTensorDesc> in(7, dynDesc(desc({2, 3, 8}, DataType::kHALF)));
    std::vector<nvinfer1::DynamicPluginTensorDesc> out(2, dynDesc(desc({2, 3, 8}, DataType::kHALF)));
    CHECK_EQ(recurrence->configurePlugin(in.data(), 7, out.data(), 2), 0);
    CHECK_EQ(conv->configurePlugin(in.data(), 5, out.data(), 2), 0);
    takeLoggedMessages();
    CHECK(recurrence->configurePlugin(in.data(), 6, out.data(), 2) != 0);
    CHECK(takeLoggedMessages().find("LinearRecurrence 'layer': expected exactly 7 inputs") != std::string::npos);
    CHECK(conv->configurePlugin(in.data(), 7, out.data(), 2) != 0);
    CHECK(takeLoggedMessages().find("CausalConvWithState 'layer': expected exactly 5 inputs") != std::string::npos);
    CHECK_EQ(recurrence->getWorkspaceSize(in.data(), 7, out.data(), 2), size_t{0});
    CHECK_EQ(conv->getWorkspaceSize(in.data(), 5, out.data(), 2), size_t{0});
}
