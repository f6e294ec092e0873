// rnnx::causal_linear_attention in librnnx_torch_ops (plugins/torch/rnnx_torch_ops.cpp says what the library is):
// the schema of the Python op and the linear recurrence's CPU kernel (linear_recurrence/cpu/linear_recurrence_kernel.h:
// the linear rule with phi = elu + 1, scale 1 and the normaliser) on ATen's thread pool.
#include "libtorch_op_support.h"
#include "aten_parallel_for.h"
#include "linear_recurrence/cpu/linear_recurrence_kernel.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace
{
using rnnx::torch_ops::stateDtype;

// rnnx::causal_linear_attention on the CPU: the token-loop kernel in the state dtype, out cast back to q's dtype.
// q, k (B, L, H*E), v (B, L, H*M), mask_pad (B, L) — (L, B, ...) when time_major — heads packed.
std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_linear_attention_cpu(const at::Tensor& q, const at::Tensor& k,
    const at::Tensor& v, const std::optional<at::Tensor>& S0, const std::optional<at::Tensor>& z0,
    const std::optional<at::Tensor>& mask_pad, double eps, int64_t num_heads, int64_t time_major)
{
    TORCH_CHECK(q.is_floating_point(), "rnnx::causal_linear_attention: q must be a floating tensor");
    TORCH_CHECK(num_heads > 0, "rnnx::causal_linear_attention: num_heads must be positive, got ", num_heads);
    TORCH_CHECK(q.dim() == 3 && k.sizes() == q.sizes() && v.dim() == 3 && v.size(0) == q.size(0)
            && v.size(1) == q.size(1) && q.size(2) % num_heads == 0 && v.size(2) % num_heads == 0,
        "rnnx::causal_linear_attention: q, k must be (B, L, H*E) and v (B, L, H*M) (time-major: (L, B, ...)) with H = ",
        num_heads, "; got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
    const bool tm = time_major != 0;
    const int64_t B = tm ? q.size(1) : q.size(0), L = tm ? q.size(0) : q.size(1), H = num_heads;
    const int64_t E = q.size(2) / H, M = v.size(2) / H;
    const auto acc = stateDtype(q.scalar_type());
    const auto qf = q.to(acc).contiguous(), kf = k.to(acc).contiguous(), vf = v.to(acc).contiguous();
    std::optional<at::Tensor> s0, zz0, pad;
    if (S0.has_value())
    {
        TORCH_CHECK(
            S0->sizes() == at::IntArrayRef({B, H, E, M}), "rnnx::causal_linear_attention: S0 must be (B, H, E, M)");
        s0 = S0->to(acc).contiguous();
    }
    if (z0.has_value())
    {
        TORCH_CHECK(z0->sizes() == at::IntArrayRef({B, H, E}), "rnnx::causal_linear_attention: z0 must be (B, H, E)");
        zz0 = z0->to(acc).contiguous();
    }
    if (mask_pad.has_value())
    {
        TORCH_CHECK(mask_pad->sizes() == q.sizes().slice(0, 2),
            "rnnx::causal_linear_attention: mask_pad must be q's leading (", tm ? "L, B" : "B, L", ") axes; got ",
            mask_pad->sizes());
        pad = mask_pad->ne(0).to(at::kByte).contiguous();
    }
    auto out = at::empty({q.size(0), q.size(1), H * M}, qf.options());
    auto S_last = at::empty({B, H, E, M}, qf.options());
    auto z_last = at::empty({B, H, E}, qf.options());
    namespace lr = rnnx::linear_recurrence_cpu;
    lr::Problem p{B, L, H, H, E, M, lr::Rule::linear, false, false, /*scale*/ 1.0};
    p.time_major = tm;
    p.feature_map = true;
    p.normalise = true;
    p.eps = eps;
    AT_DISPATCH_FLOATING_TYPES(acc, "causal_linear_attention_cpu",
        [&]
        {
            lr::forward_impl<scalar_t, scalar_t>(rnnx::AtenParallelFor{}, p, qf.data_ptr<scalar_t>(),
                kf.data_ptr<scalar_t>(), vf.data_ptr<scalar_t>(), s0.has_value() ? s0->data_ptr<scalar_t>() : nullptr,
                nullptr, nullptr, pad.has_value() ? pad->data_ptr<uint8_t>() : nullptr, out.data_ptr<scalar_t>(),
                S_last.data_ptr<scalar_t>(), zz0.has_value() ? zz0->data_ptr<scalar_t>() : nullptr,
                z_last.data_ptr<scalar_t>());
        });
    return {out.to(q.scalar_type()), S_last, z_last};
}
} // namespace

TORCH_LIBRARY_FRAGMENT(rnnx, m)
{
    m.def(RNNX_CAUSAL_LINEAR_ATTENTION_SCHEMA);
}

TORCH_LIBRARY_IMPL(rnnx, CPU, m)
{
    m.impl("causal_linear_attention", &causal_linear_attention_cpu);
}
