// SRU scan forward (rnnx::kernels::sruScanForward): one thread per (batch, direction, hidden unit)
// column, sequential over time, the cell state in a register, all arithmetic in fp32.
//
// A thread loads the inputs of kStepsPerLoad time steps at once (independent loads in flight
// together) and then runs those steps one after another, so the scan is limited by memory
// bandwidth rather than by the latency of one step's loads. Neighbouring threads handle
// neighbouring hidden units, so every step reads and writes neighbouring memory.
#include "sru_scan/cuda/sru_scan.h"
#include "type_utils.cuh"

namespace rnnx
{
namespace kernels
{
namespace
{

constexpr int kThreads = 128;
constexpr int kStepsPerLoad = 8;

template <typename T, int K>
__global__ void __launch_bounds__(kThreads) sruScanKernel(SruScanParams p, const T* __restrict__ U,
    const T* __restrict__ x, const T* __restrict__ weight_c, const T* __restrict__ bias, const float* c0,
    const void* __restrict__ mask_pad, T* __restrict__ h, float* c_last)
{
    using detail::fromFloat;
    using detail::sigmoid;
    using detail::toFloat;
    const size_t width = static_cast<size_t>(p.num_directions) * p.hidden_size; // D*d
    const size_t columns = static_cast<size_t>(p.batch) * width;                // N = B*D*d
    const size_t col = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (col >= columns)
        return;
    const size_t b = col / width;
    const size_t j = col % width; // dr * d + i
    const bool backward = j >= static_cast<size_t>(p.hidden_size);
    const float vf = toFloat(weight_c[j]), vr = toFloat(weight_c[width + j]);
    const float bf = toFloat(bias[j]), br = toFloat(bias[width + j]);
    const bool skip = p.has_skip_term;
    const bool skip_from_x = skip && K == 3;
    const float scale_x = p.scale_x;
    const int L = p.length;
    float c = c0 != nullptr ? c0[col] : 0.f;

    for (int s0 = 0; s0 < L; s0 += kStepsPerLoad)
    {
        float ux[kStepsPerLoad], uf[kStepsPerLoad], ur[kStepsPerLoad], sk[kStepsPerLoad];
        bool pad[kStepsPerLoad];
#pragma unroll
        for (int q = 0; q < kStepsPerLoad; ++q)
        {
            const int s = s0 + q;
            pad[q] = true;
            ux[q] = uf[q] = ur[q] = sk[q] = 0.f;
            if (s < L)
            {
                const size_t t = backward ? static_cast<size_t>(L - 1 - s) : static_cast<size_t>(s);
                pad[q] = detail::isPad(mask_pad, p.mask_type, t * p.batch + b);
                const T* u = U + (t * columns + col) * K;
                ux[q] = toFloat(u[0]);
                uf[q] = toFloat(u[1]);
                ur[q] = toFloat(u[2]);
                if (K == 4 && skip)
                {
                    sk[q] = toFloat(u[K - 1]);
                }
                else if (skip_from_x)
                {
                    sk[q] = scale_x * toFloat(x[t * columns + col]);
                }
            }
        }
#pragma unroll
        for (int q = 0; q < kStepsPerLoad; ++q)
        {
            const int s = s0 + q;
            if (s >= L)
                break;
            const size_t t = backward ? static_cast<size_t>(L - 1 - s) : static_cast<size_t>(s);
            T* out = h + t * columns + col;
            if (pad[q])
            {
                *out = fromFloat<T>(0.f);
                continue;
            }
            const float f = sigmoid(uf[q] + vf * c + bf);
            const float r = sigmoid(ur[q] + vr * c + br);
            c = f * c + (1.f - f) * ux[q];
            const float g = p.use_tanh ? tanhf(c) : c;
            *out = fromFloat<T>(skip ? r * g + (1.f - r) * sk[q] : r * g);
        }
    }
    c_last[col] = c;
}

template <typename T>
cudaError_t launchSruScan(const SruScanParams& p, const void* U, const void* x, const void* weight_c, const void* bias,
    const float* c0, const void* mask_pad, void* h, float* c_last, cudaStream_t stream)
{
    const size_t columns = static_cast<size_t>(p.batch) * p.num_directions * p.hidden_size;
    if (columns == 0)
        return cudaSuccess;
    const size_t blocks = (columns + kThreads - 1) / kThreads;
    if (blocks > 0x7fffffffu)
        return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(blocks));
    auto* Ut = static_cast<const T*>(U);
    auto* xt = static_cast<const T*>(x);
    auto* wt = static_cast<const T*>(weight_c);
    auto* bt = static_cast<const T*>(bias);
    auto* ht = static_cast<T*>(h);
    const auto kernel = p.num_matrices == 3 ? &sruScanKernel<T, 3> : &sruScanKernel<T, 4>;
    RNNX_LAUNCH(kernel, grid, kThreads, 0, stream)(p, Ut, xt, wt, bt, c0, mask_pad, ht, c_last);
    return cudaGetLastError();
}

} // namespace

cudaError_t sruScanForward(const SruScanParams& params, DataType type, const void* U, const void* x,
    const void* weight_c, const void* bias, const float* c0, const void* mask_pad, void* h, float* c_last,
    cudaStream_t stream)
{
    const SruScanParams& p = params;
    if (p.length < 0 || p.batch < 0 || p.hidden_size < 0)
        return cudaErrorInvalidValue;
    if (p.num_directions != 1 && p.num_directions != 2)
        return cudaErrorInvalidValue;
    if (p.num_matrices != 3 && p.num_matrices != 4)
        return cudaErrorInvalidValue;
    if (!detail::validMaskType(p.mask_type))
        return cudaErrorInvalidValue;
    if (p.num_matrices == 3 && p.has_skip_term && x == nullptr && p.length > 0)
    {
        return cudaErrorInvalidValue;
    }
    return detail::dispatchType(type,
        [&](auto tag)
        {
            using T = decltype(tag);
            return launchSruScan<T>(p, U, x, weight_c, bias, c0, mask_pad, h, c_last, stream);
        });
}

} // namespace kernels
} // namespace rnnx
