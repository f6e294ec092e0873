/*
 * Test double of the CausalLinearAttention launcher (causal_linear_attention/cuda/causal_linear_attention.h) for
 * rnnx_plugin_tests: records the arguments of the last call (recordedCall<AttentionCall>()) and returns
 * kernelsDouble().status, so enqueue is checked without a GPU.
 */
#include "kernelsDouble.h"
#include "causal_linear_attention/tests/causalLinearAttentionTestUtils.h"

namespace rnnx
{
namespace kernels
{

size_t causalLinearAttentionWorkspaceSize(const LinearAttentionParams& params, DataType /*type*/)
{
    return test::kernelsDouble().workspaceSize * static_cast<size_t>(params.batch > 0 ? 1 : 0);
}

cudaError_t causalLinearAttentionForward(const LinearAttentionParams& params, DataType type, const void* q,
    const void* k, const void* v, const float* S0, const float* z0, const void* mask_pad, void* out, float* S_last,
    float* z_last, void* workspace, cudaStream_t stream)
{
    test::AttentionCall& call = test::recordedCall<test::AttentionCall>();
    call = {{call.count + 1, params, type, stream}, q, k, v, S0, z0, mask_pad, out, S_last, z_last, workspace};
    return test::kernelsDouble().status;
}

} // namespace kernels
} // namespace rnnx
