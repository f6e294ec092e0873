/*
 * CausalLinearAttention plugin: its creator: name, field list, createPlugin with every accepted field type, errors for
 * bad fields, the serialise -> deserialise round trip (the op-agnostic field tests are plugins/tests/fieldTests.cpp).
 */
#include "testHarness.h"
#include "testUtils.h"
#include "causal_linear_attention/tests/causalLinearAttentionTestUtils.h"

#include <cmath>
#include <limits>
#include <random>

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::PluginFieldType;
using nvinfer1::TensorRTPhase;

TEST_CASE("CausalLinearAttention creator field list follows the field table")
{
    plugin::CausalLinearAttentionPluginCreator attention;
    checkCreatorFields(attention, plugin::CausalLinearAttentionPlugin::fieldTable());
    std::vector<std::string> names;
    for (auto const& row : plugin::CausalLinearAttentionPlugin::fieldTable())
    {
        names.emplace_back(row.name);
    }
    CHECK((names == std::vector<std::string>{"eps", "num_heads", "time_major"}));
    CHECK(plugin::CausalLinearAttentionPlugin::fieldTable()[1].required);
}

TEST_CASE("CausalLinearAttention createPlugin reads num_heads, time_major and eps in the parser's types")
{
    plugin::CausalLinearAttentionPluginCreator creator;
    Fields f = attentionFields(8, 1e-3F, 1);
    f.str("plugin_version", "2").str("plugin_namespace", "rnnx");
    auto p = createAs<plugin::CausalLinearAttentionPlugin>(creator, f.get());
    REQUIRE(p != nullptr);
    CHECK_EQ(p->parameters().numHeads, 8);
    CHECK_EQ(p->parameters().timeMajor, 1);
    CHECK_EQ(p->parameters().eps, 1e-3F);
    Fields wide;
    wide.i64("num_heads", 4).i64("time_major", 0).f64("eps", 0.25);
    auto q = createAs<plugin::CausalLinearAttentionPlugin>(creator, wide.get());
    REQUIRE(q != nullptr);
    CHECK(q->parameters().numHeads == 4 && q->parameters().timeMajor == 0 && q->parameters().eps == 0.25F);
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("CausalLinearAttention build phase fills spec defaults for optional fields")
{
    plugin::CausalLinearAttentionPluginCreator attention;
    Fields heads;
    heads.i32("num_heads", 3);
    auto a = createAs<plugin::CausalLinearAttentionPlugin>(attention, heads.get());
    REQUIRE(a != nullptr);
    CHECK_EQ(a->parameters().eps, 1e-6F);
    CHECK_EQ(a->parameters().numHeads, 3);
    CHECK_EQ(a->parameters().timeMajor, 0);
}

TEST_CASE("CausalLinearAttention missing fields are errors: num_heads always, every field when deserialising")
{
    plugin::CausalLinearAttentionPluginCreator attention;
    Fields none;
    expectRejected(attention, none, TensorRTPhase::kRUNTIME, __FILE__, __LINE__);
    expectRejected(attention, none, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    Fields noHeads;
    noHeads.f32("eps", 1e-6F).i32("time_major", 1);
    expectRejected(attention, noHeads, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    Fields headsOnly;
    headsOnly.i32("num_heads", 2);
    expectRejected(attention, headsOnly, TensorRTPhase::kRUNTIME, __FILE__, __LINE__);
    takeLoggedErrors();
    CHECK(attention.createPlugin("x", nullptr, TensorRTPhase::kBUILD) == nullptr);
    CHECK(takeLoggedErrors() >= 1);
}

TEST_CASE("CausalLinearAttention unknown, duplicated and malformed fields are errors")
{
    plugin::CausalLinearAttentionPluginCreator attention;
    Fields noName = attentionFields(2, 1e-3F);
    noName.raw(nullptr, nullptr, PluginFieldType::kINT32, 1);
    expectRejected(attention, noName, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    Fields noData;
    noData.i32("num_heads", 2).raw("eps", nullptr, PluginFieldType::kFLOAT32, 1);
    expectRejected(attention, noData, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    float const two[] = {1.F, 2.F};
    Fields twoValues;
    twoValues.i32("num_heads", 2).raw("eps", two, PluginFieldType::kFLOAT32, 2);
    expectRejected(attention, twoValues, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    Fields zeroLength;
    zeroLength.i32("num_heads", 2).raw("eps", two, PluginFieldType::kFLOAT32, 0);
    expectRejected(attention, zeroLength, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    nvinfer1::PluginFieldCollection negative{-1, nullptr};
    takeLoggedErrors();
    CHECK(attention.createPlugin("x", &negative, TensorRTPhase::kBUILD) == nullptr);
    nvinfer1::PluginFieldCollection dangling{3, nullptr};
    CHECK(attention.createPlugin("x", &dangling, TensorRTPhase::kBUILD) == nullptr);
    CHECK_EQ(takeLoggedErrors(), 2);
    // Version 1 nodes (no mask) do not reach this plugin.
    Fields oldAttention = attentionFields(2);
    oldAttention.str("plugin_version", "1");
    expectRejected(attention, oldAttention, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    Fields twiceHeads = attentionFields(2);
    twiceHeads.i32("num_heads", 2);
    expectRejected(attention, twiceHeads, TensorRTPhase::kBUILD, __FILE__, __LINE__);
}

TEST_CASE("CausalLinearAttention wrongly typed fields are errors")
{
    plugin::CausalLinearAttentionPluginCreator attention;
    int64_t const zero = 0;
    for (PluginFieldType type : {PluginFieldType::kINT32, PluginFieldType::kINT64, PluginFieldType::kFLOAT16,
             PluginFieldType::kBF16, PluginFieldType::kCHAR, PluginFieldType::kINT8})
    {
        Fields f;
        f.i32("num_heads", 2).raw("eps", &zero, type, 1);
        expectRejected(attention, f, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    }
    double const two = 2.0;
    for (PluginFieldType type : {PluginFieldType::kFLOAT32, PluginFieldType::kFLOAT64, PluginFieldType::kCHAR})
    {
        Fields f;
        f.raw("num_heads", &two, type, 1);
        expectRejected(attention, f, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    }
}

TEST_CASE("CausalLinearAttention out-of-range field values are errors")
{
    plugin::CausalLinearAttentionPluginCreator attention;
    for (float eps : {-1.F, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
    {
        Fields f = attentionFields(2, eps);
        expectRejected(attention, f, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    }
    for (auto f :
        {attentionFields(0), attentionFields(-2), attentionFields(2, 1e-6F, 2), attentionFields(2, 1e-6F, -1)})
    {
        expectRejected(attention, f, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    }
    Fields hugeHeads;
    hugeHeads.i64("num_heads", int64_t{1} << 33);
    expectRejected(attention, hugeHeads, TensorRTPhase::kBUILD, __FILE__, __LINE__);
}

TEST_CASE("CausalLinearAttention serialise -> deserialise round trip keeps every field")
{
    plugin::CausalLinearAttentionPluginCreator attentionCreator;
    for (int32_t timeMajor : {0, 1})
    {
        auto built = makeAttention(5, 3.5e-4F, timeMajor);
        REQUIRE(built != nullptr);
        nvinfer1::PluginFieldCollection const* serialized = built->getFieldsToSerialize();
        REQUIRE(serialized != nullptr);
        CHECK_EQ(serialized->nbFields, 3);
        auto restored =
            createAs<plugin::CausalLinearAttentionPlugin>(attentionCreator, serialized, TensorRTPhase::kRUNTIME);
        REQUIRE(restored != nullptr);
        CHECK_EQ(restored->parameters().eps, 3.5e-4F);
        CHECK_EQ(restored->parameters().numHeads, 5);
        CHECK_EQ(restored->parameters().timeMajor, timeMajor);
    }
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("CausalLinearAttention clone copies the parameters")
{
    auto attention = makeAttention(6, 0.125F, 1);
    std::unique_ptr<nvinfer1::IPluginV3> a(attention->clone());
    REQUIRE(a != nullptr);
    auto const& copied = static_cast<plugin::CausalLinearAttentionPlugin*>(a.get())->parameters();
    CHECK(copied.eps == 0.125F && copied.numHeads == 6 && copied.timeMajor == 1);
    auto* core =
        static_cast<nvinfer1::IPluginV3OneCore*>(a->getCapabilityInterface(nvinfer1::PluginCapabilityType::kCORE));
    CHECK_EQ(std::string(core->getPluginName()), "CausalLinearAttention");
}

// What the op-agnostic tests need of this plugin (testMain --fields, the fuzz tests).
RNNX_PLUGIN_TEST_PROBE(
    "CausalLinearAttention", &plugin::CausalLinearAttentionPlugin::fieldTable,
    [] { return std::unique_ptr<nvinfer1::IPluginV3>(makeAttention()); },
    [](std::mt19937& rng)
    {
        return std::unique_ptr<nvinfer1::IPluginV3>(
            makeAttention(1 + static_cast<int32_t>(rng() % 16), 1e-5F, static_cast<int32_t>(rng() % 2)));
    },
    [](nvinfer1::IPluginV3& made, nvinfer1::IPluginV3* restored)
    {
        auto const& p = static_cast<plugin::CausalLinearAttentionPlugin&>(made).parameters();
        CHECK(p.eps >= 0.F && std::isfinite(p.eps) && p.numHeads > 0 && (p.timeMajor == 0 || p.timeMajor == 1));
        if (restored != nullptr)
        {
            auto const& r = static_cast<plugin::CausalLinearAttentionPlugin*>(restored)->parameters();
            CHECK(r.eps == p.eps && r.numHeads == p.numHeads && r.timeMajor == p.timeMajor);
        }
    });
