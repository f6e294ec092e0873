/*
 * Helpers shared by the test files, op-agnostic: building PluginFieldCollections and tensor descriptors, refused
 * fields, fake device pointers, and the registry of plugin test probes (what the shared tests need to know of an
 * op's plugin that its creator does not say), which each op's tests fill (RNNX_PLUGIN_TEST_PROBE in
 * plugins/<op>/tests/). An op's own helpers are in plugins/<op>/tests/<opCamel>TestUtils.h.
 */
#pragma once

#include "common/pluginCommon.h"
#include "testHarness.h"

#include <NvInferRuntime.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace rnnx
{
namespace test
{

//! A test executable's sink for the plugins' log (plugin::setLogSink): counts every error for the running test case
//! (countLoggedError, takeLoggedErrors); with `kEcho`, also prints it.
template <bool kEcho> void errorCountingLogSink(plugin::Severity severity, char const* message)
{
    if (severity <= plugin::Severity::kERROR)
    {
        countLoggedError(message);
        if (kEcho)
        {
            std::cout << "  plugin error: " << message << "\n";
        }
    }
}

//! Owns the values and names behind a PluginFieldCollection.
class Fields
{
public:
    template <typename T>
    Fields& add(std::string const& name, T value, nvinfer1::PluginFieldType type, int32_t length = 1)
    {
        auto& bytes = mData.emplace_back(sizeof(T));
        std::memcpy(bytes.data(), &value, sizeof(T));
        mNames.push_back(name);
        mDataIndex.push_back(static_cast<int32_t>(mData.size()) - 1);
        mFields.emplace_back(nullptr, bytes.data(), type, length);
        return *this;
    }
    Fields& i32(std::string const& name, int32_t v)
    {
        return add(name, v, nvinfer1::PluginFieldType::kINT32);
    }
    Fields& i64(std::string const& name, int64_t v)
    {
        return add(name, v, nvinfer1::PluginFieldType::kINT64);
    }
    Fields& f32(std::string const& name, float v)
    {
        return add(name, v, nvinfer1::PluginFieldType::kFLOAT32);
    }
    Fields& f64(std::string const& name, double v)
    {
        return add(name, v, nvinfer1::PluginFieldType::kFLOAT64);
    }
    Fields& str(std::string const& name, std::string const& v)
    {
        auto& bytes = mData.emplace_back(v.begin(), v.end());
        mNames.push_back(name);
        mDataIndex.push_back(static_cast<int32_t>(mData.size()) - 1);
        mFields.emplace_back(nullptr, bytes.data(), nvinfer1::PluginFieldType::kCHAR, static_cast<int32_t>(v.size()));
        return *this;
    }
    //! A field with raw contents (name may be nullptr, data nullptr).
    Fields& raw(char const* name, void const* data, nvinfer1::PluginFieldType type, int32_t length)
    {
        mNames.push_back(name != nullptr ? name : "");
        mDataIndex.push_back(-1);
        mFields.emplace_back(nullptr, data, type, length);
        mNullName.resize(mFields.size(), false);
        mNullName.back() = name == nullptr;
        return *this;
    }
    nvinfer1::PluginFieldCollection const* get()
    {
        mNullName.resize(mFields.size(), false);
        for (size_t i = 0; i < mFields.size(); ++i)
        {
            mFields[i].name = mNullName[i] ? nullptr : mNames[i].c_str();
            if (mDataIndex[i] >= 0)
            {
                mFields[i].data = mData[static_cast<size_t>(mDataIndex[i])].data();
            }
        }
        mCollection.nbFields = static_cast<int32_t>(mFields.size());
        mCollection.fields = mFields.data();
        return &mCollection;
    }

private:
    std::deque<std::vector<char>> mData;
    std::deque<std::string> mNames;
    std::vector<nvinfer1::PluginField> mFields;
    std::vector<bool> mNullName;
    //! Which mData entry a field's data is (-1: raw pointer given by the test), so copies stay valid.
    std::vector<int32_t> mDataIndex;
    nvinfer1::PluginFieldCollection mCollection{};
};

template <typename Plugin>
std::unique_ptr<Plugin> createAs(nvinfer1::IPluginCreatorV3One& creator, nvinfer1::PluginFieldCollection const* fc,
    nvinfer1::TensorRTPhase phase = nvinfer1::TensorRTPhase::kBUILD)
{
    return std::unique_ptr<Plugin>(static_cast<Plugin*>(creator.createPlugin("layer", fc, phase)));
}

inline nvinfer1::Dims dims(std::vector<int64_t> const& extents)
{
    nvinfer1::Dims d{};
    d.nbDims = static_cast<int32_t>(extents.size());
    for (size_t i = 0; i < extents.size(); ++i)
    {
        d.d[i] = extents[i];
    }
    return d;
}

inline nvinfer1::PluginTensorDesc desc(std::vector<int64_t> const& extents, nvinfer1::DataType type,
    nvinfer1::TensorFormat format = nvinfer1::TensorFormat::kLINEAR)
{
    nvinfer1::PluginTensorDesc t{};
    t.dims = dims(extents);
    t.type = type;
    t.format = format;
    t.scale = 1.F;
    return t;
}

inline nvinfer1::DynamicPluginTensorDesc dynDesc(nvinfer1::PluginTensorDesc const& t)
{
    nvinfer1::DynamicPluginTensorDesc d{};
    d.desc = t;
    d.min = t.dims;
    d.opt = t.dims;
    d.max = t.dims;
    return d;
}

//! createPlugin must return nullptr and log at least one error; a failure names the caller's `file` and `line` (and
//! `what`, when given).
inline void expectRejected(nvinfer1::IPluginCreatorV3One& creator, Fields& fields, nvinfer1::TensorRTPhase phase,
    char const* file, int line, std::string const& what = {})
{
    std::string const suffix = what.empty() ? "" : " (" + what + ")";
    takeLoggedErrors();
    nvinfer1::IPluginV3* plugin = creator.createPlugin("bad", fields.get(), phase);
    if (plugin != nullptr)
    {
        fail(file, line, "createPlugin accepted bad fields" + suffix);
        delete plugin;
    }
    if (takeLoggedErrors() == 0)
    {
        fail(file, line, "no error logged for bad fields" + suffix);
    }
}

//! expectRejected for each of `cases` in `phase`; a failure names the caller's `file` and `line` and the case's index.
inline void expectEachRejected(nvinfer1::IPluginCreatorV3One& creator, std::vector<Fields> cases,
    nvinfer1::TensorRTPhase phase, char const* file, int line)
{
    for (size_t i = 0; i < cases.size(); ++i)
    {
        expectRejected(creator, cases[i], phase, file, line, "case " + std::to_string(i));
    }
}

//! createPlugin must refuse `fields` in the build phase and log a message containing `message`; a failure names the
//! caller's `file` and `line`.
inline void expectRejectedWith(
    nvinfer1::IPluginCreatorV3One& creator, Fields fields, std::string const& message, char const* file, int line)
{
    takeLoggedMessages();
    nvinfer1::IPluginV3* plugin = creator.createPlugin("bad", fields.get(), nvinfer1::TensorRTPhase::kBUILD);
    if (plugin != nullptr)
    {
        fail(file, line, "createPlugin accepted bad fields");
        delete plugin;
    }
    std::string const logged = takeLoggedMessages();
    if (logged.find(message) == std::string::npos)
    {
        fail(file, line, "no error '" + message + "' in: " + logged);
    }
}

//! One field a creator reports, as a test states it: name, reported type, required, default (string fields: the
//! default choice; other fields: ignored).
struct CreatorFieldRow
{
    char const* name;
    nvinfer1::PluginFieldType type;
    bool required;
    char const* defaultText;
};

//! Checks `creator`'s getFieldNames() against the plugin's field `table`: one field per row, in order, named as the
//! row, of the row's serialized type, length 1. With `rows` (when not empty) also checks the table against the rows the
//! test states: names, reported types, required flags, and string fields' default choices.
inline void checkCreatorFields(nvinfer1::IPluginCreatorV3One& creator, std::vector<plugin::FieldDesc> const& table,
    std::vector<CreatorFieldRow> const& rows = {})
{
    nvinfer1::PluginFieldCollection const* fc = creator.getFieldNames();
    REQUIRE(fc != nullptr);
    REQUIRE(fc->nbFields == static_cast<int32_t>(table.size()));
    for (size_t i = 0; i < table.size(); ++i)
    {
        CHECK_EQ(std::string(fc->fields[i].name), std::string(table[i].name));
        CHECK(fc->fields[i].type == plugin::serializedType(table[i].kind));
        CHECK_EQ(fc->fields[i].length, 1);
    }
    if (rows.empty())
    {
        return;
    }
    REQUIRE(table.size() == rows.size());
    for (size_t i = 0; i < rows.size(); ++i)
    {
        CHECK_EQ(std::string(fc->fields[i].name), std::string(rows[i].name));
        CHECK(fc->fields[i].type == rows[i].type);
        CHECK_EQ(table[i].required, rows[i].required);
        if (table[i].kind == plugin::FieldKind::kSTRING)
        {
            CHECK_EQ(std::string(table[i].choices.at(static_cast<size_t>(table[i].defaultValue))),
                std::string(rows[i].defaultText));
        }
    }
}

//! Checks what `creator` says of itself: its plugin name `name`, version "2", namespace "rnnx", V3One interface.
inline void checkCreatorIdentity(nvinfer1::IPluginCreatorV3One& creator, std::string const& name)
{
    CHECK_EQ(std::string(creator.getPluginName()), name);
    CHECK_EQ(std::string(creator.getPluginVersion()), "2");
    CHECK_EQ(std::string(creator.getPluginNamespace()), "rnnx");
    CHECK_EQ(std::string(creator.getInterfaceInfo().kind), "PLUGIN CREATOR_V3ONE");
}

//! A plugin made by a fresh `Creator` from `fields` in the build phase (nullptr when the creator refuses them).
template <typename Plugin, typename Creator> std::unique_ptr<Plugin> makeFromFields(Fields fields)
{
    Creator creator;
    return createAs<Plugin>(creator, fields.get());
}

//! The parameters of the plugin a fresh `Creator` makes from `fields` in the build phase (REQUIREs that it makes one).
template <typename Plugin, typename Creator> auto parametersFrom(Fields fields)
{
    std::unique_ptr<Plugin> const plugin = makeFromFields<Plugin, Creator>(std::move(fields));
    REQUIRE(plugin != nullptr);
    return plugin->parameters();
}

//! Distinct fake device addresses.
inline void* address(uintptr_t i)
{
    return reinterpret_cast<void*>(0x1000 * (i + 1));
}

//! A fake stream.
inline cudaStream_t const kStream = reinterpret_cast<cudaStream_t>(0xabc0);

//! `n` distinct fake device addresses, address(0) .. address(n - 1) (a plugin's input pointers).
inline std::vector<void const*> addresses(int32_t n)
{
    std::vector<void const*> out;
    for (int32_t i = 0; i < n; ++i)
    {
        out.push_back(address(static_cast<uintptr_t>(i)));
    }
    return out;
}

//! onShapeChange with `n` inputs (of a fixed made-up shape) and `nbOutputs` outputs must fail, logging `expected` and
//! "got <n>".
inline void expectInputCountRefused(
    nvinfer1::IPluginV3OneRuntime& plugin, int32_t n, int32_t nbOutputs, std::string const& expected)
{
    std::vector<nvinfer1::PluginTensorDesc> const in(8, desc({2, 2, 16}, nvinfer1::DataType::kFLOAT));
    std::vector<nvinfer1::PluginTensorDesc> const out(3, desc({2, 2, 4}, nvinfer1::DataType::kFLOAT));
    takeLoggedMessages();
    CHECK(plugin.onShapeChange(in.data(), n, out.data(), nbOutputs) != 0);
    std::string const logged = takeLoggedMessages();
    CHECK(logged.find(expected) != std::string::npos);
    CHECK(logged.find("got " + std::to_string(n)) != std::string::npos);
}

//! One input of a good shape list replaced by a bad one, and the text onShapeChange's error must contain.
struct BadShape
{
    int32_t input;
    nvinfer1::PluginTensorDesc d;
    char const* message;
};

//! For each of `bad`: onShapeChange with `good` but that input replaced must fail, logging its message and `prefix`.
inline void expectShapesRefused(nvinfer1::IPluginV3OneRuntime& plugin,
    std::vector<nvinfer1::PluginTensorDesc> const& good, std::vector<nvinfer1::PluginTensorDesc> const& out,
    std::vector<BadShape> const& bad, std::string const& prefix)
{
    for (BadShape const& x : bad)
    {
        auto in = good;
        in[static_cast<size_t>(x.input)] = x.d;
        takeLoggedMessages();
        CHECK(plugin.onShapeChange(
                  in.data(), static_cast<int32_t>(in.size()), out.data(), static_cast<int32_t>(out.size()))
            != 0);
        std::string const logged = takeLoggedMessages();
        RNNX_CHECK_OR(logged.find(x.message) != std::string::npos, logged.c_str(), );
        CHECK(logged.find(prefix) != std::string::npos);
    }
}

//! What the op-agnostic tests (testMain's --fields, the fuzz tests) need to know of one op's plugin beyond its
//! creator: registered by the op's tests with RNNX_PLUGIN_TEST_PROBE, looked up by plugin name.
struct PluginTestProbe
{
    //! The plugin name, as its creator's getPluginName().
    char const* name;
    //! The plugin's field table (defaults and required flags, which getFieldNames does not give).
    std::function<std::vector<plugin::FieldDesc> const&()> fieldTable;
    //! A plugin as the op's tests make it (for --fields).
    std::function<std::unique_ptr<nvinfer1::IPluginV3>()> make;
    //! A plugin with random valid fields (a source of serialisations to mutate).
    std::function<std::unique_ptr<nvinfer1::IPluginV3>(std::mt19937&)> makeRandom;
    //! Checks (CHECK) that `plugin`'s parameters are in range and that `restored` (its round trip, may be null) has
    //! the same ones.
    std::function<void(nvinfer1::IPluginV3& plugin, nvinfer1::IPluginV3* restored)> checkParameters;
};

//! Every registered probe, in registration order.
inline std::vector<PluginTestProbe>& pluginTestProbes()
{
    static std::vector<PluginTestProbe> probes;
    return probes;
}

//! The probe of the plugin named `name`, or nullptr.
inline PluginTestProbe const* findPluginTestProbe(char const* name)
{
    for (PluginTestProbe const& probe : pluginTestProbes())
    {
        if (std::strcmp(probe.name, name) == 0)
        {
            return &probe;
        }
    }
    return nullptr;
}

struct PluginTestProbeRegistrar
{
    explicit PluginTestProbeRegistrar(PluginTestProbe probe)
    {
        pluginTestProbes().push_back(std::move(probe));
    }
};

} // namespace test
} // namespace rnnx

//! Registers the probe of an op's plugin (a PluginTestProbe initializer), once, in one of the op's test files.
#define RNNX_PLUGIN_TEST_PROBE(...)                                                                                    \
    static ::rnnx::test::PluginTestProbeRegistrar const RNNX_CONCAT(pluginTestProbe_, __LINE__)(                       \
        ::rnnx::test::PluginTestProbe{__VA_ARGS__})
