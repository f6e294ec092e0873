// librnnx_torch_ops: the rnnx ops for libtorch programs without Python (inference, CPU).
//
// A module scripted in Python (torch.jit.script) records calls to torch.ops.rnnx.sru_scan and
// torch.ops.rnnx.causal_linear_attention. In Python those ops are defined by torch.library (models/ops/*/op.py);
// a C++ program that torch::jit::load()s the module gets them from this library instead: the same schemas
// (generated from the Python definitions at build time into rnnx_torch_schemas.h, see
// rnnx.models.ops.libtorch) and CPU kernels built from the same sources (the SRU kernel of
// plugins/sru_scan/cpu/sru_scan_cpu.cpp, the attention kernel of
// plugins/causal_linear_attention/cpu/causal_linear_attention_kernel.h). No autograd: call under
// torch::NoGradGuard or c10::InferenceMode. Never loaded into a Python process that imports rnnx (the ops
// would be defined twice).
#include "rnnx_torch_schemas.h"
#include "aten_parallel_for.h"
#include "causal_linear_attention_kernel.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

// plugins/sru_scan/cpu/sru_scan_cpu.cpp (compiled into this library with RNNX_NO_PYTHON).
std::vector<at::Tensor> sru_scan_forward(const at::Tensor& U, const std::optional<at::Tensor>& x,
    const at::Tensor& weight_c, const at::Tensor& bias, const at::Tensor& c0, const std::optional<at::Tensor>& mask,
    int64_t hidden_size, int64_t num_directions, int64_t num_matrices, bool has_skip_term, bool use_tanh,
    double scale_x);

namespace
{
at::ScalarType state_dtype(at::ScalarType activation)
{
    return activation == at::kDouble ? at::kDouble : at::kFloat;
}

// The checks of models/ops/sru_scan/checks.py (the Python op's), as one-line c10::Errors naming the tensor.
void check_sru_scan(const at::Tensor& U, const std::optional<at::Tensor>& x, const at::Tensor& weight_c,
    const at::Tensor& bias, const at::Tensor& c0, const std::optional<at::Tensor>& mask_pad, int64_t d, int64_t D,
    int64_t k, bool uses_x)
{
    TORCH_CHECK(d > 0, "rnnx::sru_scan: hidden_size must be positive, got ", d);
    TORCH_CHECK(D == 1 || D == 2, "rnnx::sru_scan: num_directions must be 1 or 2, got ", D);
    TORCH_CHECK(k == 3 || k == 4, "rnnx::sru_scan: num_matrices must be 3 or 4, got ", k);
    TORCH_CHECK(U.is_floating_point(), "rnnx::sru_scan: U must be a floating tensor, got ", U.scalar_type());
    TORCH_CHECK(U.dim() == 3 && U.size(2) == D * d * k, "rnnx::sru_scan: U has shape ", U.sizes(),
        " but expected (L, B, D*d*k=", D * d * k, ")");
    const int64_t L = U.size(0), B = U.size(1);
    TORCH_CHECK(weight_c.sizes() == at::IntArrayRef({2 * D * d}), "rnnx::sru_scan: weight_c has shape ",
        weight_c.sizes(), " but expected (2*D*d=", 2 * D * d, ",)");
    TORCH_CHECK(bias.sizes() == at::IntArrayRef({2 * D * d}), "rnnx::sru_scan: bias has shape ", bias.sizes(),
        " but expected (2*D*d=", 2 * D * d, ",)");
    TORCH_CHECK(c0.sizes() == at::IntArrayRef({B, D * d}), "rnnx::sru_scan: c0 has shape ", c0.sizes(),
        " but expected (B=", B, ", D*d=", D * d, ")");
    TORCH_CHECK(c0.scalar_type() == state_dtype(U.scalar_type()), "rnnx::sru_scan: c0 has dtype ", c0.scalar_type(),
        " but the state dtype for U of dtype ", U.scalar_type(), " is ", state_dtype(U.scalar_type()));
    TORCH_CHECK(!uses_x || x.has_value(), "rnnx::sru_scan: x is required when num_matrices is 3 with the skip term");
    if (uses_x)
        TORCH_CHECK(x->sizes() == at::IntArrayRef({L, B, D * d}), "rnnx::sru_scan: x has shape ", x->sizes(),
            " but expected (L=", L, ", B=", B, ", D*d=", D * d, ")");
    if (mask_pad.has_value())
        TORCH_CHECK(mask_pad->sizes() == at::IntArrayRef({L, B}), "rnnx::sru_scan: mask_pad has shape ",
            mask_pad->sizes(), " but expected (L=", L, ", B=", B, ")");
}

// rnnx::sru_scan on the CPU: checked, then the arguments as the kernel takes them (contiguous, state dtype,
// uint8 mask).
std::tuple<at::Tensor, at::Tensor> sru_scan_cpu(const at::Tensor& U, const std::optional<at::Tensor>& x,
    const at::Tensor& weight_c, const at::Tensor& bias, const at::Tensor& c0, const std::optional<at::Tensor>& mask_pad,
    int64_t hidden_size, int64_t num_directions, int64_t num_matrices, bool has_skip_term, bool use_tanh,
    double scale_x)
{
    const bool uses_x = has_skip_term && num_matrices == 3;
    check_sru_scan(U, x, weight_c, bias, c0, mask_pad, hidden_size, num_directions, num_matrices, uses_x);
    const auto acc = state_dtype(U.scalar_type());
    std::optional<at::Tensor> xk, mask;
    if (uses_x)
        xk = x->to(acc).contiguous();
    if (mask_pad.has_value())
        mask = mask_pad->ne(0).to(at::kByte).contiguous();
    auto out = sru_scan_forward(U.contiguous(), xk, weight_c.to(acc).contiguous(), bias.to(acc).contiguous(),
        c0.contiguous(), mask, hidden_size, num_directions, num_matrices, has_skip_term, use_tanh, scale_x);
    return {out[0], out[1]};
}

// rnnx::causal_linear_attention on the CPU: the recurrent kernel in the state dtype, out cast back to q's dtype.
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
    const auto acc = state_dtype(q.scalar_type());
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
    const rnnx::linear_attention_cpu::Problem p{B, H, L, E, M, eps, tm};
    AT_DISPATCH_FLOATING_TYPES(acc, "causal_linear_attention_cpu",
        [&]
        {
            rnnx::linear_attention_cpu::forward_impl<scalar_t, scalar_t>(rnnx::AtenParallelFor{}, p,
                qf.data_ptr<scalar_t>(), kf.data_ptr<scalar_t>(), vf.data_ptr<scalar_t>(),
                s0.has_value() ? s0->data_ptr<scalar_t>() : nullptr,
                zz0.has_value() ? zz0->data_ptr<scalar_t>() : nullptr,
                pad.has_value() ? pad->data_ptr<uint8_t>() : nullptr, out.data_ptr<scalar_t>(),
                S_last.data_ptr<scalar_t>(), z_last.data_ptr<scalar_t>());
        });
    return {out.to(q.scalar_type()), S_last, z_last};
}
} // namespace

TORCH_LIBRARY(rnnx, m)
{
    m.def(RNNX_SRU_SCAN_SCHEMA);
    m.def(RNNX_CAUSAL_LINEAR_ATTENTION_SCHEMA);
}

TORCH_LIBRARY_IMPL(rnnx, CPU, m)
{
    m.impl("sru_scan", &sru_scan_cpu);
    m.impl("causal_linear_attention", &causal_linear_attention_cpu);
}
