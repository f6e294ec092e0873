/*
 * CausalLinearAttention: causal linear attention with phi(x) = elu(x) + 1 as a TensorRT IPluginV3 plugin.
 *
 * Inputs: q, k (B, H, L, E), v (B, H, L, M) in fp32 / fp16 / bf16, then the optional fp32 state S0 (B, H, E, M)
 * and z0 (B, H, E) in that order with absent ones left out. With four inputs the fourth is S0 when it has four
 * dimensions and z0 when it has three.
 * Outputs: out (B, H, L, M) in q's type, S_last (B, H, E, M) and z_last (B, H, E) fp32.
 * S_last may alias S0 and z_last z0 when those are inputs (getAliasedInput).
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

//! Positions of the inputs; -1 marks an absent state input.
struct CausalLinearAttentionInputs
{
    int32_t q{0};
    int32_t k{1};
    int32_t v{2};
    int32_t S0{-1};
    int32_t z0{-1};
};

class CausalLinearAttentionPlugin : public nvinfer1::IPluginV3,
                                    public nvinfer1::IPluginV3OneCore,
                                    public nvinfer1::IPluginV3OneBuildV2,
                                    public nvinfer1::IPluginV3OneRuntime
{
public:
    static constexpr char const* kPLUGIN_NAME{"CausalLinearAttention"};
    static constexpr int32_t kNB_OUTPUTS{3};
    //! The field table: the single place CausalLinearAttention's fields are listed.
    static std::vector<FieldDesc> const& fieldTable();
    static bool fromFieldValues(std::vector<double> const& values, CausalLinearAttentionParameters& params) noexcept;
    //! Input positions from the number of inputs and, for four, the rank of the fourth (4: S0, 3: z0).
    static bool inputLayout(int32_t nbInputs, int32_t fourthRank, CausalLinearAttentionInputs& inputs) noexcept;

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

    // IPluginV3OneBuildV2
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
    int32_t getAliasedInput(int32_t outputIndex) noexcept override;

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
    //! Input positions seen by getOutputShapes / configurePlugin / onShapeChange (unset before), for aliasing.
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
