/*
 * Fuzzing the creators: thousands of random, truncated and mutated PluginFieldCollections (names, types,
 * lengths, contents, null pointers) for every registered creator (registeredCreators) in both phases. Every call
 * must return nullptr or a plugin whose parameters are in range (its op's test probe checks them) and survive a
 * round trip; nothing may crash or throw. Field names and string values come from the creators' field tables.
 */
#include "common/pluginRegistry.h"
#include "testHarness.h"
#include "testUtils.h"

#include <cctype>
#include <cmath>
#include <random>

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::PluginFieldType;

namespace
{

//! The registered creators.
std::vector<nvinfer1::IPluginCreatorV3One*> creators()
{
    std::vector<nvinfer1::IPluginCreatorV3One*> all;
    for (nvinfer1::IPluginCreatorInterface* creator : plugin::registeredCreators())
    {
        all.push_back(static_cast<nvinfer1::IPluginCreatorV3One*>(creator));
    }
    return all;
}

//! Every creator's field names, each also with a trailing newline and upper-cased, plugin_version /
//! plugin_namespace, and names no creator has.
std::vector<std::string> const& fieldNames()
{
    static std::vector<std::string> const names = []
    {
        std::vector<std::string> all{"plugin_version", "plugin_namespace", "", "x"};
        for (nvinfer1::IPluginCreatorV3One* creator : creators())
        {
            nvinfer1::PluginFieldCollection const* fc = creator->getFieldNames();
            for (int32_t i = 0; i < fc->nbFields; ++i)
            {
                std::string const name = fc->fields[i].name;
                std::string upper = name;
                for (char& ch : upper)
                {
                    ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
                }
                all.insert(all.end(), {name, name + "\n", upper});
            }
        }
        return all;
    }();
    return names;
}

//! Every string field's choices, each also with a trailing '_', capitalised and cut short, plus "", "2", "rnnx".
std::vector<std::string> const& fieldStrings()
{
    static std::vector<std::string> const strings = []
    {
        std::vector<std::string> all{"", "2", "rnnx"};
        for (PluginTestProbe const& probe : pluginTestProbes())
        {
            for (plugin::FieldDesc const& field : probe.fieldTable())
            {
                for (char const* choice : field.choices)
                {
                    std::string const text = choice;
                    std::string capital = text;
                    capital[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(capital[0])));
                    all.insert(all.end(), {text, text + "_", capital, text.substr(0, text.size() - 1)});
                }
            }
        }
        return all;
    }();
    return strings;
}

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

//! Creates from `fc`; if accepted, checks the parameters (the op's probe) and the round trip. Returns whether it was
//! accepted.
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
    PluginTestProbe const* probe = findPluginTestProbe(creator.getPluginName());
    REQUIRE(probe != nullptr);
    probe->checkParameters(*plugin, restored.get());
    return true;
}

//! A fuzz case's tally of the collections the creators accepted and rejected.
struct FuzzRun
{
    int32_t accepted = 0;
    int32_t rejected = 0;

    //! exercise(), tallied.
    void tally(nvinfer1::IPluginCreatorV3One& creator, nvinfer1::PluginFieldCollection const* fc,
        nvinfer1::TensorRTPhase phase)
    {
        (exercise(creator, fc, phase) ? accepted : rejected) += 1;
    }

    //! tally() for every creator, in both phases.
    void tallyEveryCreator(nvinfer1::PluginFieldCollection const* fc)
    {
        for (auto phase : {nvinfer1::TensorRTPhase::kBUILD, nvinfer1::TensorRTPhase::kRUNTIME})
        {
            for (nvinfer1::IPluginCreatorV3One* creator : creators())
            {
                tally(*creator, fc, phase);
            }
        }
    }
};

//! Random fields over buffers of random bytes (fillRandom), 64 bytes each.
struct RandomFields
{
    std::vector<std::vector<unsigned char>> storage;
    std::vector<nvinfer1::PluginField> fields;

    nvinfer1::PluginFieldCollection collection()
    {
        int32_t const nbFields = static_cast<int32_t>(fields.size());
        return {nbFields, nbFields > 0 ? fields.data() : nullptr};
    }
};

//! 0 to `maxFields` random fields: each named from fieldNames() (nullptr one time in `nullNameOneIn`), its data its
//! buffer (nullptr one time in 19); then `typeAndLength(rng, field, buffer)` sets its type and length (and may write
//! the buffer).
template <typename TypeAndLength>
RandomFields randomFields(std::mt19937& rng, uint32_t maxFields, uint32_t nullNameOneIn, TypeAndLength typeAndLength)
{
    RandomFields r;
    size_t const nbFields = rng() % (maxFields + 1);
    r.storage.assign(nbFields, std::vector<unsigned char>(64));
    r.fields.resize(nbFields);
    for (size_t i = 0; i < nbFields; ++i)
    {
        fillRandom(rng, r.storage[i]);
        nvinfer1::PluginField& field = r.fields[i];
        field.name = rng() % nullNameOneIn == 0 ? nullptr : fieldNames()[rng() % fieldNames().size()].c_str();
        field.data = rng() % 19 == 0 ? nullptr : r.storage[i].data();
        typeAndLength(rng, field, r.storage[i]);
    }
    return r;
}

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
            RandomFields random = randomFields(rng, 8, 23,
                [](std::mt19937& draw, nvinfer1::PluginField& f, std::vector<unsigned char>&)
                {
                    f.type = draw() % 3 == 0 ? static_cast<PluginFieldType>(draw() % 16)
                                             : (draw() % 2 == 0 ? PluginFieldType::kINT32 : PluginFieldType::kFLOAT32);
                    // Lengths up to 4 elements of at most 8 bytes stay within the 64-byte buffers.
                    f.length = draw() % 4 == 0 ? static_cast<int32_t>(draw() % 7) - 2 : 1;
                });
            nvinfer1::PluginFieldCollection fc = random.collection();
            if (rng() % 50 == 0)
            {
                fc.fields = nullptr;
            }
            run.tallyEveryCreator(&fc);
        });
}

TEST_CASE("fuzz: truncated and mutated serialisations are rejected or valid")
{
    fuzz("mutated", 7,
        [](std::mt19937& rng, FuzzRun& run)
        {
            std::vector<nvinfer1::IPluginCreatorV3One*> const all = creators();
            nvinfer1::IPluginCreatorV3One& creator = *all[rng() % all.size()];
            PluginTestProbe const* probe = findPluginTestProbe(creator.getPluginName());
            REQUIRE(probe != nullptr);
            std::unique_ptr<nvinfer1::IPluginV3> source = probe->makeRandom(rng);
            REQUIRE(source != nullptr);
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
            run.tally(creator, &fc, nvinfer1::TensorRTPhase::kRUNTIME);
            // The other creators must never accept these fields at run time (names do not overlap).
            for (nvinfer1::IPluginCreatorV3One* other : all)
            {
                if (other != &creator && !fields.empty())
                {
                    CHECK(!exercise(*other, &fc, nvinfer1::TensorRTPhase::kRUNTIME));
                }
            }
        });
}

TEST_CASE("fuzz: random fields, string fields included, are rejected or valid")
{
    fuzz("string fields", 20261127,
        [](std::mt19937& rng, FuzzRun& run)
        {
            RandomFields random = randomFields(rng, 6, 29,
                [](std::mt19937& draw, nvinfer1::PluginField& field, std::vector<unsigned char>& bytes)
                {
                    int32_t const kind = static_cast<int32_t>(draw() % 4);
                    if (kind == 0)
                    {
                        // A string, its length with or without the NUL, sometimes cut short or negative.
                        std::string const& text = fieldStrings()[draw() % fieldStrings().size()];
                        std::memcpy(bytes.data(), text.c_str(), text.size() + 1);
                        field.type = PluginFieldType::kCHAR;
                        int32_t const cut = static_cast<int32_t>(draw() % 8);
                        field.length = static_cast<int32_t>(text.size()) + (cut == 0 ? 1 : (cut == 1 ? -1 : 0));
                        field.length = cut == 2 ? -1 : field.length;
                    }
                    else
                    {
                        field.type = kind == 1
                            ? PluginFieldType::kINT32
                            : (kind == 2 ? PluginFieldType::kFLOAT32 : static_cast<PluginFieldType>(draw() % 16));
                        field.length = draw() % 4 == 0 ? static_cast<int32_t>(draw() % 7) - 2 : 1;
                    }
                });
            nvinfer1::PluginFieldCollection fc = random.collection();
            run.tallyEveryCreator(&fc);
        });
}
