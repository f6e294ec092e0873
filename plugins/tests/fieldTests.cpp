/*
 * Creators: names, field lists, createPlugin with every accepted field type, errors for bad fields,
 * and the serialise -> deserialise round trip.
 */
#include "testHarness.h"
#include "testUtils.h"

#include <cmath>
#include <limits>

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::PluginFieldType;
using nvinfer1::TensorRTPhase;

namespace
{

//! createPlugin must return nullptr and log at least one error.
void expectRejected(nvinfer1::IPluginCreatorV3One& creator, Fields& fields, TensorRTPhase phase, int line)
{
    takeLoggedErrors();
    nvinfer1::IPluginV3* plugin = creator.createPlugin("bad", fields.get(), phase);
    if (plugin != nullptr)
    {
        fail(__FILE__, line, "createPlugin accepted bad fields");
        delete plugin;
    }
    if (takeLoggedErrors() == 0)
    {
        fail(__FILE__, line, "no error logged for bad fields");
    }
}

//! SRUScan parameters compared field by field, and printed in field-table order (for CHECK_EQ).
bool operator==(plugin::SruScanParameters const& a, plugin::SruScanParameters const& b)
{
    return a.hiddenSize == b.hiddenSize && a.numDirections == b.numDirections && a.numMatrices == b.numMatrices
        && a.hasSkipTerm == b.hasSkipTerm && a.useTanh == b.useTanh && a.scaleX == b.scaleX;
}

std::ostream& operator<<(std::ostream& out, plugin::SruScanParameters const& p)
{
    return out << "{" << p.hiddenSize << ", " << p.numDirections << ", " << p.numMatrices << ", " << p.hasSkipTerm
               << ", " << p.useTanh << ", " << p.scaleX << "}";
}

} // namespace

TEST_CASE("creators report the ONNX op names, version 2 and namespace rnnx")
{
    plugin::SruScanPluginCreator sru;
    plugin::CausalLinearAttentionPluginCreator attention;
    CHECK_EQ(std::string(sru.getPluginName()), "SRUScan");
    CHECK_EQ(std::string(attention.getPluginName()), "CausalLinearAttention");
    for (nvinfer1::IPluginCreatorV3One* c :
        {static_cast<nvinfer1::IPluginCreatorV3One*>(&sru), static_cast<nvinfer1::IPluginCreatorV3One*>(&attention)})
    {
        CHECK_EQ(std::string(c->getPluginVersion()), "2");
        CHECK_EQ(std::string(c->getPluginNamespace()), "rnnx");
        CHECK_EQ(std::string(c->getInterfaceInfo().kind), "PLUGIN CREATOR_V3ONE");
    }
}

TEST_CASE("creator field lists follow the field tables")
{
    plugin::SruScanPluginCreator sru;
    plugin::CausalLinearAttentionPluginCreator attention;
    auto check = [](nvinfer1::IPluginCreatorV3One& c, std::vector<plugin::FieldDesc> const& table)
    {
        nvinfer1::PluginFieldCollection const* fc = c.getFieldNames();
        REQUIRE(fc != nullptr);
        REQUIRE(fc->nbFields == static_cast<int32_t>(table.size()));
        for (int32_t i = 0; i < fc->nbFields; ++i)
        {
            CHECK_EQ(std::string(fc->fields[i].name), std::string(table[i].name));
            CHECK(fc->fields[i].type == plugin::serializedType(table[i].kind));
            CHECK_EQ(fc->fields[i].length, 1);
        }
    };
    check(sru, plugin::SruScanPlugin::fieldTable());
    check(attention, plugin::CausalLinearAttentionPlugin::fieldTable());
    std::vector<std::string> names;
    for (auto const& row : plugin::SruScanPlugin::fieldTable())
    {
        names.emplace_back(row.name);
    }
    CHECK((names
        == std::vector<std::string>{
            "hidden_size", "num_directions", "num_matrices", "has_skip_term", "use_tanh", "scale_x"}));
    names.clear();
    for (auto const& row : plugin::CausalLinearAttentionPlugin::fieldTable())
    {
        names.emplace_back(row.name);
    }
    CHECK((names == std::vector<std::string>{"eps", "num_heads", "time_major"}));
    CHECK(plugin::CausalLinearAttentionPlugin::fieldTable()[1].required);
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

TEST_CASE("build phase fills spec defaults for optional fields")
{
    plugin::SruScanPluginCreator sru;
    Fields f;
    f.i32("hidden_size", 4);
    auto p = createAs<plugin::SruScanPlugin>(sru, f.get());
    REQUIRE(p != nullptr);
    CHECK_EQ(p->parameters(), (plugin::SruScanParameters{4, 1, 3, 1, 0, 1.F}));
    plugin::CausalLinearAttentionPluginCreator attention;
    Fields heads;
    heads.i32("num_heads", 3);
    auto a = createAs<plugin::CausalLinearAttentionPlugin>(attention, heads.get());
    REQUIRE(a != nullptr);
    CHECK_EQ(a->parameters().eps, 1e-6F);
    CHECK_EQ(a->parameters().numHeads, 3);
    CHECK_EQ(a->parameters().timeMajor, 0);
}

TEST_CASE("missing fields are errors: hidden_size and num_heads always, every field when deserialising")
{
    plugin::SruScanPluginCreator sru;
    plugin::CausalLinearAttentionPluginCreator attention;
    Fields noHidden;
    noHidden.i32("num_directions", 1);
    expectRejected(sru, noHidden, TensorRTPhase::kBUILD, __LINE__);
    Fields partial;
    partial.i32("hidden_size", 4);
    expectRejected(sru, partial, TensorRTPhase::kRUNTIME, __LINE__);
    Fields none;
    expectRejected(attention, none, TensorRTPhase::kRUNTIME, __LINE__);
    expectRejected(attention, none, TensorRTPhase::kBUILD, __LINE__);
    Fields noHeads;
    noHeads.f32("eps", 1e-6F).i32("time_major", 1);
    expectRejected(attention, noHeads, TensorRTPhase::kBUILD, __LINE__);
    Fields headsOnly;
    headsOnly.i32("num_heads", 2);
    expectRejected(attention, headsOnly, TensorRTPhase::kRUNTIME, __LINE__);
    takeLoggedErrors();
    CHECK(sru.createPlugin("x", nullptr, TensorRTPhase::kBUILD) == nullptr);
    CHECK(attention.createPlugin("x", nullptr, TensorRTPhase::kBUILD) == nullptr);
    CHECK(takeLoggedErrors() >= 2);
}

TEST_CASE("unknown, duplicated and malformed fields are errors")
{
    plugin::SruScanPluginCreator sru;
    plugin::CausalLinearAttentionPluginCreator attention;
    Fields unknown = sruFields(4);
    unknown.i32("hidden", 4);
    expectRejected(sru, unknown, TensorRTPhase::kBUILD, __LINE__);
    Fields twice = sruFields(4);
    twice.i32("use_tanh", 1);
    expectRejected(sru, twice, TensorRTPhase::kBUILD, __LINE__);
    Fields noName = attentionFields(2, 1e-3F);
    noName.raw(nullptr, nullptr, PluginFieldType::kINT32, 1);
    expectRejected(attention, noName, TensorRTPhase::kBUILD, __LINE__);
    Fields noData;
    noData.i32("num_heads", 2).raw("eps", nullptr, PluginFieldType::kFLOAT32, 1);
    expectRejected(attention, noData, TensorRTPhase::kBUILD, __LINE__);
    float const two[] = {1.F, 2.F};
    Fields twoValues;
    twoValues.i32("num_heads", 2).raw("eps", two, PluginFieldType::kFLOAT32, 2);
    expectRejected(attention, twoValues, TensorRTPhase::kBUILD, __LINE__);
    Fields zeroLength;
    zeroLength.i32("num_heads", 2).raw("eps", two, PluginFieldType::kFLOAT32, 0);
    expectRejected(attention, zeroLength, TensorRTPhase::kBUILD, __LINE__);
    nvinfer1::PluginFieldCollection negative{-1, nullptr};
    takeLoggedErrors();
    CHECK(attention.createPlugin("x", &negative, TensorRTPhase::kBUILD) == nullptr);
    nvinfer1::PluginFieldCollection dangling{3, nullptr};
    CHECK(attention.createPlugin("x", &dangling, TensorRTPhase::kBUILD) == nullptr);
    CHECK_EQ(takeLoggedErrors(), 2);
    // Version 1 nodes (heads apart, no mask) do not reach these plugins.
    Fields wrongVersion = sruFields(4);
    wrongVersion.str("plugin_version", "1");
    expectRejected(sru, wrongVersion, TensorRTPhase::kBUILD, __LINE__);
    Fields oldAttention = attentionFields(2);
    oldAttention.str("plugin_version", "1");
    expectRejected(attention, oldAttention, TensorRTPhase::kBUILD, __LINE__);
    Fields twiceHeads = attentionFields(2);
    twiceHeads.i32("num_heads", 2);
    expectRejected(attention, twiceHeads, TensorRTPhase::kBUILD, __LINE__);
    Fields wrongNamespace = sruFields(4);
    wrongNamespace.str("plugin_namespace", "");
    expectRejected(sru, wrongNamespace, TensorRTPhase::kBUILD, __LINE__);
    Fields versionAsInt = sruFields(4);
    versionAsInt.i32("plugin_version", 1);
    expectRejected(sru, versionAsInt, TensorRTPhase::kBUILD, __LINE__);
}

TEST_CASE("wrongly typed fields are errors")
{
    plugin::SruScanPluginCreator sru;
    plugin::CausalLinearAttentionPluginCreator attention;
    int64_t const zero = 0;
    for (PluginFieldType type : {PluginFieldType::kFLOAT16, PluginFieldType::kFLOAT32, PluginFieldType::kFLOAT64,
             PluginFieldType::kINT8, PluginFieldType::kINT16, PluginFieldType::kCHAR, PluginFieldType::kDIMS,
             PluginFieldType::kUNKNOWN, PluginFieldType::kBF16, PluginFieldType::kFP8, PluginFieldType::kINT4,
             PluginFieldType::kFP4, static_cast<PluginFieldType>(99)})
    {
        Fields f;
        f.i32("hidden_size", 4).raw("num_matrices", &zero, type, 1);
        expectRejected(sru, f, TensorRTPhase::kBUILD, __LINE__);
    }
    for (PluginFieldType type : {PluginFieldType::kINT32, PluginFieldType::kINT64, PluginFieldType::kFLOAT16,
             PluginFieldType::kBF16, PluginFieldType::kCHAR, PluginFieldType::kINT8})
    {
        Fields f;
        f.i32("num_heads", 2).raw("eps", &zero, type, 1);
        expectRejected(attention, f, TensorRTPhase::kBUILD, __LINE__);
    }
    double const two = 2.0;
    for (PluginFieldType type : {PluginFieldType::kFLOAT32, PluginFieldType::kFLOAT64, PluginFieldType::kCHAR})
    {
        Fields f;
        f.raw("num_heads", &two, type, 1);
        expectRejected(attention, f, TensorRTPhase::kBUILD, __LINE__);
    }
}

TEST_CASE("out-of-range field values are errors")
{
    plugin::SruScanPluginCreator sru;
    plugin::CausalLinearAttentionPluginCreator attention;
    for (auto f : {sruFields(0), sruFields(-3), sruFields(4, 3), sruFields(4, 0), sruFields(4, 1, 2),
             sruFields(4, 1, 5), sruFields(4, 1, 3, 2), sruFields(4, 1, 3, 1, -1),
             sruFields(4, 1, 3, 1, 0, std::numeric_limits<float>::quiet_NaN()),
             sruFields(4, 1, 3, 1, 0, std::numeric_limits<float>::infinity()),
             sruFields(std::numeric_limits<int32_t>::max(), 2, 4)})
    {
        expectRejected(sru, f, TensorRTPhase::kBUILD, __LINE__);
    }
    Fields big;
    big.i64("hidden_size", int64_t{1} << 40);
    expectRejected(sru, big, TensorRTPhase::kBUILD, __LINE__);
    Fields hugeDouble;
    hugeDouble.i32("hidden_size", 4).f64("scale_x", 1e300);
    expectRejected(sru, hugeDouble, TensorRTPhase::kBUILD, __LINE__);
    for (float eps : {-1.F, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
    {
        Fields f = attentionFields(2, eps);
        expectRejected(attention, f, TensorRTPhase::kBUILD, __LINE__);
    }
    for (auto f :
        {attentionFields(0), attentionFields(-2), attentionFields(2, 1e-6F, 2), attentionFields(2, 1e-6F, -1)})
    {
        expectRejected(attention, f, TensorRTPhase::kBUILD, __LINE__);
    }
    Fields hugeHeads;
    hugeHeads.i64("num_heads", int64_t{1} << 33);
    expectRejected(attention, hugeHeads, TensorRTPhase::kBUILD, __LINE__);
}

TEST_CASE("serialise -> deserialise round trip keeps every field")
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

TEST_CASE("clone and attachToContext copy the parameters; capability interfaces")
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
    auto attention = makeAttention(6, 0.125F, 1);
    std::unique_ptr<nvinfer1::IPluginV3> a(attention->clone());
    REQUIRE(a != nullptr);
    auto const& copied = static_cast<plugin::CausalLinearAttentionPlugin*>(a.get())->parameters();
    CHECK(copied.eps == 0.125F && copied.numHeads == 6 && copied.timeMajor == 1);
    auto* core =
        static_cast<nvinfer1::IPluginV3OneCore*>(a->getCapabilityInterface(nvinfer1::PluginCapabilityType::kCORE));
    CHECK_EQ(std::string(core->getPluginName()), "CausalLinearAttention");
}

TEST_CASE("LinearRecurrence and CausalConvWithState creators: names, field lists in the records' order, kinds")
{
    plugin::LinearRecurrencePluginCreator recurrence;
    plugin::CausalConvWithStatePluginCreator conv;
    CHECK_EQ(std::string(recurrence.getPluginName()), "LinearRecurrence");
    CHECK_EQ(std::string(conv.getPluginName()), "CausalConvWithState");
    for (nvinfer1::IPluginCreatorV3One* c :
        {static_cast<nvinfer1::IPluginCreatorV3One*>(&recurrence), static_cast<nvinfer1::IPluginCreatorV3One*>(&conv)})
    {
        CHECK_EQ(std::string(c->getPluginVersion()), "2");
        CHECK_EQ(std::string(c->getPluginNamespace()), "rnnx");
        CHECK_EQ(std::string(c->getInterfaceInfo().kind), "PLUGIN CREATOR_V3ONE");
    }
    // name, reported type, required, default (string fields: the default string).
    struct Row
    {
        char const* name;
        PluginFieldType type;
        bool required;
        char const* defaultText;
    };
    auto check =
        [](nvinfer1::IPluginCreatorV3One& c, std::vector<plugin::FieldDesc> const& table, std::vector<Row> const& rows)
    {
        nvinfer1::PluginFieldCollection const* fc = c.getFieldNames();
        REQUIRE(fc != nullptr);
        REQUIRE(fc->nbFields == static_cast<int32_t>(rows.size()));
        REQUIRE(table.size() == rows.size());
        for (size_t i = 0; i < rows.size(); ++i)
        {
            CHECK_EQ(std::string(fc->fields[i].name), std::string(rows[i].name));
            CHECK(fc->fields[i].type == rows[i].type);
            CHECK(fc->fields[i].type == plugin::serializedType(table[i].kind));
            CHECK_EQ(table[i].required, rows[i].required);
            if (table[i].kind == plugin::FieldKind::kSTRING)
            {
                CHECK_EQ(std::string(table[i].choices.at(static_cast<size_t>(table[i].defaultValue))),
                    std::string(rows[i].defaultText));
            }
        }
    };
    check(recurrence, plugin::LinearRecurrencePlugin::fieldTable(),
        {{"q_num_heads", PluginFieldType::kINT32, true, ""}, {"kv_num_heads", PluginFieldType::kINT32, true, ""},
            {"update_rule", PluginFieldType::kCHAR, false, "gated_delta"},
            {"scale", PluginFieldType::kFLOAT32, false, ""}});
    check(
        conv, plugin::CausalConvWithStatePlugin::fieldTable(), {{"activation", PluginFieldType::kCHAR, false, "none"}});
    CHECK((plugin::LinearRecurrencePlugin::fieldTable()[2].choices
        == std::vector<char const*>(plugin::LinearRecurrencePlugin::updateRules())));
}

TEST_CASE("LinearRecurrence createPlugin reads the parser's types: update_rule as kCHAR, with or without a NUL")
{
    plugin::LinearRecurrencePluginCreator creator;
    char const* const rules[] = {"linear", "gated", "delta", "gated_delta"};
    for (int32_t r = 0; r < 4; ++r)
    {
        Fields f = recurrenceFields(8, 2, rules[r], 0.125F);
        f.str("plugin_version", "2").str("plugin_namespace", "rnnx");
        auto p = createAs<plugin::LinearRecurrencePlugin>(creator, f.get());
        REQUIRE(p != nullptr);
        CHECK_EQ(p->parameters().qNumHeads, 8);
        CHECK_EQ(p->parameters().kvNumHeads, 2);
        CHECK_EQ(p->parameters().updateRule, r);
        CHECK_EQ(p->parameters().scale, 0.125F);
        // The index is kernels::LinearRecurrenceRule's.
        CHECK(static_cast<kernels::LinearRecurrenceRule>(p->parameters().updateRule)
            == (r == 0       ? kernels::LinearRecurrenceRule::kLINEAR
                    : r == 1 ? kernels::LinearRecurrenceRule::kGATED
                    : r == 2 ? kernels::LinearRecurrenceRule::kDELTA
                             : kernels::LinearRecurrenceRule::kGATED_DELTA));
    }
    // With the trailing NUL in the length (some writers count it), and kINT64 / kFLOAT64.
    Fields nul;
    nul.i64("q_num_heads", 4).i64("kv_num_heads", 4).raw("update_rule", "delta", PluginFieldType::kCHAR, 6);
    nul.f64("scale", 0.5);
    auto q = createAs<plugin::LinearRecurrencePlugin>(creator, nul.get());
    REQUIRE(q != nullptr);
    CHECK(q->parameters().updateRule == 2 && q->parameters().scale == 0.5F && q->parameters().qNumHeads == 4);
    // Build-phase defaults: gated_delta, scale 0.
    Fields required;
    required.i32("q_num_heads", 2).i32("kv_num_heads", 1);
    auto d = createAs<plugin::LinearRecurrencePlugin>(creator, required.get());
    REQUIRE(d != nullptr);
    CHECK(d->parameters().updateRule == 3 && d->parameters().scale == 0.F);
    CHECK_EQ(takeLoggedErrors(), 0);
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

TEST_CASE("LinearRecurrence and CausalConvWithState refuse bad, missing, unknown and wrongly typed fields")
{
    plugin::LinearRecurrencePluginCreator recurrence;
    plugin::CausalConvWithStatePluginCreator conv;
    // Out of range: heads <= 0, H_q not a multiple of H_kv, an unknown rule, a non-finite scale.
    for (auto f : {recurrenceFields(0, 1), recurrenceFields(4, 0), recurrenceFields(-4, 2), recurrenceFields(4, 3),
             recurrenceFields(2, 4), recurrenceFields(4, 2, "Gated"), recurrenceFields(4, 2, ""),
             recurrenceFields(4, 2, "gated_delta "), recurrenceFields(4, 2, "mamba"),
             recurrenceFields(4, 2, "linear", std::numeric_limits<float>::quiet_NaN()),
             recurrenceFields(4, 2, "linear", std::numeric_limits<float>::infinity())})
    {
        expectRejected(recurrence, f, TensorRTPhase::kBUILD, __LINE__);
    }
    // Missing: the heads always, every field when deserialising.
    Fields noKv;
    noKv.i32("q_num_heads", 4);
    expectRejected(recurrence, noKv, TensorRTPhase::kBUILD, __LINE__);
    Fields headsOnly;
    headsOnly.i32("q_num_heads", 4).i32("kv_num_heads", 2);
    expectRejected(recurrence, headsOnly, TensorRTPhase::kRUNTIME, __LINE__);
    Fields noActivation;
    expectRejected(conv, noActivation, TensorRTPhase::kRUNTIME, __LINE__);
    // A string field in another type, or malformed; an int field as a string.
    int32_t const one = 1;
    for (PluginFieldType type : {PluginFieldType::kINT32, PluginFieldType::kINT64, PluginFieldType::kFLOAT32,
             PluginFieldType::kINT8, PluginFieldType::kUNKNOWN})
    {
        Fields f;
        f.i32("q_num_heads", 2).i32("kv_num_heads", 2).raw("update_rule", &one, type, 1);
        expectRejected(recurrence, f, TensorRTPhase::kBUILD, __LINE__);
        Fields g;
        g.raw("activation", &one, type, 1);
        expectRejected(conv, g, TensorRTPhase::kBUILD, __LINE__);
    }
    Fields nullData;
    nullData.raw("activation", nullptr, PluginFieldType::kCHAR, 4);
    expectRejected(conv, nullData, TensorRTPhase::kBUILD, __LINE__);
    Fields negative;
    negative.raw("activation", "silu", PluginFieldType::kCHAR, -1);
    expectRejected(conv, negative, TensorRTPhase::kBUILD, __LINE__);
    Fields headsAsString;
    headsAsString.str("q_num_heads", "4").i32("kv_num_heads", 2);
    expectRejected(recurrence, headsAsString, TensorRTPhase::kBUILD, __LINE__);
    Fields unknown = convFields("silu");
    unknown.i32("kernel_size", 4);
    expectRejected(conv, unknown, TensorRTPhase::kBUILD, __LINE__);
    Fields twice = convFields("silu");
    twice.str("activation", "none");
    expectRejected(conv, twice, TensorRTPhase::kBUILD, __LINE__);
    Fields oldVersion = recurrenceFields(2, 2);
    oldVersion.str("plugin_version", "1");
    expectRejected(recurrence, oldVersion, TensorRTPhase::kBUILD, __LINE__);
    // The message names the plugin, the field, the value and the choices.
    Fields wrongRule = recurrenceFields(4, 2, "mamba");
    takeLoggedMessages();
    CHECK(recurrence.createPlugin("x", wrongRule.get(), TensorRTPhase::kBUILD) == nullptr);
    CHECK(takeLoggedMessages().find(
              "LinearRecurrence: field 'update_rule' is 'mamba', expected one of linear | gated | delta | gated_delta")
        != std::string::npos);
    Fields wrongActivation = convFields("gelu");
    CHECK(conv.createPlugin("x", wrongActivation.get(), TensorRTPhase::kBUILD) == nullptr);
    CHECK(takeLoggedMessages().find(
              "CausalConvWithState: field 'activation' is 'gelu', expected one of none | silu | swish")
        != std::string::npos);
}

TEST_CASE("LinearRecurrence and CausalConvWithState: serialise -> deserialise round trip, clone, attachToContext")
{
    plugin::LinearRecurrencePluginCreator recurrence;
    for (char const* rule : {"linear", "gated", "delta", "gated_delta"})
    {
        auto built = makeRecurrence(6, 3, rule, -0.75F);
        REQUIRE(built != nullptr);
        nvinfer1::PluginFieldCollection const* serialized = built->getFieldsToSerialize();
        REQUIRE(serialized != nullptr);
        REQUIRE(serialized->nbFields == 4);
        // update_rule is written as the ONNX parser passes it: kCHAR, its characters.
        nvinfer1::PluginField const& ruleField = serialized->fields[2];
        CHECK_EQ(std::string(ruleField.name), "update_rule");
        CHECK(ruleField.type == PluginFieldType::kCHAR);
        CHECK_EQ(std::string(static_cast<char const*>(ruleField.data), static_cast<size_t>(ruleField.length)),
            std::string(rule));
        auto restored = createAs<plugin::LinearRecurrencePlugin>(recurrence, serialized, TensorRTPhase::kRUNTIME);
        REQUIRE(restored != nullptr);
        CHECK(restored->parameters().qNumHeads == 6 && restored->parameters().kvNumHeads == 3);
        CHECK(restored->parameters().updateRule == built->parameters().updateRule);
        CHECK_EQ(restored->parameters().scale, -0.75F);
        std::unique_ptr<nvinfer1::IPluginV3> cloned(built->clone());
        std::unique_ptr<nvinfer1::IPluginV3> attached(built->attachToContext(nullptr));
        for (nvinfer1::IPluginV3* p : {cloned.get(), attached.get()})
        {
            REQUIRE(p != nullptr);
            auto const& c = static_cast<plugin::LinearRecurrencePlugin*>(p)->parameters();
            CHECK(c.qNumHeads == 6 && c.kvNumHeads == 3 && c.updateRule == built->parameters().updateRule);
            auto* core = static_cast<nvinfer1::IPluginV3OneCore*>(
                p->getCapabilityInterface(nvinfer1::PluginCapabilityType::kCORE));
            CHECK_EQ(std::string(core->getPluginName()), "LinearRecurrence");
            CHECK_EQ(p->getCapabilityInterface(nvinfer1::PluginCapabilityType::kBUILD)->getInterfaceInfo().major, 1);
        }
    }
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
