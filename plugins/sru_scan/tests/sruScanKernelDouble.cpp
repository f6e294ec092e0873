/*
 * Test double of the SRUScan launcher (sru_scan/cuda/sru_scan.h) for rnnx_plugin_tests: records the arguments of the
 * last call (recordedCall<SruScanCall>()) and returns kernelsDouble().status, so enqueue is checked without a GPU.
 */
#include "kernelsDouble.h"
#include "sru_scan/tests/sruScanTestUtils.h"

namespace rnnx
{
namespace kernels
{

cudaError_t sruScanForward(const SruScanParams& params, DataType type, const void* U, const void* x,
    const void* weight_c, const void* bias, const float* c0, const void* mask_pad, void* h, float* c_last,
    cudaStream_t stream)
{
    test::SruScanCall& call = test::recordedCall<test::SruScanCall>();
    call = {{call.count + 1, params, type, stream}, U, x, weight_c, bias, c0, mask_pad, h, c_last};
    return test::kernelsDouble().status;
}

} // namespace kernels
} // namespace rnnx
