/*
 * CausalLinearAttention: causal linear attention with phi(x) = elu(x) + 1 as a TensorRT IPluginV3 plugin.
 *
 * Inputs: always exactly five, at fixed positions (the TensorRT node layout of docs/ops.md; the exporter emits
 * no empty-name slots for this target): 0 q, 1 k (B, H, L, E), 2 v (B, H, L, M) in fp32 / fp16 / bf16,
 * 3 S0 (B, H, E, M) and 4 z0 (B, H, E) in fp32 (zeros when the model gave no state).
 * Outputs: out (B, H, L, M) in q's type, S_last (B, H, E, M) and z_last (B, H, E) fp32.
 * Outputs never alias inputs: the plugin declares no in-place I/O (no getAliasedInput), so S_last and z_last get
 * their own buffers; the runtime double-buffers state instead. Any input count but five is refused.
 */
#pragma once

#include "common/pluginCommon.h"

#include <NvInferRuntime.h>

#include <string>
#include <vector>

namespace rnnx
{
namespace plugin
{

struct CausalLinearAttentionParameters
{
    float eps{1e-6F};
};

//! Positions of the inputs: fixed, every one always present.
struct CausalLinearAttentionInputs
{
    int32_t q{0};
    int32_t k{1};
    int32_t v{2};
    int32_t S0{3};
    int32_t z0{4};
};

class CausalLinearAttentionPlugin : public nvinfer1::IPluginV3,
                                    public nvinfer1::IPluginV3OneCore,
                                    public nvinfer1::IPluginV3OneBuild,
                                    public nvinfer1::IPluginV3OneRuntime
{
public:
    static constexpr char const* kPLUGIN_NAME{"CausalLinearAttention"};
    static constexpr int32_t kNB_OUTPUTS{3};
    //! The TensorRT node always lists all five inputs (q, k, v, S0, z0).
    static constexpr int32_t kNB_INPUTS{5};
    //! The field table: the single place CausalLinearAttention's fields are listed.
    static std::vector<FieldDesc> const& fieldTable();
    static bool fromFieldValues(std::vector<double> const& values, CausalLinearAttentionParameters& params) noexcept;
    //! The fixed input positions. False when `nbInputs` is not exactly kNB_INPUTS; then an error naming the
    //! plugin (and `layer` when given), the expected and the given count is logged.
    static bool inputLayout(
        int32_t nbInputs, CausalLinearAttentionInputs& inputs, char const* layer = nullptr) noexcept;

    CausalLinearAttentionPlugin(std::string const& name, CausalLinearAttentionParameters const& params);
    ~CausalLinearAttentionPlugin() override = default;

    CausalLinearAttentionParameters const& parameters() const noexcept
    {
        return mParams;
    }

    // IPluginV3
    nvinfer1::IPluginCapability* getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept override;
    nvinfer1::IPluginV3* clone() noexcept override;

    // IPluginV3OneCore
    char const* getPluginName() const noexcept override;
    char const* getPluginVersion() const noexcept override;
    char const* getPluginNamespace() const noexcept override;

    // IPluginV3OneBuild
    int32_t getNbOutputs() const noexcept override;
    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs, nvinfer1::DataType const* inputTypes,
        int32_t nbInputs) const noexcept override;
    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
        int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
        nvinfer1::IExprBuilder& exprBuilder) noexcept override;
    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
        int32_t nbOutputs) noexcept override;
    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override;
    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const noexcept override;

    // IPluginV3OneRuntime
    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) noexcept override;
    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override;
    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* context) noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept override;

private:
    bool checkShapes(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs) const noexcept;

    std::string mName;
    CausalLinearAttentionParameters mParams;
    //! Whether onShapeChange / configurePlugin accepted the inputs; enqueue refuses to run before.
    bool mLayoutKnown{false};
    CausalLinearAttentionInputs mLayout;
    std::vector<nvinfer1::PluginField> mSerialized;
    nvinfer1::PluginFieldCollection mSerializedCollection{};
};

class CausalLinearAttentionPluginCreator : public nvinfer1::IPluginCreatorV3One
{
public:
    CausalLinearAttentionPluginCreator();
    ~CausalLinearAttentionPluginCreator() override = default;

    char const* getPluginName() const noexcept override;
    char const* getPluginVersion() const noexcept override;
    char const* getPluginNamespace() const noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override;
    //! nullptr (with an error logged) for missing / unknown / wrongly typed / out-of-range fields.
    nvinfer1::IPluginV3* createPlugin(
        char const* name, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase phase) noexcept override;

private:
    std::vector<nvinfer1::PluginField> mFields;
    nvinfer1::PluginFieldCollection mFieldCollection{};
};

} // namespace plugin
} // namespace rnnx
