/*
 * SRUScan: the SRU elementwise recurrence as a TensorRT IPluginV3 plugin.
 *
 * Inputs: always exactly six, at fixed positions, whatever the attributes (the TensorRT node layout of
 * docs/ops.md; the exporter emits no empty-name slots for this target):
 *   0 U (L, B, D*d*k), 1 x, 2 weight_c (2*D*d), 3 bias (2*D*d), 4 c0 (B, D*d) fp32, 5 mask_pad (L, B) int32.
 * x is read only when the attributes say so (num_matrices = 3 with has_skip_term): then it is (L, B, D*d);
 * otherwise it is a dummy of any shape in the activation type, neither shape-checked nor read. mask_pad is
 * always a real mask (all false when the model has no padding).
 * Outputs: h (L, B, D*d) in U's type, c_last (B, D*d) fp32. Outputs never alias inputs: the plugin declares no
 * in-place I/O (no getAliasedInput), so c_last gets its own buffer; the runtime double-buffers state instead.
 * Roles come from positions and attributes, never from the number of inputs; any count but six is refused.
 */
#pragma once

#include "common/pluginBase.h"

#include <NvInferRuntime.h>

#include <vector>

namespace rnnx
{
namespace plugin
{

//! SRUScan's attributes, in field-table order (docs/ops.md, runtime/contract/ops.py SRU_SCAN).
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

class SruScanPlugin : public PluginBase<SruScanPlugin, SruScanParameters, SruScanInputs>
{
public:
    //! The TensorRT node always lists all six inputs (U, x, weight_c, bias, c0, mask_pad); two outputs.
    static constexpr PluginSignature kSIGNATURE{
        "SRUScan", 6, 2, "U, x, weight_c, bias, c0, mask_pad; x is a dummy unless num_matrices = 3 with has_skip_term"};
    //! The fixed input positions and whether x is read (from `params`).
    static SruScanInputs inputsFor(SruScanParameters const& params) noexcept;

    RNNX_PLUGIN_HOOKS();
};

using SruScanPluginCreator = PluginCreator<SruScanPlugin>;

} // namespace plugin
} // namespace rnnx
