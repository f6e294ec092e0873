// Causal convolution with state (rnnx::kernels::causalConvWithStateForward): depthwise along time, channels
// first, the window of the last K-1 inputs carried in an fp32 state, rnnx's pad mask skipping steps.
//
// Per (b, c) the inputs form one virtual sequence: past_state[0 .. K-2] (never pads) followed by input[0 .. T-1]
// (a pad step is not part of it). Output t (not a pad) is act(bias + sum_j w[j] x_j) over the K taps ending at
// input t: input t itself, then walking back over the earlier entries that are not pads. Each output is
// independent, so the first launch runs one thread per (b, c, t); pads cost their walk only where they sit
// inside a window. The second launch writes present_state, the last K-1 entries of the virtual sequence that
// are not pads, one thread per (b, c): it finds the first of them walking back, then copies forwards, so slot j
// is written only after every entry it could read (past_state slots >= j) was read, and present_state may alias
// past_state. The two launches are ordered on the stream, so the outputs read past_state before it changes.
#include "causal_conv_with_state/cuda/causal_conv_with_state.h"
#include "type_utils.cuh"

namespace rnnx
{
namespace kernels
{
namespace
{

using detail::fromFloat;
using detail::isPad;
using detail::toFloat;

constexpr int kThreads = 256;

struct ConvShape
{
    int B, C, T, K;
    bool silu;
    MaskType mask_type;
};

//! Entry v of the virtual sequence of row (b, c): past_state for v < K-1, else input[v - (K-1)].
template <typename T>
__device__ float virtualEntry(const ConvShape& s, const T* input, const float* state, size_t bc, int v)
{
    if (v < s.K - 1)
        return state != nullptr ? state[bc * (s.K - 1) + v] : 0.f;
    return toFloat(input[bc * s.T + (v - (s.K - 1))]);
}

//! Whether entry v of row b's virtual sequence is a pad step (past_state entries never are).
__device__ bool virtualPad(const ConvShape& s, const void* mask, int b, int v)
{
    return v >= s.K - 1 && isPad(mask, s.mask_type, static_cast<size_t>(b) * s.T + (v - (s.K - 1)));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    convOutputKernel(ConvShape s, const T* __restrict__ input, const T* __restrict__ weight, const T* __restrict__ bias,
        const float* state, const void* __restrict__ mask, T* __restrict__ output)
{
    const size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (i >= static_cast<size_t>(s.B) * s.C * s.T)
        return;
    const int t = static_cast<int>(i % s.T);
    const size_t bc = i / s.T;
    const int c = static_cast<int>(bc % s.C), b = static_cast<int>(bc / s.C);
    if (isPad(mask, s.mask_type, static_cast<size_t>(b) * s.T + t))
    {
        output[i] = fromFloat<T>(0.f);
        return;
    }
    float y = bias != nullptr ? toFloat(bias[c]) : 0.f;
    int v = (s.K - 1) + t; // the tap j = K-1 is input t itself
    for (int j = s.K - 1; j >= 0; --j)
    {
        if (j < s.K - 1)
        {
            do
                --v;
            while (virtualPad(s, mask, b, v)); // ends at a past_state entry at the latest
        }
        y += toFloat(weight[static_cast<size_t>(c) * s.K + j]) * virtualEntry(s, input, state, bc, v);
    }
    if (s.silu)
        y = y / (1.f + expf(-y));
    output[i] = fromFloat<T>(y);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) convStateKernel(
    ConvShape s, const T* __restrict__ input, const float* state_in, const void* __restrict__ mask, float* state_out)
{
    const size_t bc = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (bc >= static_cast<size_t>(s.B) * s.C || s.K == 1)
        return;
    const int b = static_cast<int>(bc / s.C);
    // Walk back from the last entry over K-1 entries that are not pads: v is the first of them.
    int v = (s.K - 2) + s.T;
    for (int found = 0;; --v)
    {
        if (!virtualPad(s, mask, b, v) && ++found == s.K - 1)
            break;
    }
    for (int j = 0; j < s.K - 1; ++j, ++v)
    {
        while (virtualPad(s, mask, b, v))
            ++v;
        state_out[bc * (s.K - 1) + j] = virtualEntry(s, input, state_in, bc, v);
    }
}

} // namespace

cudaError_t causalConvWithStateForward(const CausalConvParams& params, DataType type, const void* input,
    const void* weight, const void* bias, const float* past_state, const void* mask_pad, void* output,
    float* present_state, cudaStream_t stream)
{
    const CausalConvParams& p = params;
    if (p.batch < 0 || p.channels < 0 || p.length < 0 || p.kernel_size < 1 || !detail::validMaskType(p.mask_type))
        return cudaErrorInvalidValue;
    const ConvShape s{p.batch, p.channels, p.length, p.kernel_size, p.silu, p.mask_type};
    const size_t rows = static_cast<size_t>(p.batch) * p.channels;
    const size_t outputs = rows * p.length;
    if (rows == 0)
        return cudaSuccess;
    if ((outputs > 0 && (input == nullptr || weight == nullptr || output == nullptr))
        || (p.kernel_size > 1 && present_state == nullptr) || (outputs + kThreads) / kThreads > 0x7fffffffu)
        return cudaErrorInvalidValue;
    return detail::dispatchType(type,
        [&](auto tag)
        {
            using T = decltype(tag);
            if (outputs > 0)
            {
                const auto kernel = &convOutputKernel<T>;
                RNNX_LAUNCH(kernel, static_cast<unsigned>((outputs + kThreads - 1) / kThreads), kThreads, 0, stream)(s,
                    static_cast<const T*>(input), static_cast<const T*>(weight), static_cast<const T*>(bias),
                    past_state, mask_pad, static_cast<T*>(output));
                const cudaError_t err = cudaGetLastError();
                if (err != cudaSuccess)
                    return err;
            }
            if (p.kernel_size == 1 || (p.length == 0 && past_state == present_state))
                return cudaSuccess;
            const auto kernel = &convStateKernel<T>;
            RNNX_LAUNCH(kernel, static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, stream)(
                s, static_cast<const T*>(input), past_state, mask_pad, present_state);
            return cudaGetLastError();
        });
}

} // namespace kernels
} // namespace rnnx
