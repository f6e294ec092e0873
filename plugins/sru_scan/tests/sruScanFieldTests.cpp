/*
 * SRUScan plugin: its creator: name, field list, createPlugin with every accepted field type, errors for bad fields,
 * the serialise -> deserialise round trip (the op-agnostic field tests are plugins/tests/fieldTests.cpp).
 */
#include "testHarness.h"
#include "testUtils.h"
#include "sru_scan/tests/sruScanTestUtils.h"

#include <cmath>
#include <limits>
#include <random>

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::PluginFieldType;
using nvinfer1::TensorRTPhase;

TEST_CASE("SRUScan creator field list follows the field table")
{
    plugin::SruScanPluginCreator sru;
    checkCreatorIdentity(sru, "SRUScan");
    // name, reported type, required, default (string fields only).
    checkCreatorFields(sru, plugin::SruScanPlugin::fieldTable(),
        {{"hidden_size", PluginFieldType::kINT32, true, ""}, {"num_directions", PluginFieldType::kINT32, false, ""},
            {"num_matrices", PluginFieldType::kINT32, false, ""}, {"has_skip_term", PluginFieldType::kINT32, false, ""},
            {"use_tanh", PluginFieldType::kINT32, false, ""}, {"scale_x", PluginFieldType::kFLOAT32, false, ""}});
}

TEST_CASE("SRUScan createPlugin reads kINT32 / kFLOAT32 fields")
{
    plugin::SruScanPluginCreator creator;
    Fields f = sruFields(16, 2, 4, 0, 1, 0.5F);
    auto p = createAs<plugin::SruScanPlugin>(creator, f.get());
    REQUIRE(p != nullptr);
    CHECK_EQ(p->parameters(), (plugin::SruScanParameters{16, 2, 4, 0, 1, 0.5F}));
    CHECK_EQ(std::string(p->getPluginName()), "SRUScan");
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("SRUScan createPlugin reads kINT64 / kFLOAT64 fields and the plugin_version / plugin_namespace pair")
{
    plugin::SruScanPluginCreator creator;
    Fields f;
    f.i64("hidden_size", 8)
        .i64("num_directions", 1)
        .i64("num_matrices", 3)
        .i64("has_skip_term", 1)
        .i64("use_tanh", 0)
        .f64("scale_x", 2.0)
        .str("plugin_version", "2")
        .str("plugin_namespace", "rnnx");
    auto p = createAs<plugin::SruScanPlugin>(creator, f.get());
    REQUIRE(p != nullptr);
    CHECK_EQ(p->parameters().hiddenSize, 8);
    CHECK_EQ(p->parameters().scaleX, 2.F);
    Fields g;
    g.i32("hidden_size", 8).raw("plugin_version", "2", PluginFieldType::kCHAR, 2);
    CHECK(createAs<plugin::SruScanPlugin>(creator, g.get()) != nullptr);
}

TEST_CASE("SRUScan build phase fills spec defaults for optional fields")
{
    CHECK_EQ((parametersFrom<plugin::SruScanPlugin, plugin::SruScanPluginCreator>(Fields().i32("hidden_size", 4))),
        (plugin::SruScanParameters{4, 1, 3, 1, 0, 1.F}));
}

TEST_CASE("SRUScan missing fields are errors: hidden_size always, every field when deserialising")
{
    plugin::SruScanPluginCreator sru;
    Fields noHidden;
    noHidden.i32("num_directions", 1);
    expectRejected(sru, noHidden, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    Fields partial;
    partial.i32("hidden_size", 4);
    expectRejected(sru, partial, TensorRTPhase::kRUNTIME, __FILE__, __LINE__);
    takeLoggedErrors();
    CHECK(sru.createPlugin("x", nullptr, TensorRTPhase::kBUILD) == nullptr);
    CHECK(takeLoggedErrors() >= 1);
}

TEST_CASE("SRUScan unknown, duplicated and malformed fields are errors")
{
    plugin::SruScanPluginCreator sru;
    // An unknown field, a field twice; a version 1 node (heads apart, no mask: it does not reach this plugin), another
    // namespace, the version as an int.
    expectEachRejected(sru,
        {sruFields(4).i32("hidden", 4), sruFields(4).i32("use_tanh", 1), sruFields(4).str("plugin_version", "1"),
            sruFields(4).str("plugin_namespace", ""), sruFields(4).i32("plugin_version", 1)},
        TensorRTPhase::kBUILD, __FILE__, __LINE__);
}

TEST_CASE("SRUScan wrongly typed fields are errors")
{
    plugin::SruScanPluginCreator sru;
    int64_t const zero = 0;
    for (PluginFieldType type : {PluginFieldType::kFLOAT16, PluginFieldType::kFLOAT32, PluginFieldType::kFLOAT64,
             PluginFieldType::kINT8, PluginFieldType::kINT16, PluginFieldType::kCHAR, PluginFieldType::kDIMS,
             PluginFieldType::kUNKNOWN, PluginFieldType::kBF16, PluginFieldType::kFP8, PluginFieldType::kINT4,
             PluginFieldType::kFP4, static_cast<PluginFieldType>(99)})
    {
        Fields f;
        f.i32("hidden_size", 4).raw("num_matrices", &zero, type, 1);
        expectRejected(sru, f, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    }
}

TEST_CASE("SRUScan out-of-range field values are errors")
{
    plugin::SruScanPluginCreator sru;
    for (auto f : {sruFields(0), sruFields(-3), sruFields(4, 3), sruFields(4, 0), sruFields(4, 1, 2),
             sruFields(4, 1, 5), sruFields(4, 1, 3, 2), sruFields(4, 1, 3, 1, -1),
             sruFields(4, 1, 3, 1, 0, std::numeric_limits<float>::quiet_NaN()),
             sruFields(4, 1, 3, 1, 0, std::numeric_limits<float>::infinity()),
             sruFields(std::numeric_limits<int32_t>::max(), 2, 4)})
    {
        expectRejected(sru, f, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    }
    Fields big;
    big.i64("hidden_size", int64_t{1} << 40);
    expectRejected(sru, big, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    Fields hugeDouble;
    hugeDouble.i32("hidden_size", 4).f64("scale_x", 1e300);
    expectRejected(sru, hugeDouble, TensorRTPhase::kBUILD, __FILE__, __LINE__);
}

TEST_CASE("SRUScan serialise -> deserialise round trip keeps every field")
{
    plugin::SruScanPluginCreator sruCreator;
    for (auto const& params :
        std::vector<std::vector<float>>{{16, 1, 3, 1, 0, 1.F}, {7, 2, 4, 0, 1, 0.25F}, {1, 2, 3, 0, 0, -3.5F}})
    {
        Fields f =
            sruFields(static_cast<int32_t>(params[0]), static_cast<int32_t>(params[1]), static_cast<int32_t>(params[2]),
                static_cast<int32_t>(params[3]), static_cast<int32_t>(params[4]), params[5]);
        auto built = createAs<plugin::SruScanPlugin>(sruCreator, f.get());
        REQUIRE(built != nullptr);
        nvinfer1::PluginFieldCollection const* serialized = built->getFieldsToSerialize();
        REQUIRE(serialized != nullptr);
        CHECK_EQ(serialized->nbFields, 6);
        auto restored = createAs<plugin::SruScanPlugin>(sruCreator, serialized, TensorRTPhase::kRUNTIME);
        REQUIRE(restored != nullptr);
        CHECK_EQ(restored->parameters(), built->parameters());
    }
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("SRUScan clone and attachToContext copy the parameters; capability interfaces")
{
    auto sru = makeSru(12, 2, 4, 1, 1, 1.5F);
    REQUIRE(sru != nullptr);
    std::unique_ptr<nvinfer1::IPluginV3> cloned(sru->clone());
    std::unique_ptr<nvinfer1::IPluginV3> attached(sru->attachToContext(nullptr));
    for (nvinfer1::IPluginV3* p : {cloned.get(), attached.get()})
    {
        REQUIRE(p != nullptr);
        auto const& q = static_cast<plugin::SruScanPlugin*>(p)->parameters();
        CHECK(q.hiddenSize == 12 && q.numDirections == 2 && q.numMatrices == 4 && q.useTanh == 1 && q.scaleX == 1.5F);
        auto* core =
            static_cast<nvinfer1::IPluginV3OneCore*>(p->getCapabilityInterface(nvinfer1::PluginCapabilityType::kCORE));
        REQUIRE(core != nullptr);
        CHECK_EQ(std::string(core->getPluginName()), "SRUScan");
        CHECK_EQ(std::string(core->getPluginNamespace()), "rnnx");
        CHECK_EQ(std::string(core->getPluginVersion()), "2");
        auto* build = p->getCapabilityInterface(nvinfer1::PluginCapabilityType::kBUILD);
        REQUIRE(build != nullptr);
        CHECK_EQ(std::string(build->getInterfaceInfo().kind), "PLUGIN_V3ONE_BUILD");
        // Version 1 (IPluginV3OneBuild): no getAliasedInput, outputs never alias inputs.
        CHECK_EQ(build->getInterfaceInfo().major, 1);
        auto* runtime = p->getCapabilityInterface(nvinfer1::PluginCapabilityType::kRUNTIME);
        REQUIRE(runtime != nullptr);
        CHECK_EQ(std::string(runtime->getInterfaceInfo().kind), "PLUGIN_V3ONE_RUNTIME");
    }
}

// What the op-agnostic tests need of this plugin (testMain --fields, the fuzz tests).
RNNX_PLUGIN_TEST_PROBE(
    "SRUScan", &plugin::SruScanPlugin::fieldTable, [] { return std::unique_ptr<nvinfer1::IPluginV3>(makeSru(4)); },
    [](std::mt19937& rng)
    {
        return std::unique_ptr<nvinfer1::IPluginV3>(makeSru(1 + static_cast<int32_t>(rng() % 64),
            1 + static_cast<int32_t>(rng() % 2), 3 + static_cast<int32_t>(rng() % 2), static_cast<int32_t>(rng() % 2),
            static_cast<int32_t>(rng() % 2), 0.5F));
    },
    [](nvinfer1::IPluginV3& made, nvinfer1::IPluginV3* restored)
    {
        auto const& p = static_cast<plugin::SruScanPlugin&>(made).parameters();
        CHECK(p.hiddenSize > 0 && (p.numDirections == 1 || p.numDirections == 2)
            && (p.numMatrices == 3 || p.numMatrices == 4) && (p.hasSkipTerm == 0 || p.hasSkipTerm == 1)
            && (p.useTanh == 0 || p.useTanh == 1) && std::isfinite(p.scaleX));
        if (restored != nullptr)
        {
            CHECK_EQ(static_cast<plugin::SruScanPlugin*>(restored)->parameters(), p);
        }
    });
