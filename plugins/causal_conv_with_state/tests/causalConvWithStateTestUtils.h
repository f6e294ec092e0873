/*
 * Test helpers of the CausalConvWithState plugin: its fields as the ONNX parser passes them, a plugin made from them,
 * and the record of the last call of its launcher's test double (causalConvWithStateKernelDouble.cpp).
 */
#pragma once

#include "causal_conv_with_state/cuda/causal_conv_with_state.h"
#include "causal_conv_with_state/tensorrt/causalConvWithStatePlugin.h"
#include "kernelsDouble.h"
#include "testUtils.h"

#include <memory>
#include <ostream>
#include <string>

namespace rnnx
{
namespace test
{

//! The CausalConvWithState field as the ONNX parser passes it (STRING -> kCHAR).
inline Fields convFields(std::string const& activation = "none")
{
    Fields f;
    f.str("activation", activation);
    return f;
}

inline std::unique_ptr<plugin::CausalConvWithStatePlugin> makeConv(std::string const& activation = "none")
{
    return makeFromFields<plugin::CausalConvWithStatePlugin, plugin::CausalConvWithStatePluginCreator>(
        convFields(activation));
}

//! The arguments of the last call of the launcher's test double (recordedCall<CausalConvCall>(), kernelsDouble.h).
struct CausalConvCall : LaunchRecord<kernels::CausalConvParams>
{
    void const* input{};
    void const* weight{};
    void const* bias{};
    float const* pastState{};
    void const* maskPad{};
    void* output{};
    float* presentState{};
};

} // namespace test
} // namespace rnnx
