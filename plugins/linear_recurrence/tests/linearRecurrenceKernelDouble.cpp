/*
 * Test double of the LinearRecurrence launcher (linear_recurrence/cuda/linear_recurrence.h) for rnnx_plugin_tests:
 * records the arguments of the last call (recordedCall<LinearRecurrenceCall>()) and returns kernelsDouble().status, so
 * enqueue is checked without a GPU.
 */
#include "kernelsDouble.h"
#include "linear_recurrence/tests/linearRecurrenceTestUtils.h"

namespace rnnx
{
namespace kernels
{

cudaError_t linearRecurrenceForward(const LinearRecurrenceParams& params, DataType type, const void* query,
    const void* key, const void* value, const float* past_state, const void* decay, const void* beta,
    const void* mask_pad, void* output, float* present_state, cudaStream_t stream,
    const LinearRecurrenceNormaliser* normaliser)
{
    test::LinearRecurrenceCall& call = test::recordedCall<test::LinearRecurrenceCall>();
    call = {{call.count + 1, params, type, stream}, query, key, value, past_state, decay, beta, mask_pad, output,
        present_state, normaliser};
    return test::kernelsDouble().status;
}

} // namespace kernels
} // namespace rnnx
