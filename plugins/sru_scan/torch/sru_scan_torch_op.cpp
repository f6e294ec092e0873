// rnnx::sru_scan in librnnx_torch_ops (plugins/torch/rnnx_torch_ops.cpp says what the library is): the schema of
// the Python op and the CPU kernel of ../cpu/sru_scan_cpu.cpp (compiled into the library with RNNX_NO_PYTHON).
#include "libtorch_op_support.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

// plugins/sru_scan/cpu/sru_scan_cpu.cpp.
std::vector<at::Tensor> sru_scan_forward(const at::Tensor& U, const std::optional<at::Tensor>& x,
    const at::Tensor& weight_c, const at::Tensor& bias, const at::Tensor& c0, const std::optional<at::Tensor>& mask,
    int64_t hidden_size, int64_t num_directions, int64_t num_matrices, bool has_skip_term, bool use_tanh,
    double scale_x);

namespace
{
using rnnx::torch_ops::stateDtype;

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
    TORCH_CHECK(c0.scalar_type() == stateDtype(U.scalar_type()), "rnnx::sru_scan: c0 has dtype ", c0.scalar_type(),
        " but the state dtype for U of dtype ", U.scalar_type(), " is ", stateDtype(U.scalar_type()));
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
    const auto acc = stateDtype(U.scalar_type());
    std::optional<at::Tensor> xk, mask;
    if (uses_x)
        xk = x->to(acc).contiguous();
    if (mask_pad.has_value())
        mask = mask_pad->ne(0).to(at::kByte).contiguous();
    auto out = sru_scan_forward(U.contiguous(), xk, weight_c.to(acc).contiguous(), bias.to(acc).contiguous(),
        c0.contiguous(), mask, hidden_size, num_directions, num_matrices, has_skip_term, use_tanh, scale_x);
    return {out[0], out[1]};
}
} // namespace

TORCH_LIBRARY_FRAGMENT(rnnx, m)
{
    m.def(RNNX_SRU_SCAN_SCHEMA);
}

TORCH_LIBRARY_IMPL(rnnx, CPU, m)
{
    m.impl("sru_scan", &sru_scan_cpu);
}
