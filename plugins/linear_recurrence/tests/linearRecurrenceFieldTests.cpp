/*
 * LinearRecurrence plugin: its creator: name, field list, createPlugin with every accepted field type, errors for bad
 * fields, the serialise -> deserialise round trip (the op-agnostic field tests are plugins/tests/fieldTests.cpp).
 */
#include "testHarness.h"
#include "testUtils.h"
#include "linear_recurrence/tests/linearRecurrenceTestUtils.h"

#include <cmath>
#include <limits>
#include <random>

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::PluginFieldType;
using nvinfer1::TensorRTPhase;

TEST_CASE("LinearRecurrence creator: name, field list in the record's order, kinds")
{
    plugin::LinearRecurrencePluginCreator recurrence;
    checkCreatorIdentity(recurrence, "LinearRecurrence");
    // name, reported type, required, default (string fields: the default string).
    checkCreatorFields(recurrence, plugin::LinearRecurrencePlugin::fieldTable(),
        {{"q_num_heads", PluginFieldType::kINT32, true, ""}, {"kv_num_heads", PluginFieldType::kINT32, true, ""},
            {"update_rule", PluginFieldType::kCHAR, false, "gated_delta"},
            {"scale", PluginFieldType::kFLOAT32, false, ""}, {"qk_l2_norm", PluginFieldType::kINT32, false, ""}});
    CHECK((plugin::LinearRecurrencePlugin::fieldTable()[2].choices
        == std::vector<char const*>(plugin::LinearRecurrencePlugin::updateRules())));
}

TEST_CASE("LinearRecurrence createPlugin reads the parser's types: update_rule as kCHAR, with or without a NUL")
{
    plugin::LinearRecurrencePluginCreator creator;
    char const* const rules[] = {"linear", "gated", "delta", "gated_delta"};
    for (int32_t r = 0; r < 4; ++r)
    {
        Fields f = recurrenceFields(8, 2, rules[r], 0.125F, r % 2);
        f.str("plugin_version", "2").str("plugin_namespace", "rnnx");
        auto p = createAs<plugin::LinearRecurrencePlugin>(creator, f.get());
        REQUIRE(p != nullptr);
        CHECK_EQ(p->parameters().qNumHeads, 8);
        CHECK_EQ(p->parameters().kvNumHeads, 2);
        CHECK_EQ(p->parameters().updateRule, r);
        CHECK_EQ(p->parameters().scale, 0.125F);
        CHECK_EQ(p->parameters().qkL2Norm, r % 2);
        // The index is kernels::LinearRecurrenceRule's.
        CHECK(static_cast<kernels::LinearRecurrenceRule>(p->parameters().updateRule)
            == (r == 0       ? kernels::LinearRecurrenceRule::kLINEAR
                    : r == 1 ? kernels::LinearRecurrenceRule::kGATED
                    : r == 2 ? kernels::LinearRecurrenceRule::kDELTA
                             : kernels::LinearRecurrenceRule::kGATED_DELTA));
    }
    struct Case
    {
        Fields fields;
        int32_t qHeads;
        int32_t kvHeads;
        int32_t rule;
        float scale;
        int32_t qkL2Norm;
    };
    for (Case c : {// With the trailing NUL in the length (some writers count it), and kINT64 / kFLOAT64.
             Case{Fields()
                      .i64("q_num_heads", 4)
                      .i64("kv_num_heads", 4)
                      .raw("update_rule", "delta", PluginFieldType::kCHAR, 6)
                      .f64("scale", 0.5),
                 4, 4, 2, 0.5F, 0},
             // Build-phase defaults: gated_delta, scale 0, qk_l2_norm 0 (a file from before qk_l2_norm has none).
             Case{Fields().i32("q_num_heads", 2).i32("kv_num_heads", 1), 2, 1, 3, 0.F, 0},
             // Grouped value: kv_num_heads a multiple of q_num_heads.
             Case{Fields().i32("q_num_heads", 2).i32("kv_num_heads", 6).i64("qk_l2_norm", 1), 2, 6, 3, 0.F, 1}})
    {
        auto p = createAs<plugin::LinearRecurrencePlugin>(creator, c.fields.get());
        REQUIRE(p != nullptr);
        CHECK(p->parameters().qNumHeads == c.qHeads && p->parameters().kvNumHeads == c.kvHeads);
        CHECK(p->parameters().updateRule == c.rule && p->parameters().scale == c.scale);
        CHECK_EQ(p->parameters().qkL2Norm, c.qkL2Norm);
    }
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("LinearRecurrence refuses bad, missing, unknown and wrongly typed fields")
{
    plugin::LinearRecurrencePluginCreator recurrence;
    // Out of range: heads <= 0, neither of H_q, H_kv a multiple of the other, an unknown rule, a non-finite scale,
    // qk_l2_norm not 0 or 1.
    std::vector<Fields> bad{recurrenceFields(0, 1), recurrenceFields(4, 0), recurrenceFields(-4, 2),
        recurrenceFields(4, 3), recurrenceFields(4, 6), recurrenceFields(2, 4, "linear", 0.F, 2),
        recurrenceFields(4, 2, "linear", 0.F, -1), recurrenceFields(4, 2, "Gated"), recurrenceFields(4, 2, ""),
        recurrenceFields(4, 2, "gated_delta "), recurrenceFields(4, 2, "mamba"),
        recurrenceFields(4, 2, "linear", std::numeric_limits<float>::quiet_NaN()),
        recurrenceFields(4, 2, "linear", std::numeric_limits<float>::infinity())};
    // Missing: the heads always (every field when deserialising, below).
    bad.push_back(Fields().i32("q_num_heads", 4));
    // A string field in another type, or malformed; an int field as a string; a version 1 node.
    int32_t const one = 1;
    for (PluginFieldType type : {PluginFieldType::kINT32, PluginFieldType::kINT64, PluginFieldType::kFLOAT32,
             PluginFieldType::kINT8, PluginFieldType::kUNKNOWN})
    {
        bad.push_back(Fields().i32("q_num_heads", 2).i32("kv_num_heads", 2).raw("update_rule", &one, type, 1));
    }
    bad.push_back(Fields().str("q_num_heads", "4").i32("kv_num_heads", 2));
    bad.push_back(recurrenceFields(2, 2).str("plugin_version", "1"));
    expectEachRejected(recurrence, bad, TensorRTPhase::kBUILD, __FILE__, __LINE__);
    Fields headsOnly;
    headsOnly.i32("q_num_heads", 4).i32("kv_num_heads", 2);
    expectRejected(recurrence, headsOnly, TensorRTPhase::kRUNTIME, __FILE__, __LINE__);
    // The message names the plugin, the field, the value and the choices.
    expectRejectedWith(recurrence, recurrenceFields(4, 2, "mamba"),
        "LinearRecurrence: field 'update_rule' is 'mamba', expected one of linear | gated | delta | gated_delta",
        __FILE__, __LINE__);
}

TEST_CASE("LinearRecurrence: serialise -> deserialise round trip, clone, attachToContext")
{
    plugin::LinearRecurrencePluginCreator recurrence;
    for (char const* rule : {"linear", "gated", "delta", "gated_delta"})
    {
        // grouped query without qk_l2_norm for the ungated rules, grouped value with it for the gated ones
        bool const gated = rule[0] == 'g';
        auto built = gated ? makeRecurrence(3, 6, rule, -0.75F, 1) : makeRecurrence(6, 3, rule, -0.75F);
        REQUIRE(built != nullptr);
        nvinfer1::PluginFieldCollection const* serialized = built->getFieldsToSerialize();
        REQUIRE(serialized != nullptr);
        REQUIRE(serialized->nbFields == 5);
        CHECK_EQ(std::string(serialized->fields[4].name), "qk_l2_norm");
        CHECK(serialized->fields[4].type == PluginFieldType::kINT32);
        // update_rule is written as the ONNX parser passes it: kCHAR, its characters.
        nvinfer1::PluginField const& ruleField = serialized->fields[2];
        CHECK_EQ(std::string(ruleField.name), "update_rule");
        CHECK(ruleField.type == PluginFieldType::kCHAR);
        CHECK_EQ(std::string(static_cast<char const*>(ruleField.data), static_cast<size_t>(ruleField.length)),
            std::string(rule));
        auto restored = createAs<plugin::LinearRecurrencePlugin>(recurrence, serialized, TensorRTPhase::kRUNTIME);
        REQUIRE(restored != nullptr);
        CHECK(restored->parameters().qNumHeads == (gated ? 3 : 6)
            && restored->parameters().kvNumHeads == (gated ? 6 : 3));
        CHECK(restored->parameters().updateRule == built->parameters().updateRule);
        CHECK_EQ(restored->parameters().scale, -0.75F);
        CHECK_EQ(restored->parameters().qkL2Norm, gated ? 1 : 0);
        std::unique_ptr<nvinfer1::IPluginV3> cloned(built->clone());
        std::unique_ptr<nvinfer1::IPluginV3> attached(built->attachToContext(nullptr));
        for (nvinfer1::IPluginV3* p : {cloned.get(), attached.get()})
        {
            REQUIRE(p != nullptr);
            auto const& c = static_cast<plugin::LinearRecurrencePlugin*>(p)->parameters();
            CHECK(c.qNumHeads == built->parameters().qNumHeads && c.kvNumHeads == built->parameters().kvNumHeads
                && c.updateRule == built->parameters().updateRule && c.qkL2Norm == built->parameters().qkL2Norm);
            auto* core = static_cast<nvinfer1::IPluginV3OneCore*>(
                p->getCapabilityInterface(nvinfer1::PluginCapabilityType::kCORE));
            CHECK_EQ(std::string(core->getPluginName()), "LinearRecurrence");
            CHECK_EQ(p->getCapabilityInterface(nvinfer1::PluginCapabilityType::kBUILD)->getInterfaceInfo().major, 1);
        }
    }
    CHECK_EQ(takeLoggedErrors(), 0);
}

// What the op-agnostic tests need of this plugin (testMain --fields, the fuzz tests).
RNNX_PLUGIN_TEST_PROBE(
    "LinearRecurrence", &plugin::LinearRecurrencePlugin::fieldTable,
    [] { return std::unique_ptr<nvinfer1::IPluginV3>(makeRecurrence()); },
    [](std::mt19937& rng)
    {
        int32_t const heads = 1 + static_cast<int32_t>(rng() % 4);
        int32_t const groups = 1 + static_cast<int32_t>(rng() % 3);
        bool const groupedValue = rng() % 2 == 0;
        char const* const rules[] = {"linear", "gated", "delta", "gated_delta"};
        char const* const rule = rules[rng() % 4];
        float const scale = 0.25F * static_cast<float>(rng() % 5);
        int32_t const qkL2Norm = static_cast<int32_t>(rng() % 2);
        return std::unique_ptr<nvinfer1::IPluginV3>(groupedValue
                ? makeRecurrence(heads, heads * groups, rule, scale, qkL2Norm)
                : makeRecurrence(heads * groups, heads, rule, scale, qkL2Norm));
    },
    [](nvinfer1::IPluginV3& made, nvinfer1::IPluginV3* restored)
    {
        auto const& p = static_cast<plugin::LinearRecurrencePlugin&>(made).parameters();
        CHECK(p.qNumHeads > 0 && p.kvNumHeads > 0
            && (p.qNumHeads % p.kvNumHeads == 0 || p.kvNumHeads % p.qNumHeads == 0) && p.updateRule >= 0
            && p.updateRule < 4 && std::isfinite(p.scale) && (p.qkL2Norm == 0 || p.qkL2Norm == 1));
        if (restored != nullptr)
        {
            auto const& r = static_cast<plugin::LinearRecurrencePlugin*>(restored)->parameters();
            CHECK(r.qNumHeads == p.qNumHeads && r.kvNumHeads == p.kvNumHeads && r.updateRule == p.updateRule
                && r.scale == p.scale && r.qkL2Norm == p.qkL2Norm);
        }
    });
