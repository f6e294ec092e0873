/*
 * Helpers shared by the test files: building PluginFieldCollections and tensor descriptors.
 */
#pragma once

#include "causal_conv_with_state/tensorrt/causalConvWithStatePlugin.h"
#include "causal_linear_attention/tensorrt/causalLinearAttentionPlugin.h"
#include "linear_recurrence/tensorrt/linearRecurrencePlugin.h"
#include "sru_scan/tensorrt/sruScanPlugin.h"

#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace rnnx
{
namespace test
{

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

//! All SRUScan fields with the ONNX parser's types (INT -> kINT32, FLOAT -> kFLOAT32).
inline Fields sruFields(int32_t hidden, int32_t directions = 1, int32_t matrices = 3, int32_t skip = 1,
    int32_t tanh = 0, float scaleX = 1.F)
{
    Fields f;
    f.i32("hidden_size", hidden)
        .i32("num_directions", directions)
        .i32("num_matrices", matrices)
        .i32("has_skip_term", skip)
        .i32("use_tanh", tanh)
        .f32("scale_x", scaleX);
    return f;
}

template <typename Plugin>
std::unique_ptr<Plugin> createAs(nvinfer1::IPluginCreatorV3One& creator, nvinfer1::PluginFieldCollection const* fc,
    nvinfer1::TensorRTPhase phase = nvinfer1::TensorRTPhase::kBUILD)
{
    return std::unique_ptr<Plugin>(static_cast<Plugin*>(creator.createPlugin("layer", fc, phase)));
}

inline std::unique_ptr<plugin::SruScanPlugin> makeSru(int32_t hidden, int32_t directions = 1, int32_t matrices = 3,
    int32_t skip = 1, int32_t tanh = 0, float scaleX = 1.F)
{
    plugin::SruScanPluginCreator creator;
    Fields f = sruFields(hidden, directions, matrices, skip, tanh, scaleX);
    return createAs<plugin::SruScanPlugin>(creator, f.get());
}

//! All CausalLinearAttention fields with the ONNX parser's types (INT -> kINT32, FLOAT -> kFLOAT32).
inline Fields attentionFields(int32_t heads, float eps = 1e-6F, int32_t timeMajor = 0)
{
    Fields f;
    f.f32("eps", eps).i32("num_heads", heads).i32("time_major", timeMajor);
    return f;
}

inline std::unique_ptr<plugin::CausalLinearAttentionPlugin> makeAttention(
    int32_t heads = 2, float eps = 1e-6F, int32_t timeMajor = 0)
{
    plugin::CausalLinearAttentionPluginCreator creator;
    Fields f = attentionFields(heads, eps, timeMajor);
    return createAs<plugin::CausalLinearAttentionPlugin>(creator, f.get());
}

//! All LinearRecurrence fields with the ONNX parser's types (INT -> kINT32, STRING -> kCHAR, FLOAT -> kFLOAT32).
inline Fields recurrenceFields(
    int32_t qHeads, int32_t kvHeads, std::string const& rule = "gated_delta", float scale = 0.F)
{
    Fields f;
    f.i32("q_num_heads", qHeads).i32("kv_num_heads", kvHeads).str("update_rule", rule).f32("scale", scale);
    return f;
}

inline std::unique_ptr<plugin::LinearRecurrencePlugin> makeRecurrence(
    int32_t qHeads = 4, int32_t kvHeads = 2, std::string const& rule = "gated_delta", float scale = 0.F)
{
    plugin::LinearRecurrencePluginCreator creator;
    Fields f = recurrenceFields(qHeads, kvHeads, rule, scale);
    return createAs<plugin::LinearRecurrencePlugin>(creator, f.get());
}

//! The CausalConvWithState field as the ONNX parser passes it (STRING -> kCHAR).
inline Fields convFields(std::string const& activation = "none")
{
    Fields f;
    f.str("activation", activation);
    return f;
}

inline std::unique_ptr<plugin::CausalConvWithStatePlugin> makeConv(std::string const& activation = "none")
{
    plugin::CausalConvWithStatePluginCreator creator;
    Fields f = convFields(activation);
    return createAs<plugin::CausalConvWithStatePlugin>(creator, f.get());
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

} // namespace test
} // namespace rnnx
