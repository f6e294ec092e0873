/*
 * CausalLinearAttention plugin: build-phase behaviour: output shapes for symbolic dimensions (through the IExprBuilder
 * test double), output types, the format-combination matrix, configurePlugin, the workspace size, no aliasing.
 */
#include "buildTestUtils.h"
#include "kernelsDouble.h"
#include "testHarness.h"
#include "testUtils.h"
#include "causal_linear_attention/tests/causalLinearAttentionTestUtils.h"
#include "linear_recurrence/cuda/linear_recurrence.h"

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;

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
        checkInputCountsRefused(
            *plugin, all, {3, 4, 5}, 3, "CausalLinearAttention 'layer': expected exactly 6 inputs", b);
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

TEST_CASE("CausalLinearAttention refuses a head dim E above the kernels' limit, at build time and at a shape change")
{
    // num_heads 2, E = 257 (the linear recurrence's kernels, which this op runs on, take E <= 256); M = 8.
    int32_t const E = kernels::kLINEAR_RECURRENCE_MAX_DIM_K + 1;
    auto plugin = makeAttention(2);
    REQUIRE(plugin != nullptr);
    TestExprBuilder b;
    auto const* B = b.constant(2);
    auto const* L = b.symbol("L");
    std::vector<nvinfer1::DimsExprs> in{exprs({B, L, b.constant(2 * E)}), exprs({B, L, b.constant(2 * E)}),
        exprs({B, L, b.constant(16)}), exprs({B, b.constant(2), b.constant(E), b.constant(8)}),
        exprs({B, b.constant(2), b.constant(E)}), exprs({B, L})};
    nvinfer1::DimsExprs out[3]{};
    takeLoggedMessages();
    CHECK(plugin->getOutputShapes(in.data(), 6, nullptr, 0, out, 3, b) != 0);
    CHECK(takeLoggedMessages().find("head dim E = 257 exceeds 256") != std::string::npos);
    // E = 256 passes.
    in[0] = in[1] = exprs({B, L, b.constant(2 * (E - 1))});
    in[3] = exprs({B, b.constant(2), b.constant(E - 1), b.constant(8)});
    in[4] = exprs({B, b.constant(2), b.constant(E - 1)});
    CHECK(plugin->getOutputShapes(in.data(), 6, nullptr, 0, out, 3, b) == 0);
    // Concrete shapes (symbolic at build time) are checked before enqueue.
    auto const q = desc({2, 5, 2 * E}, DataType::kFLOAT);
    auto const v = desc({2, 5, 16}, DataType::kFLOAT);
    auto const S = desc({2, 2, E, 8}, DataType::kFLOAT);
    auto const z = desc({2, 2, E}, DataType::kFLOAT);
    auto const mask = desc({2, 5}, DataType::kINT32);
    std::vector<nvinfer1::PluginTensorDesc> all{q, q, v, S, z, mask}, outs{v, S, z};
    takeLoggedMessages();
    CHECK(plugin->onShapeChange(all.data(), 6, outs.data(), 3) != 0);
    CHECK(takeLoggedMessages().find("head dim E = 257 exceeds 256") != std::string::npos);
}

TEST_CASE("CausalLinearAttention output data types: activations follow the first input, state is fp32")
{
    auto attention = makeAttention();
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        DataType out[3]{};
        DataType qkv[6] = {t, t, t, DataType::kFLOAT, DataType::kFLOAT, DataType::kBOOL};
        REQUIRE(attention->getOutputDataTypes(out, 3, qkv, 6) == 0);
        CHECK(out[0] == t && out[1] == DataType::kFLOAT && out[2] == DataType::kFLOAT);
        CHECK(attention->getOutputDataTypes(out, 2, qkv, 6) != 0);
        CHECK(attention->getOutputDataTypes(out, 3, qkv, 3) != 0);
        CHECK(attention->getOutputDataTypes(out, 3, qkv, 5) != 0);
    }
    CHECK_EQ(attention->getNbOutputs(), 3);
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
}
