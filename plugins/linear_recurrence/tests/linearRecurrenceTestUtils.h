/*
 * Test helpers of the LinearRecurrence plugin: its fields as the ONNX parser passes them, a plugin made from them, and
 * the record of the last call of its launcher's test double (linearRecurrenceKernelDouble.cpp).
 */
#pragma once

#include "linear_recurrence/cuda/linear_recurrence.h"
#include "linear_recurrence/tensorrt/linearRecurrencePlugin.h"
#include "kernelsDouble.h"
#include "testUtils.h"

#include <memory>
#include <ostream>
#include <string>

namespace rnnx
{
namespace test
{

//! All LinearRecurrence fields with the ONNX parser's types (INT -> kINT32, STRING -> kCHAR, FLOAT -> kFLOAT32).
inline Fields recurrenceFields(
    int32_t qHeads, int32_t kvHeads, std::string const& rule = "gated_delta", float scale = 0.F, int32_t qkL2Norm = 0)
{
    Fields f;
    f.i32("q_num_heads", qHeads).i32("kv_num_heads", kvHeads).str("update_rule", rule).f32("scale", scale);
    f.i32("qk_l2_norm", qkL2Norm);
    return f;
}

inline std::unique_ptr<plugin::LinearRecurrencePlugin> makeRecurrence(int32_t qHeads = 4, int32_t kvHeads = 2,
    std::string const& rule = "gated_delta", float scale = 0.F, int32_t qkL2Norm = 0)
{
    return makeFromFields<plugin::LinearRecurrencePlugin, plugin::LinearRecurrencePluginCreator>(
        recurrenceFields(qHeads, kvHeads, rule, scale, qkL2Norm));
}

//! The arguments of the last call of the launcher's test double (recordedCall<LinearRecurrenceCall>(),
//! kernelsDouble.h).
struct LinearRecurrenceCall : LaunchRecord<kernels::LinearRecurrenceParams>
{
    void const* query{};
    void const* key{};
    void const* value{};
    float const* pastState{};
    void const* decay{};
    void const* beta{};
    void const* maskPad{};
    void* output{};
    float* presentState{};
    kernels::LinearRecurrenceNormaliser const* normaliser{};
};

} // namespace test
} // namespace rnnx
