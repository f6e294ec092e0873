/*
 * Fuzzing the creators: thousands of random, truncated and mutated PluginFieldCollections (names, types,
 * lengths, contents, null pointers) for both creators in both phases. Every call must return nullptr or a
 * plugin whose parameters are in range and survive a round trip; nothing may crash or throw.
 */
#include "testHarness.h"
#include "testUtils.h"

#include <cmath>
#include <random>

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::PluginFieldType;

namespace
{

char const* const kNames[] = {"hidden_size", "num_directions", "num_matrices", "has_skip_term", "use_tanh", "scale_x",
    "eps", "num_heads", "time_major", "plugin_version", "plugin_namespace", "", "hidden_size\n", "EPS", "x"};

//! Random bytes that are often small ints / floats that pass validation.
void fillRandom(std::mt19937& rng, std::vector<unsigned char>& bytes)
{
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : bytes)
    {
        b = static_cast<unsigned char>(byte(rng));
    }
    int const mode = static_cast<int>(rng() % 5);
    if (mode == 0)
    {
        int32_t const v = static_cast<int32_t>(rng() % 6) - 1;
        std::memcpy(bytes.data(), &v, sizeof(v));
    }
    else if (mode == 1)
    {
        int64_t const v = static_cast<int64_t>(rng() % 6);
        std::memcpy(bytes.data(), &v, sizeof(v));
    }
    else if (mode == 2)
    {
        float const v = static_cast<float>(rng() % 100) / 8.F;
        std::memcpy(bytes.data(), &v, sizeof(v));
    }
    else if (mode == 3)
    {
        std::memcpy(bytes.data(), "2\0rnnx", 6);
    }
}

bool sruParamsValid(plugin::SruScanParameters const& p)
{
    return p.hiddenSize > 0 && (p.numDirections == 1 || p.numDirections == 2)
        && (p.numMatrices == 3 || p.numMatrices == 4) && (p.hasSkipTerm == 0 || p.hasSkipTerm == 1)
        && (p.useTanh == 0 || p.useTanh == 1) && std::isfinite(p.scaleX);
}

//! Creates from `fc`; if accepted, checks the parameters and the round trip. Returns whether it was accepted.
bool exercise(
    nvinfer1::IPluginCreatorV3One& creator, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase phase)
{
    std::unique_ptr<nvinfer1::IPluginV3> plugin(creator.createPlugin("fuzz", fc, phase));
    if (plugin == nullptr)
    {
        return false;
    }
    auto* runtime = static_cast<nvinfer1::IPluginV3OneRuntime*>(
        plugin->getCapabilityInterface(nvinfer1::PluginCapabilityType::kRUNTIME));
    nvinfer1::PluginFieldCollection const* serialized = runtime->getFieldsToSerialize();
    std::unique_ptr<nvinfer1::IPluginV3> restored(
        creator.createPlugin("fuzz", serialized, nvinfer1::TensorRTPhase::kRUNTIME));
    CHECK(restored != nullptr);
    if (auto* sru = dynamic_cast<plugin::SruScanPlugin*>(plugin.get()))
    {
        CHECK(sruParamsValid(sru->parameters()));
        if (restored)
        {
            auto const& r = static_cast<plugin::SruScanPlugin*>(restored.get())->parameters();
            CHECK(r.hiddenSize == sru->parameters().hiddenSize && r.scaleX == sru->parameters().scaleX);
        }
    }
    else if (auto* recurrence = dynamic_cast<plugin::LinearRecurrencePlugin*>(plugin.get()))
    {
        auto const& p = recurrence->parameters();
        CHECK(p.qNumHeads > 0 && p.kvNumHeads > 0 && p.qNumHeads % p.kvNumHeads == 0 && p.updateRule >= 0
            && p.updateRule < 4 && std::isfinite(p.scale));
        if (restored)
        {
            auto const& r = static_cast<plugin::LinearRecurrencePlugin*>(restored.get())->parameters();
            CHECK(r.qNumHeads == p.qNumHeads && r.kvNumHeads == p.kvNumHeads && r.updateRule == p.updateRule
                && r.scale == p.scale);
        }
    }
    else if (auto* conv = dynamic_cast<plugin::CausalConvWithStatePlugin*>(plugin.get()))
    {
        CHECK(conv->parameters().activation >= 0 && conv->parameters().activation < 3);
        if (restored)
        {
            CHECK(static_cast<plugin::CausalConvWithStatePlugin*>(restored.get())->parameters().activation
                == conv->parameters().activation);
        }
    }
    else if (auto* attention = dynamic_cast<plugin::CausalLinearAttentionPlugin*>(plugin.get()))
    {
        auto const& p = attention->parameters();
        CHECK(p.eps >= 0.F && std::isfinite(p.eps) && p.numHeads > 0 && (p.timeMajor == 0 || p.timeMajor == 1));
        if (restored)
        {
            auto const& r = static_cast<plugin::CausalLinearAttentionPlugin*>(restored.get())->parameters();
            CHECK(r.eps == p.eps && r.numHeads == p.numHeads && r.timeMajor == p.timeMajor);
        }
    }
    return true;
}

//! The two creators a fuzz case feeds and its tally of the collections they accepted and rejected.
struct FuzzRun
{
    plugin::SruScanPluginCreator sru;
    plugin::CausalLinearAttentionPluginCreator attention;
    int32_t accepted = 0;
    int32_t rejected = 0;

    //! exercise(), tallied.
    void tally(nvinfer1::IPluginCreatorV3One& creator, nvinfer1::PluginFieldCollection const* fc,
        nvinfer1::TensorRTPhase phase)
    {
        (exercise(creator, fc, phase) ? accepted : rejected) += 1;
    }
};

//! 20000 iterations of `iteration(rng, run)` drawing from `seed`; then prints the tally as "fuzz (<what>)" and
//! checks that some collections were accepted and some rejected.
template <typename Iteration> void fuzz(char const* what, std::mt19937::result_type seed, Iteration iteration)
{
    std::mt19937 rng(seed);
    FuzzRun run;
    for (int32_t i = 0; i < 20000; ++i)
    {
        iteration(rng, run);
    }
    takeLoggedErrors();
    std::cout << "  fuzz (" << what << "): " << run.accepted << " accepted, " << run.rejected << " rejected\n";
    CHECK(run.accepted > 0);
    CHECK(run.rejected > 0);
}

} // namespace

TEST_CASE("fuzz: random field collections are rejected or yield valid plugins")
{
    fuzz("random", 20240611,
        [](std::mt19937& rng, FuzzRun& run)
        {
            int32_t const nbFields = static_cast<int32_t>(rng() % 9);
            std::vector<std::vector<unsigned char>> storage(
                static_cast<size_t>(nbFields), std::vector<unsigned char>(64));
            std::vector<nvinfer1::PluginField> fields(static_cast<size_t>(nbFields));
            for (int32_t i = 0; i < nbFields; ++i)
            {
                fillRandom(rng, storage[i]);
                nvinfer1::PluginField& f = fields[i];
                f.name = rng() % 23 == 0 ? nullptr : kNames[rng() % (sizeof(kNames) / sizeof(kNames[0]))];
                f.data = rng() % 19 == 0 ? nullptr : storage[i].data();
                f.type = rng() % 3 == 0 ? static_cast<PluginFieldType>(rng() % 16)
                                        : (rng() % 2 == 0 ? PluginFieldType::kINT32 : PluginFieldType::kFLOAT32);
                // Lengths up to 4 elements of at most 8 bytes stay within the 64-byte buffers.
                f.length = rng() % 4 == 0 ? static_cast<int32_t>(rng() % 7) - 2 : 1;
            }
            nvinfer1::PluginFieldCollection fc{nbFields, nbFields > 0 ? fields.data() : nullptr};
            if (rng() % 50 == 0)
            {
                fc.fields = nullptr;
            }
            for (auto phase : {nvinfer1::TensorRTPhase::kBUILD, nvinfer1::TensorRTPhase::kRUNTIME})
            {
                for (nvinfer1::IPluginCreatorV3One* creator : {static_cast<nvinfer1::IPluginCreatorV3One*>(&run.sru),
                         static_cast<nvinfer1::IPluginCreatorV3One*>(&run.attention)})
                {
                    run.tally(*creator, &fc, phase);
                }
            }
        });
}

TEST_CASE("fuzz: truncated and mutated serialisations are rejected or valid")
{
    fuzz("mutated", 7,
        [](std::mt19937& rng, FuzzRun& run)
        {
            bool const isSru = rng() % 2 == 0;
            std::unique_ptr<nvinfer1::IPluginV3> source(isSru
                    ? static_cast<nvinfer1::IPluginV3*>(makeSru(1 + static_cast<int32_t>(rng() % 64), 1 + rng() % 2,
                          3 + rng() % 2, rng() % 2, rng() % 2, 0.5F)
                              .release())
                    : makeAttention(1 + static_cast<int32_t>(rng() % 16), 1e-5F, static_cast<int32_t>(rng() % 2))
                          .release());
            auto* runtime = static_cast<nvinfer1::IPluginV3OneRuntime*>(
                source->getCapabilityInterface(nvinfer1::PluginCapabilityType::kRUNTIME));
            nvinfer1::PluginFieldCollection const* serialized = runtime->getFieldsToSerialize();
            std::vector<nvinfer1::PluginField> fields(serialized->fields, serialized->fields + serialized->nbFields);
            std::vector<unsigned char> garbage(64);
            fillRandom(rng, garbage);
            int32_t const mutation = static_cast<int32_t>(rng() % 6);
            size_t const at = rng() % fields.size();
            switch (mutation)
            {
            case 0: fields.resize(rng() % (fields.size() + 1)); break;
            case 1: fields[at].type = static_cast<PluginFieldType>(rng() % 16); break;
            case 2: fields[at].length = static_cast<int32_t>(rng() % 7) - 2; break;
            case 3: fields[at].data = garbage.data(); break;
            case 4: fields.push_back(fields[at]); break;
            default: std::swap(fields[at], fields[rng() % fields.size()]); break;
            }
            nvinfer1::PluginFieldCollection fc{static_cast<int32_t>(fields.size()), fields.data()};
            nvinfer1::IPluginCreatorV3One& creator = isSru ? static_cast<nvinfer1::IPluginCreatorV3One&>(run.sru)
                                                           : static_cast<nvinfer1::IPluginCreatorV3One&>(run.attention);
            run.tally(creator, &fc, nvinfer1::TensorRTPhase::kRUNTIME);
            // The other creator must never accept these fields at run time (names do not overlap).
            nvinfer1::IPluginCreatorV3One& other = isSru ? static_cast<nvinfer1::IPluginCreatorV3One&>(run.attention)
                                                         : static_cast<nvinfer1::IPluginCreatorV3One&>(run.sru);
            if (!fields.empty())
            {
                CHECK(!exercise(other, &fc, nvinfer1::TensorRTPhase::kRUNTIME));
            }
        });
}

TEST_CASE("fuzz: random LinearRecurrence / CausalConvWithState fields, string fields included, are rejected or valid")
{
    char const* const names[] = {"q_num_heads", "kv_num_heads", "update_rule", "scale", "activation", "plugin_version",
        "plugin_namespace", "", "update_rule\n", "x"};
    char const* const strings[] = {"linear", "gated", "delta", "gated_delta", "none", "silu", "swish", "", "2", "rnnx",
        "gated_delta_", "Linear", "sil"};
    std::mt19937 rng(20261127);
    plugin::LinearRecurrencePluginCreator recurrence;
    plugin::CausalConvWithStatePluginCreator conv;
    int32_t accepted = 0;
    int32_t rejected = 0;
    for (int32_t i = 0; i < 20000; ++i)
    {
        int32_t const nbFields = static_cast<int32_t>(rng() % 7);
        std::vector<std::vector<unsigned char>> storage(static_cast<size_t>(nbFields), std::vector<unsigned char>(64));
        std::vector<nvinfer1::PluginField> fields(static_cast<size_t>(nbFields));
        for (int32_t f = 0; f < nbFields; ++f)
        {
            fillRandom(rng, storage[f]);
            nvinfer1::PluginField& field = fields[f];
            field.name = rng() % 29 == 0 ? nullptr : names[rng() % (sizeof(names) / sizeof(names[0]))];
            field.data = rng() % 19 == 0 ? nullptr : storage[f].data();
            field.length = 1;
            int32_t const kind = static_cast<int32_t>(rng() % 4);
            if (kind == 0)
            {
                // A string, its length with or without the NUL, sometimes cut short or negative.
                std::string const text = strings[rng() % (sizeof(strings) / sizeof(strings[0]))];
                std::memcpy(storage[f].data(), text.c_str(), text.size() + 1);
                field.type = PluginFieldType::kCHAR;
                int32_t const cut = static_cast<int32_t>(rng() % 8);
                field.length = static_cast<int32_t>(text.size()) + (cut == 0 ? 1 : (cut == 1 ? -1 : 0));
                field.length = cut == 2 ? -1 : field.length;
            }
            else
            {
                field.type = kind == 1
                    ? PluginFieldType::kINT32
                    : (kind == 2 ? PluginFieldType::kFLOAT32 : static_cast<PluginFieldType>(rng() % 16));
                field.length = rng() % 4 == 0 ? static_cast<int32_t>(rng() % 7) - 2 : 1;
            }
        }
        nvinfer1::PluginFieldCollection fc{nbFields, nbFields > 0 ? fields.data() : nullptr};
        for (auto phase : {nvinfer1::TensorRTPhase::kBUILD, nvinfer1::TensorRTPhase::kRUNTIME})
        {
            for (nvinfer1::IPluginCreatorV3One* creator : {static_cast<nvinfer1::IPluginCreatorV3One*>(&recurrence),
                     static_cast<nvinfer1::IPluginCreatorV3One*>(&conv)})
            {
                (exercise(*creator, &fc, phase) ? accepted : rejected) += 1;
            }
        }
    }
    takeLoggedErrors();
    std::cout << "  fuzz (string fields): " << accepted << " accepted, " << rejected << " rejected\n";
    CHECK(accepted > 0);
    CHECK(rejected > 0);
}
