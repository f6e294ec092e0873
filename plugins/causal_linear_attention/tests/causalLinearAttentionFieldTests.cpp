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
    checkCreatorIdentity(attention, "CausalLinearAttention");
    // name, reported type, required, default (string fields only).
    checkCreatorFields(attention, plugin::CausalLinearAttentionPlugin::fieldTable(),
        {{"eps", PluginFieldType::kFLOAT32, false, ""}, {"num_heads", PluginFieldType::kINT32, true, ""},
            {"time_major", PluginFieldType::kINT32, false, ""}});
}

TEST_CASE("CausalLinearAttention createPlugin reads num_heads, time_major and eps in the parser's types")
{
    plugin::CausalLinearAttentionPluginCreator creator;
    struct Case
    {
        Fields fields;
        int32_t heads;
        int32_t timeMajor;
        float eps;
    };
    // The parser's types (with the plugin_version / plugin_namespace pair), then kINT64 / kFLOAT64.
    for (Case c :
        {Case{attentionFields(8, 1e-3F, 1).str("plugin_version", "2").str("plugin_namespace", "rnnx"), 8, 1, 1e-3F},
            Case{Fields().i64("num_heads", 4).i64("time_major", 0).f64("eps", 0.25), 4, 0, 0.25F}})
    {
        auto p = createAs<plugin::CausalLinearAttentionPlugin>(creator, c.fields.get());
        REQUIRE(p != nullptr);
        CHECK_EQ(p->parameters().numHeads, c.heads);
        CHECK_EQ(p->parameters().timeMajor, c.timeMajor);
        CHECK_EQ(p->parameters().eps, c.eps);
    }
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("CausalLinearAttention build phase fills spec defaults for optional fields")
{
    auto const p = parametersFrom<plugin::CausalLinearAttentionPlugin, plugin::CausalLinearAttentionPluginCreator>(
        Fields().i32("num_heads", 3));
    CHECK_EQ(p.eps, 1e-6F);
    CHECK_EQ(p.numHeads, 3);
    CHECK_EQ(p.timeMajor, 0);
}

TEST_CASE("CausalLinearAttention missing fields are errors: num_heads always, every field when deserialising")
{
    plugin::CausalLinearAttentionPluginCreator attention;
    expectEachRejected(
        attention, {Fields(), Fields().i32("num_heads", 2)}, TensorRTPhase::kRUNTIME, __FILE__, __LINE__);
    expectEachRejected(attention, {Fields(), Fields().f32("eps", 1e-6F).i32("time_major", 1)}, TensorRTPhase::kBUILD,
        __FILE__, __LINE__);
    takeLoggedErrors();
    CHECK(attention.createPlugin("x", nullptr, TensorRTPhase::kBUILD) == nullptr);
    CHECK(takeLoggedErrors() >= 1);
}

TEST_CASE("CausalLinearAttention unknown, duplicated and malformed fields are errors")
{
    plugin::CausalLinearAttentionPluginCreator attention;
    float const two[] = {1.F, 2.F};
    // No name, no data, two values, zero length; a version 1 node (no mask: it does not reach this plugin); a field
    // twice.
    expectEachRejected(attention,
        {attentionFields(2, 1e-3F).raw(nullptr, nullptr, PluginFieldType::kINT32, 1),
            Fields().i32("num_heads", 2).raw("eps", nullptr, PluginFieldType::kFLOAT32, 1),
            Fields().i32("num_heads", 2).raw("eps", two, PluginFieldType::kFLOAT32, 2),
            Fields().i32("num_heads", 2).raw("eps", two, PluginFieldType::kFLOAT32, 0),
            attentionFields(2).str("plugin_version", "1"), attentionFields(2).i32("num_heads", 2)},
        TensorRTPhase::kBUILD, __FILE__, __LINE__);
    nvinfer1::PluginFieldCollection negative{-1, nullptr};
    takeLoggedErrors();
    CHECK(attention.createPlugin("x", &negative, TensorRTPhase::kBUILD) == nullptr);
    nvinfer1::PluginFieldCollection dangling{3, nullptr};
    CHECK(attention.createPlugin("x", &dangling, TensorRTPhase::kBUILD) == nullptr);
    CHECK_EQ(takeLoggedErrors(), 2);
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
