/*
 * Test helpers of the CausalLinearAttention plugin: its fields as the ONNX parser passes them, a plugin made from them,
 * and the record of the last call of its launcher's test double (causalLinearAttentionKernelDouble.cpp).
 */
#pragma once

#include "causal_linear_attention/cuda/causal_linear_attention.h"
#include "causal_linear_attention/tensorrt/causalLinearAttentionPlugin.h"
#include "kernelsDouble.h"
#include "testUtils.h"

#include <memory>
#include <ostream>
#include <string>

namespace rnnx
{
namespace test
{

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
    return makeFromFields<plugin::CausalLinearAttentionPlugin, plugin::CausalLinearAttentionPluginCreator>(
        attentionFields(heads, eps, timeMajor));
}

//! The arguments of the last call of the launcher's test double (recordedCall<AttentionCall>(), kernelsDouble.h).
struct AttentionCall : LaunchRecord<kernels::LinearAttentionParams>
{
    void const* q{};
    void const* k{};
    void const* v{};
    float const* S0{};
    float const* z0{};
    void const* maskPad{};
    void* out{};
    float* SLast{};
    float* zLast{};
    void* workspace{};
};

} // namespace test
} // namespace rnnx
