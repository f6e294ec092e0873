// The causal convolution with state CPU kernel (forward), host-independent: ONNX opset 27's CausalConvWithState
// (depthwise, channels first) with rnnx's pad mask (docs/ops.md, "Causal convolution with state").
//
// rnnx's ONNX Runtime custom-op library includes this header (plugins/ort/); a host passes its own parallel-for, a
// callable parallel_for(begin, end, grain, fn) running fn(b, e) over disjoint ranges [b, e) covering [begin, end).
// No torch, no ORT here. Its slow, obviously-correct twin is models/ops/causal_conv_with_state/naive.py
// (causal_conv_with_state_naive), which the tests compare it with.
//
// With x the K-1 state values followed by the input steps of one (batch row, channel):
//     y[t] = bias[c] + sum_{j=0}^{K-1} weight[c, 0, j] x[t - (K-1) + j],    then y * sigmoid(y) with silu / swish
// and the present state the last K-1 values of x. Layouts, row-major: input, out (B, C, T); weight (C, 1, K); bias
// (C,); past_state, present_state (B, C, K-1); pad (B, T), one byte per step, non-zero = pad: the step is skipped
// (its output is 0, the window does not move). bias / past_state / pad may be null (zeros / zeros / no pads). The
// state and all arithmetic are in acc_t (float for float activations).
//
// A skipped step leaves no trace, so one task per (b, c) gathers the state and the row's kept steps into one
// sequence, convolves it (vectorised over time) and scatters the outputs back (0 at the pads).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../../cpu/vector_math.h"

namespace rnnx::causal_conv_cpu
{

struct Problem
{
    int64_t B, C, T, K;
    //! Apply y * sigmoid(y) (activation silu / swish).
    bool silu;
};

//! Output steps one task computes below which the tasks are run in fewer chunks.
constexpr int64_t min_parallel_work = int64_t(1) << 14;

// The forward pass: out (B, C, T) and present_state (B, C, K-1) from the inputs (layouts above).
template <typename scalar_t, typename acc_t, typename ParallelFor>
void forward_impl(const ParallelFor& parallel_for, const Problem& p, const scalar_t* input, const scalar_t* weight,
    const scalar_t* bias, const acc_t* past_state, const uint8_t* pad, scalar_t* out, acc_t* present_state)
{
    const int64_t C = p.C, T = p.T, K = p.K, S = K - 1;
    const int64_t grain = std::max<int64_t>(min_parallel_work / std::max<int64_t>(T * K, 1), 1);
    parallel_for(0, p.B * C, grain,
        [&](int64_t begin, int64_t end)
        {
            std::vector<acc_t> x(static_cast<size_t>(S + T)), y(static_cast<size_t>(T)), w(static_cast<size_t>(K));
            for (int64_t task = begin; task < end; ++task)
            {
                const int64_t b = task / C, c = task % C;
                const scalar_t* in = input + task * T;
                const uint8_t* pb = pad != nullptr ? pad + b * T : nullptr;
                for (int64_t j = 0; j < S; ++j)
                    x[j] = past_state != nullptr ? past_state[task * S + j] : acc_t(0);
                int64_t n = 0; // kept steps
                for (int64_t t = 0; t < T; ++t)
                    if (pb == nullptr || pb[t] == 0)
                        x[S + n++] = static_cast<acc_t>(in[t]);
                for (int64_t j = 0; j < K; ++j)
                    w[j] = static_cast<acc_t>(weight[c * K + j]);
                const acc_t b0 = bias != nullptr ? static_cast<acc_t>(bias[c]) : acc_t(0);
#pragma omp simd
                for (int64_t t = 0; t < n; ++t)
                    y[t] = b0;
                for (int64_t j = 0; j < K; ++j)
                {
                    const acc_t wj = w[j];
                    const acc_t* xj = x.data() + j;
#pragma omp simd
                    for (int64_t t = 0; t < n; ++t)
                        y[t] += wj * xj[t];
                }
                if (p.silu)
                {
#pragma omp simd
                    for (int64_t t = 0; t < n; ++t)
                        y[t] = y[t] * vmath::sigmoid(y[t]);
                }
                scalar_t* ot = out + task * T;
                if (pb == nullptr)
                {
                    for (int64_t t = 0; t < T; ++t)
                        ot[t] = static_cast<scalar_t>(y[t]);
                }
                else
                {
                    for (int64_t t = 0, m = 0; t < T; ++t)
                        ot[t] = pb[t] == 0 ? static_cast<scalar_t>(y[m++]) : scalar_t(0);
                }
                for (int64_t j = 0; j < S; ++j)
                    present_state[task * S + j] = x[n + j];
            }
        });
}

} // namespace rnnx::causal_conv_cpu
