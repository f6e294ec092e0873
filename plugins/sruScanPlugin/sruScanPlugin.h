/*
 * SRUScan: the SRU elementwise recurrence as a TensorRT IPluginV3 plugin.
 *
 * Inputs: always exactly six, at fixed positions, whatever the attributes (the TensorRT node layout of
 * docs/ops.md; the exporter emits no empty-name slots for this target):
 *   0 U (L, B, D*d*k), 1 x, 2 weight_c (2*D*d), 3 bias (2*D*d), 4 c0 (B, D*d) fp32, 5 mask_pad (L, B) bool/uint8.
 * x is read only when the attributes say so (num_matrices = 3 with has_skip_term): then it is (L, B, D*d);
 * otherwise it is a dummy of any shape in the activation type, neither shape-checked nor read. mask_pad is
 * always a real mask (all false when the model has no padding).
 * Outputs: h (L, B, D*d) in U's type, c_last (B, D*d) fp32. Outputs never alias inputs: the plugin declares no
 * in-place I/O (no getAliasedInput), so c_last gets its own buffer; the runtime double-buffers state instead.
 * Roles come from positions and attributes, never from the number of inputs; any count but six is refused.
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

//! SRUScan's attributes, in field-table order (docs/ops.md, models/ops/spec.py SRU_SCAN).
struct SruScanParameters
{
    int32_t hiddenSize{0};
    int32_t numDirections{1};
    int32_t numMatrices{3};
    int32_t hasSkipTerm{1};
    int32_t useTanh{0};
    float scaleX{1.F};
};

//! Positions of SRUScan's inputs: fixed; `readsX` says whether x (position 1) is read or a dummy.
struct SruScanInputs
{
    int32_t U{0};
    int32_t x{1};
    int32_t weightC{2};
    int32_t bias{3};
    int32_t c0{4};
    int32_t maskPad{5};
    bool readsX{false};
};

class SruScanPlugin : public nvinfer1::IPluginV3,
                      public nvinfer1::IPluginV3OneCore,
                      public nvinfer1::IPluginV3OneBuild,
                      public nvinfer1::IPluginV3OneRuntime
{
public:
    static constexpr char const* kPLUGIN_NAME{"SRUScan"};
    static constexpr int32_t kNB_OUTPUTS{2};
    //! The TensorRT node always lists all six inputs (U, x, weight_c, bias, c0, mask_pad).
    static constexpr int32_t kNB_INPUTS{6};
    //! The field table: names, kinds, defaults; the single place SRUScan's fields are listed.
    static std::vector<FieldDesc> const& fieldTable();
    //! Parameters from fields (parseFields order); false with an error logged when a value is out of range.
    static bool fromFieldValues(std::vector<double> const& values, SruScanParameters& params) noexcept;
    //! The fixed input positions and whether x is read (from `params`). False when `nbInputs` is not exactly
    //! kNB_INPUTS; then an error naming the plugin (and `layer` when given), the expected and the given count is
    //! logged.
    static bool inputLayout(
        SruScanParameters const& params, int32_t nbInputs, SruScanInputs& inputs, char const* layer = nullptr) noexcept;

    SruScanPlugin(std::string const& name, SruScanParameters const& params);
    ~SruScanPlugin() override = default;

    SruScanParameters const& parameters() const noexcept
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
    //! Checks the ranks / extents of the input descriptors against the parameters; logs what is wrong.
    bool checkShapes(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs) const noexcept;

    std::string mName;
    SruScanParameters mParams;
    //! Number of inputs seen by onShapeChange / configurePlugin (0 before); enqueue refuses to run without six.
    int32_t mNbInputs{0};
    std::vector<nvinfer1::PluginField> mSerialized;
    nvinfer1::PluginFieldCollection mSerializedCollection{};
};

class SruScanPluginCreator : public nvinfer1::IPluginCreatorV3One
{
public:
    SruScanPluginCreator();
    ~SruScanPluginCreator() override = default;

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
