/*
 * Test double of the CausalConvWithState launcher (causal_conv_with_state/cuda/causal_conv_with_state.h) for
 * rnnx_plugin_tests: records the arguments of the last call (recordedCall<CausalConvCall>()) and returns
 * kernelsDouble().status, so enqueue is checked without a GPU.
 */
#include "kernelsDouble.h"
#include "causal_conv_with_state/tests/causalConvWithStateTestUtils.h"

namespace rnnx
{
namespace kernels
{

cudaError_t causalConvWithStateForward(const CausalConvParams& params, DataType type, const void* input,
    const void* weight, const void* bias, const float* past_state, const void* mask_pad, void* output,
    float* present_state, cudaStream_t stream)
{
    test::CausalConvCall& call = test::recordedCall<test::CausalConvCall>();
    call = {{call.count + 1, params, type, stream}, input, weight, bias, past_state, mask_pad, output, present_state};
    return test::kernelsDouble().status;
}

} // namespace kernels
} // namespace rnnx
