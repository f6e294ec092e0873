/*
 * CausalConvWithState plugin: its creator: name, field list, createPlugin with every accepted field type, errors for
 * bad fields, the serialise -> deserialise round trip (the op-agnostic field tests are plugins/tests/fieldTests.cpp).
 */
#include "testHarness.h"
#include "testUtils.h"
#include "causal_conv_with_state/tests/causalConvWithStateTestUtils.h"

#include <cmath>
#include <limits>
#include <random>

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::PluginFieldType;
using nvinfer1::TensorRTPhase;

TEST_CASE("CausalConvWithState creator: name, field list in the record's order, kinds")
{
    plugin::CausalConvWithStatePluginCreator conv;
    checkCreatorIdentity(conv, "CausalConvWithState");
    // name, reported type, required, default (string fields: the default string).
    checkCreatorFields(
        conv, plugin::CausalConvWithStatePlugin::fieldTable(), {{"activation", PluginFieldType::kCHAR, false, "none"}});
}

TEST_CASE("CausalConvWithState createPlugin reads activation none / silu / swish; default none")
{
    plugin::CausalConvWithStatePluginCreator creator;
    char const* const names[] = {"none", "silu", "swish"};
    for (int32_t a = 0; a < 3; ++a)
    {
        Fields f = convFields(names[a]);
        f.str("plugin_version", "2").str("plugin_namespace", "rnnx");
        auto p = createAs<plugin::CausalConvWithStatePlugin>(creator, f.get());
        REQUIRE(p != nullptr);
        CHECK_EQ(p->parameters().activation, a);
    }
    Fields none;
    auto d = createAs<plugin::CausalConvWithStatePlugin>(creator, none.get());
    REQUIRE(d != nullptr);
    CHECK_EQ(d->parameters().activation, 0);
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("CausalConvWithState refuses bad, missing, unknown and wrongly typed fields")
{
    plugin::CausalConvWithStatePluginCreator conv;
    // Missing: every field when deserialising.
    Fields noActivation;
    expectRejected(conv, noActivation, TensorRTPhase::kRUNTIME, __FILE__, __LINE__);
    // A string field in another type, or malformed; an unknown field; a field twice.
    int32_t const one = 1;
    std::vector<Fields> bad;
    for (PluginFieldType type : {PluginFieldType::kINT32, PluginFieldType::kINT64, PluginFieldType::kFLOAT32,
             PluginFieldType::kINT8, PluginFieldType::kUNKNOWN})
    {
        bad.push_back(Fields().raw("activation", &one, type, 1));
    }
    bad.push_back(Fields().raw("activation", nullptr, PluginFieldType::kCHAR, 4));
    bad.push_back(Fields().raw("activation", "silu", PluginFieldType::kCHAR, -1));
    bad.push_back(convFields("silu").i32("kernel_size", 4));
    bad.push_back(convFields("silu").str("activation", "none"));
    expectEachRejected(conv, bad, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    expectRejectedWith(conv, convFields("gelu"),
        "CausalConvWithState: field 'activation' is 'gelu', expected one of none | silu | swish", __FILE__, __LINE__);
}

TEST_CASE("CausalConvWithState: serialise -> deserialise round trip, clone")
{
    plugin::CausalConvWithStatePluginCreator conv;
    for (char const* activation : {"none", "silu", "swish"})
    {
        auto built = makeConv(activation);
        REQUIRE(built != nullptr);
        nvinfer1::PluginFieldCollection const* serialized = built->getFieldsToSerialize();
        REQUIRE(serialized != nullptr);
        REQUIRE(serialized->nbFields == 1);
        CHECK(serialized->fields[0].type == PluginFieldType::kCHAR);
        CHECK_EQ(std::string(static_cast<char const*>(serialized->fields[0].data),
                     static_cast<size_t>(serialized->fields[0].length)),
            std::string(activation));
        auto restored = createAs<plugin::CausalConvWithStatePlugin>(conv, serialized, TensorRTPhase::kRUNTIME);
        REQUIRE(restored != nullptr);
        CHECK_EQ(restored->parameters().activation, built->parameters().activation);
        std::unique_ptr<nvinfer1::IPluginV3> cloned(built->clone());
        REQUIRE(cloned != nullptr);
        CHECK_EQ(static_cast<plugin::CausalConvWithStatePlugin*>(cloned.get())->parameters().activation,
            built->parameters().activation);
    }
    CHECK_EQ(takeLoggedErrors(), 0);
}

// What the op-agnostic tests need of this plugin (testMain --fields, the fuzz tests).
RNNX_PLUGIN_TEST_PROBE(
    "CausalConvWithState", &plugin::CausalConvWithStatePlugin::fieldTable,
    [] { return std::unique_ptr<nvinfer1::IPluginV3>(makeConv()); },
    [](std::mt19937& rng)
    {
        char const* const activations[] = {"none", "silu", "swish"};
        return std::unique_ptr<nvinfer1::IPluginV3>(makeConv(activations[rng() % 3]));
    },
    [](nvinfer1::IPluginV3& made, nvinfer1::IPluginV3* restored)
    {
        auto const& p = static_cast<plugin::CausalConvWithStatePlugin&>(made).parameters();
        CHECK(p.activation >= 0 && p.activation < 3);
        if (restored != nullptr)
        {
            CHECK(static_cast<plugin::CausalConvWithStatePlugin*>(restored)->parameters().activation == p.activation);
        }
    });
