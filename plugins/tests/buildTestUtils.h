/*
 * Helpers of the build-phase tests (plugins/<op>/tests/<opCamel>BuildTests.cpp): symbolic shapes through the
 * IExprBuilder test double, refused shapes, the format-combination matrix by tensor role, the build capability.
 */
#pragma once

#include "exprBuilderDouble.h"
#include "testHarness.h"
#include "testUtils.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace rnnx
{
namespace test
{

//! The build capability's interface info as TensorRT reads it: "PLUGIN_V3ONE_BUILD" version 1 is
//! IPluginV3OneBuild (no getAliasedInput: outputs never alias inputs); version 2 would be IPluginV3OneBuildV2.
inline std::string buildInterface(nvinfer1::IPluginV3& plugin)
{
    auto* capability = plugin.getCapabilityInterface(nvinfer1::PluginCapabilityType::kBUILD);
    if (capability == nullptr)
    {
        return "none";
    }
    nvinfer1::InterfaceInfo const info = capability->getInterfaceInfo();
    return std::string(info.kind) + " " + std::to_string(info.major) + "." + std::to_string(info.minor);
}

inline nvinfer1::DimsExprs exprs(std::vector<nvinfer1::IDimensionExpr const*> const& d)
{
    nvinfer1::DimsExprs e{};
    e.nbDims = static_cast<int32_t>(d.size());
    for (size_t i = 0; i < d.size(); ++i)
    {
        e.d[i] = d[i];
    }
    return e;
}

inline std::string text(nvinfer1::DimsExprs const& e)
{
    std::string s = "(";
    for (int32_t i = 0; i < e.nbDims; ++i)
    {
        s += (i > 0 ? ", " : "") + exprText(e.d[i]);
    }
    return s + ")";
}

inline std::vector<nvinfer1::DataType> const kAllTypes{nvinfer1::DataType::kFLOAT, nvinfer1::DataType::kHALF,
    nvinfer1::DataType::kINT8, nvinfer1::DataType::kINT32, nvinfer1::DataType::kBOOL, nvinfer1::DataType::kUINT8,
    nvinfer1::DataType::kFP8, nvinfer1::DataType::kBF16, nvinfer1::DataType::kINT64, nvinfer1::DataType::kINT4,
    nvinfer1::DataType::kFP4};

inline bool isActivation(nvinfer1::DataType t)
{
    return t == nvinfer1::DataType::kFLOAT || t == nvinfer1::DataType::kHALF || t == nvinfer1::DataType::kBF16;
}

//! One input of a plugin replaced by a shape getOutputShapes must refuse, and why.
struct BadInput
{
    char const* what;
    int32_t input;
    nvinfer1::DimsExprs dims;
};

//! Each of `bad`, put in place of its input in `base(input)` (six inputs), makes getOutputShapes fail and log a
//! line containing `message`.
inline void checkRefused(nvinfer1::IPluginV3OneBuild& plugin, std::vector<BadInput> const& bad,
    std::function<std::vector<nvinfer1::DimsExprs>(int32_t)> const& base, int32_t nbOutputs, std::string const& message,
    nvinfer1::IExprBuilder& b)
{
    std::vector<nvinfer1::DimsExprs> out(static_cast<size_t>(nbOutputs));
    for (BadInput const& c : bad)
    {
        std::vector<nvinfer1::DimsExprs> in = base(c.input);
        in[static_cast<size_t>(c.input)] = c.dims;
        takeLoggedMessages();
        RNNX_CHECK_OR(plugin.getOutputShapes(in.data(), 6, nullptr, 0, out.data(), nbOutputs, b) != 0, c.what, );
        RNNX_CHECK_OR(takeLoggedMessages().find(message) != std::string::npos, c.what, );
    }
}

//! supportsFormatCombination refuses every position of a node with `nbInputs` inputs and `nbOutputs` outputs (a count
//! the plugin does not take).
inline void checkCountRefusedAtEveryPosition(nvinfer1::IPluginV3OneBuild& plugin, int32_t nbInputs, int32_t nbOutputs)
{
    std::vector<nvinfer1::DynamicPluginTensorDesc> io(10, dynDesc(desc({1}, nvinfer1::DataType::kFLOAT)));
    for (int32_t pos = 0; pos < nbInputs + nbOutputs; ++pos)
    {
        CHECK(!plugin.supportsFormatCombination(pos, io.data(), nbInputs, nbOutputs));
    }
}

//! configurePlugin takes `nbInputs` inputs and `nbOutputs` outputs, refuses `wrongNbInputs` inputs logging `message`,
//! and getWorkspaceSize asks for no workspace.
inline void checkConfigureCountNoWorkspace(nvinfer1::IPluginV3OneBuild& plugin, int32_t nbInputs, int32_t nbOutputs,
    int32_t wrongNbInputs, std::string const& message)
{
    auto const d = dynDesc(desc({2, 3, 8}, nvinfer1::DataType::kHALF));
    std::vector<nvinfer1::DynamicPluginTensorDesc> in(static_cast<size_t>(std::max(nbInputs, wrongNbInputs)), d);
    std::vector<nvinfer1::DynamicPluginTensorDesc> out(static_cast<size_t>(nbOutputs), d);
    CHECK_EQ(plugin.configurePlugin(in.data(), nbInputs, out.data(), nbOutputs), 0);
    takeLoggedMessages();
    CHECK(plugin.configurePlugin(in.data(), wrongNbInputs, out.data(), nbOutputs) != 0);
    CHECK(takeLoggedMessages().find(message) != std::string::npos);
    CHECK_EQ(plugin.getWorkspaceSize(in.data(), nbInputs, out.data(), nbOutputs), size_t{0});
}

//! The roles of a plugin's tensors (inputs then outputs) for its format-combination rules.
enum Role
{
    kAct,
    kState,
    kMask
};

//! Every (first activation type, position, type at that position) combination of ``plugin``'s tensors, all linear and
//! of shape ``dims``: supported exactly when the position's role allows the type (activations fp32 / fp16 / bf16 and
//! all like the first, states fp32, masks int32 only: TensorRT has no bool / uint8 plugin tensors,
//! "nvinfer1::DataType:kBOOL and nvinfer1::DataType::kUINT8 are not supported", PluginTensorDesc::type in
//! NvInferRuntimePlugin.h), and never in kCHW32. Returns how many were checked.
template <typename Plugin>
inline int32_t checkFormatCombinations(
    Plugin& plugin, std::vector<Role> const& roles, int32_t nbInputs, std::vector<int64_t> const& dims)
{
    int32_t const nbOutputs = static_cast<int32_t>(roles.size()) - nbInputs;
    int32_t checked = 0;
    for (nvinfer1::DataType first : kAllTypes)
    {
        for (size_t pos = 0; pos < roles.size(); ++pos)
        {
            for (nvinfer1::DataType t : kAllTypes)
            {
                nvinfer1::DataType const type = pos == 0 ? first : t;
                std::vector<nvinfer1::DynamicPluginTensorDesc> io(roles.size(), dynDesc(desc(dims, first)));
                io[pos] = dynDesc(desc(dims, type));
                bool expected = false;
                switch (roles[pos])
                {
                case kAct: expected = isActivation(type) && type == first; break;
                case kState: expected = type == nvinfer1::DataType::kFLOAT; break;
                case kMask: expected = type == nvinfer1::DataType::kINT32; break;
                }
                CHECK_EQ(plugin.supportsFormatCombination(static_cast<int32_t>(pos), io.data(), nbInputs, nbOutputs),
                    expected);
                io[pos].desc.format = nvinfer1::TensorFormat::kCHW32;
                CHECK(!plugin.supportsFormatCombination(static_cast<int32_t>(pos), io.data(), nbInputs, nbOutputs));
                ++checked;
            }
        }
    }
    return checked;
}

//! getOutputShapes of `plugin` on `in` fails and logs a line containing every one of `messages`.
inline void checkShapeRefused(nvinfer1::IPluginV3OneBuild& plugin, std::vector<nvinfer1::DimsExprs> const& in,
    int32_t nbOutputs, std::vector<std::string> const& messages, nvinfer1::IExprBuilder& b, char const* what)
{
    std::vector<nvinfer1::DimsExprs> out(static_cast<size_t>(nbOutputs));
    takeLoggedMessages();
    RNNX_CHECK_OR(
        plugin.getOutputShapes(in.data(), static_cast<int32_t>(in.size()), nullptr, 0, out.data(), nbOutputs, b) != 0,
        what, );
    std::string const logged = takeLoggedMessages();
    for (std::string const& message : messages)
    {
        RNNX_CHECK_OR(logged.find(message) != std::string::npos,
            (std::string(what) + ": " + message + " in: " + logged).c_str(), );
    }
}

//! getOutputShapes with each of `counts` inputs (the first ones of `in`, its last one repeated past its end) fails,
//! logging `message` and "got <count>".
inline void checkInputCountsRefused(nvinfer1::IPluginV3OneBuild& plugin, std::vector<nvinfer1::DimsExprs> const& in,
    std::vector<int32_t> const& counts, int32_t nbOutputs, std::string const& message, nvinfer1::IExprBuilder& b)
{
    std::vector<nvinfer1::DimsExprs> out(static_cast<size_t>(nbOutputs));
    for (int32_t n : counts)
    {
        size_t const count = static_cast<size_t>(n);
        std::vector<nvinfer1::DimsExprs> other(
            in.begin(), in.begin() + static_cast<std::ptrdiff_t>(std::min(count, in.size())));
        other.resize(count, in.back());
        std::string const what = "refused with " + std::to_string(n) + " inputs";
        takeLoggedMessages();
        RNNX_CHECK_OR(plugin.getOutputShapes(other.data(), n, nullptr, 0, out.data(), nbOutputs, b) != 0, what, );
        std::string const logged = takeLoggedMessages();
        RNNX_CHECK_OR(logged.find(message) != std::string::npos, what + ": " + message + " in: " + logged, );
        RNNX_CHECK_OR(
            logged.find("got " + std::to_string(n)) != std::string::npos, what + ": got " + std::to_string(n), );
    }
}

//! One input of a plugin replaced by a shape getOutputShapes must refuse, and what its error must say.
struct RefusedInput
{
    char const* what;
    int32_t input;
    nvinfer1::DimsExprs dims;
    char const* message;
};

//! For each of `bad`: getOutputShapes on `base` with that input replaced fails, logging the case's message and every
//! one of `common` (the plugin's name, its fields).
inline void checkInputsRefused(nvinfer1::IPluginV3OneBuild& plugin, std::vector<nvinfer1::DimsExprs> const& base,
    std::vector<RefusedInput> const& bad, int32_t nbOutputs, std::vector<std::string> const& common,
    nvinfer1::IExprBuilder& b)
{
    for (RefusedInput const& x : bad)
    {
        std::vector<nvinfer1::DimsExprs> in = base;
        in[static_cast<size_t>(x.input)] = x.dims;
        std::vector<std::string> messages{x.message};
        messages.insert(messages.end(), common.begin(), common.end());
        checkShapeRefused(plugin, in, nbOutputs, messages, b, x.what);
    }
}

} // namespace test
} // namespace rnnx
