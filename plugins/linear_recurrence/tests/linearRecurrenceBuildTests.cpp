/*
 * LinearRecurrence plugin: build-phase behaviour: output shapes for symbolic dimensions (through the IExprBuilder test
 * double), output types, the format-combination matrix, configurePlugin, the workspace size, no aliasing.
 */
#include "buildTestUtils.h"
#include "kernelsDouble.h"
#include "testHarness.h"
#include "testUtils.h"
#include "linear_recurrence/tests/linearRecurrenceTestUtils.h"

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;

namespace
{

//! The seven inputs with B, T, value's last extent V and the state's d_v symbolic, d_k 64: query (B, T, H_q*64), key
//! (B, T, keyHeads*64), value (B, T, V), past_state (B, H_kv, 64, dv), decay (B, T, H_kv), beta (B, T, betaWidth),
//! mask_pad (B, T).
std::vector<nvinfer1::DimsExprs> symbolicInputs(
    TestExprBuilder& b, int32_t Hq, int32_t keyHeads, int32_t Hkv, int32_t betaWidth)
{
    auto const* B = b.symbol("B");
    auto const* T = b.symbol("T");
    return {exprs({B, T, b.constant(Hq * 64)}), exprs({B, T, b.constant(keyHeads * 64)}), exprs({B, T, b.symbol("V")}),
        exprs({B, b.constant(Hkv), b.constant(64), b.symbol("dv")}), exprs({B, T, b.constant(Hkv)}),
        exprs({B, T, b.constant(betaWidth)}), exprs({B, T})};
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
            // value's last extent symbolic: the output's is H_q * (it / H_kv), or value's itself when H_q = H_kv.
            std::vector<nvinfer1::DimsExprs> const all = symbolicInputs(b, Hq, Hkv, Hkv, 1);
            nvinfer1::DimsExprs out[2]{};
            REQUIRE(plugin->getOutputShapes(all.data(), 7, nullptr, 0, out, 2, b) == 0);
            CHECK_EQ(text(out[0]), group == 1 ? "(B, T, V)" : "(B, T, (8*(V/2)))");
            CHECK_EQ(text(out[1]), "(B, 2, 64, dv)");
            // All constant: folded.
            auto constant = all;
            constant[2] = exprs({all[0].d[0], all[0].d[1], b.constant(Hkv * 32)});
            constant[3] = exprs({all[0].d[0], b.constant(Hkv), b.constant(64), b.constant(32)});
            REQUIRE(plugin->getOutputShapes(constant.data(), 7, nullptr, 0, out, 2, b) == 0);
            CHECK_EQ(text(out[0]), "(B, T, " + std::to_string(Hq * 32) + ")");
            // Any other input count is refused, naming the count.
            checkInputCountsRefused(
                *plugin, all, {5, 6, 8}, 2, "LinearRecurrence 'layer': expected exactly 7 inputs", b);
            CHECK(plugin->getOutputShapes(all.data(), 7, nullptr, 0, out, 1, b) != 0);
        }
    }
    CHECK_EQ(makeRecurrence()->getNbOutputs(), 2);
}

TEST_CASE("LinearRecurrence output shapes, grouped value: key of H_q heads, output (B, T, H_kv*d_v)")
{
    for (int32_t qkL2Norm : {0, 1})
    {
        int32_t const Hq = 2;
        int32_t const Hkv = 6;
        auto plugin = makeRecurrence(Hq, Hkv, "gated_delta", 0.F, qkL2Norm);
        REQUIRE(plugin != nullptr);
        TestExprBuilder b;
        std::vector<nvinfer1::DimsExprs> in = symbolicInputs(b, Hq, Hq, Hkv, Hkv);
        auto const* B = in[0].d[0];
        auto const* T = in[0].d[1];
        nvinfer1::DimsExprs out[2]{};
        REQUIRE(plugin->getOutputShapes(in.data(), 7, nullptr, 0, out, 2, b) == 0);
        CHECK_EQ(text(out[0]), "(B, T, V)"); // one output head per state: value's extent
        CHECK_EQ(text(out[1]), "(B, 6, 64, dv)");
        in[2] = exprs({B, T, b.constant(Hkv * 32)});
        in[3] = exprs({B, b.constant(Hkv), b.constant(64), b.constant(32)});
        REQUIRE(plugin->getOutputShapes(in.data(), 7, nullptr, 0, out, 2, b) == 0);
        CHECK_EQ(text(out[0]), "(B, T, 192)");
        // key with H_kv heads (the grouped-query layout) is refused, naming it and the expected H_q heads.
        in[1] = exprs({B, T, b.constant(Hkv * 64)});
        checkShapeRefused(*plugin, in, 2,
            {"key (input 1) is (?, ?, 384), expected (B, T, 2*d_k = 128)", "q_num_heads 2, kv_num_heads 6",
                qkL2Norm != 0 ? "qk_l2_norm 1" : "qk_l2_norm 0"},
            b, "grouped value key of H_kv heads");
    }
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
    std::vector<RefusedInput> const bad{
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
    checkInputsRefused(*plugin, base(), bad, 2,
        {"LinearRecurrence 'layer': ", "q_num_heads 4, kv_num_heads 2, update_rule gated_delta"}, b);
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

TEST_CASE("LinearRecurrence output types; format combinations; no aliasing, no workspace")
{
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        auto recurrence = makeRecurrence();
        DataType in[7] = {t, t, t, DataType::kFLOAT, t, t, DataType::kINT32};
        DataType out[2]{};
        REQUIRE(recurrence->getOutputDataTypes(out, 2, in, 7) == 0);
        CHECK(out[0] == t && out[1] == DataType::kFLOAT);
        CHECK(recurrence->getOutputDataTypes(out, 2, in, 6) != 0);
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
    CHECK(checked > 4000);
    // Other counts: refused at every position.
    auto recurrence = makeRecurrence();
    checkCountRefusedAtEveryPosition(*recurrence, 6, 2);
    std::vector<nvinfer1::DynamicPluginTensorDesc> io(10, dynDesc(desc({1}, DataType::kFLOAT)));
    CHECK(!recurrence->supportsFormatCombination(0, io.data(), 7, 3));
    // configurePlugin: exactly 7 / 5 inputs; no workspace.
    checkConfigureCountNoWorkspace(*recurrence, 7, 2, 6, "LinearRecurrence 'layer': expected exactly 7 inputs");
}
