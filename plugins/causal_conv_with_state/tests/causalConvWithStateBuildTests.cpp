/*
 * CausalConvWithState plugin: build-phase behaviour: output shapes for symbolic dimensions (through the IExprBuilder
 * test double), output types, the format-combination matrix, configurePlugin, the workspace size, no aliasing.
 */
#include "buildTestUtils.h"
#include "kernelsDouble.h"
#include "testHarness.h"
#include "testUtils.h"
#include "causal_conv_with_state/tests/causalConvWithStateTestUtils.h"

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;

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
    std::vector<RefusedInput> const bad{
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
    checkInputsRefused(*plugin, base(), bad, 2, {"CausalConvWithState 'layer': "}, b);
    checkInputCountsRefused(*plugin, all, {3, 4, 6}, 2, "CausalConvWithState 'layer': expected exactly 5 inputs", b);
    CHECK_EQ(plugin->getNbOutputs(), 2);
}

TEST_CASE("CausalConvWithState output types; format combinations; no aliasing, no workspace")
{
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        DataType out[2]{};
        auto conv = makeConv();
        DataType convIn[5] = {t, t, t, DataType::kFLOAT, DataType::kINT32};
        REQUIRE(conv->getOutputDataTypes(out, 2, convIn, 5) == 0);
        CHECK(out[0] == t && out[1] == DataType::kFLOAT);
        CHECK(conv->getOutputDataTypes(out, 1, convIn, 5) != 0);
    }
    int32_t checked = 0;
    // input, weight, bias, past_state, mask_pad | output, present_state
    std::vector<Role> const convRoles{kAct, kAct, kAct, kState, kMask, kAct, kState};
    for (char const* activation : {"none", "silu"})
    {
        auto plugin = makeConv(activation);
        checked += checkFormatCombinations(*plugin, convRoles, 5, {1, 1, 2});
        CHECK_EQ(buildInterface(*plugin), "PLUGIN_V3ONE_BUILD 1.0");
    }
    CHECK(checked > 1600);
    // Other counts: refused at every position.
    auto conv = makeConv();
    checkCountRefusedAtEveryPosition(*conv, 6, 2);
    // configurePlugin: exactly 5 inputs; no workspace.
    checkConfigureCountNoWorkspace(*conv, 5, 2, 7, "CausalConvWithState 'layer': expected exactly 5 inputs");
}
