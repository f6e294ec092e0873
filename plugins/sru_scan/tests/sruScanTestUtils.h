/*
 * Test helpers of the SRUScan plugin: its fields as the ONNX parser passes them, a plugin made from them, and
 * the record of the last call of its launcher's test double (sruScanKernelDouble.cpp).
 */
#pragma once

#include "sru_scan/cuda/sru_scan.h"
#include "sru_scan/tensorrt/sruScanPlugin.h"
#include "kernelsDouble.h"
#include "testUtils.h"

#include <memory>
#include <ostream>
#include <string>

namespace rnnx
{
namespace test
{

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

inline std::unique_ptr<plugin::SruScanPlugin> makeSru(int32_t hidden, int32_t directions = 1, int32_t matrices = 3,
    int32_t skip = 1, int32_t tanh = 0, float scaleX = 1.F)
{
    return makeFromFields<plugin::SruScanPlugin, plugin::SruScanPluginCreator>(
        sruFields(hidden, directions, matrices, skip, tanh, scaleX));
}

//! The arguments of the last call of the launcher's test double (recordedCall<SruScanCall>(), kernelsDouble.h).
struct SruScanCall : LaunchRecord<kernels::SruScanParams>
{
    void const* U{};
    void const* x{};
    void const* weightC{};
    void const* bias{};
    float const* c0{};
    void const* maskPad{};
    void* h{};
    float* cLast{};
};

//! SRUScan parameters compared field by field, and printed in field-table order (for CHECK_EQ).
inline bool operator==(plugin::SruScanParameters const& a, plugin::SruScanParameters const& b)
{
    return a.hiddenSize == b.hiddenSize && a.numDirections == b.numDirections && a.numMatrices == b.numMatrices
        && a.hasSkipTerm == b.hasSkipTerm && a.useTanh == b.useTanh && a.scaleX == b.scaleX;
}

inline std::ostream& operator<<(std::ostream& out, plugin::SruScanParameters const& p)
{
    return out << "{" << p.hiddenSize << ", " << p.numDirections << ", " << p.numMatrices << ", " << p.hasSkipTerm
               << ", " << p.useTanh << ", " << p.scaleX << "}";
}

} // namespace test
} // namespace rnnx
