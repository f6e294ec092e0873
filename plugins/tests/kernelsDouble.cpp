#include "kernelsDouble.h"

namespace rnnx
{
namespace test
{

KernelsDouble& kernelsDouble()
{
    static KernelsDouble state;
    return state;
}

} // namespace test

namespace kernels
{

cudaError_t sruScanForward(const SruScanParams& params, DataType type, const void* U, const void* x,
    const void* weight_c, const void* bias, const float* c0, const void* mask_pad, void* h, float* c_last,
    cudaStream_t stream)
{
    test::SruScanCall& call = test::kernelsDouble().sru;
    call = {call.count + 1, params, type, U, x, weight_c, bias, c0, mask_pad, h, c_last, stream};
    return test::kernelsDouble().status;
}

size_t causalLinearAttentionWorkspaceSize(const LinearAttentionParams& params, DataType /*type*/)
{
    return test::kernelsDouble().workspaceSize * static_cast<size_t>(params.batch > 0 ? 1 : 0);
}

cudaError_t causalLinearAttentionForward(const LinearAttentionParams& params, DataType type, const void* q,
    const void* k, const void* v, const float* S0, const float* z0, const void* mask_pad, void* out, float* S_last,
    float* z_last, void* workspace, cudaStream_t stream)
{
    test::AttentionCall& call = test::kernelsDouble().attention;
    call = {call.count + 1, params, type, q, k, v, S0, z0, mask_pad, out, S_last, z_last, workspace, stream};
    return test::kernelsDouble().status;
}

cudaError_t linearRecurrenceForward(const LinearRecurrenceParams& params, DataType type, const void* query,
    const void* key, const void* value, const float* past_state, const void* decay, const void* beta,
    const void* mask_pad, void* output, float* present_state, cudaStream_t stream)
{
    test::LinearRecurrenceCall& call = test::kernelsDouble().recurrence;
    call = {call.count + 1, params, type, query, key, value, past_state, decay, beta, mask_pad, output, present_state,
        stream};
    return test::kernelsDouble().status;
}

cudaError_t causalConvWithStateForward(const CausalConvParams& params, DataType type, const void* input,
    const void* weight, const void* bias, const float* past_state, const void* mask_pad, void* output,
    float* present_state, cudaStream_t stream)
{
    test::CausalConvCall& call = test::kernelsDouble().conv;
    call = {call.count + 1, params, type, input, weight, bias, past_state, mask_pad, output, present_state, stream};
    return test::kernelsDouble().status;
}

} // namespace kernels
} // namespace rnnx
