// CPU kernel of the SRU elementwise recurrence (rnnx::sru_scan), forward and backward.
//
// Layouts (see rnnx/runtime/contract/ops.py, SRU_SCAN), with N = B*D*d columns:
//   U        (L, B, D, d, k)  scalar_t, contiguous; per column the k values x~, f, r[, x'] interleave
//   x        (L, B, D, d)     acc_t, only read when k == 3 and has_skip
//   weight_c (2, D, d)        acc_t: [v_f; v_r]
//   bias     (2, D, d)        acc_t: [b_f; b_r]
//   c0       (B, D, d)        acc_t
//   mask     (L, B)           uint8, non-zero marks a pad step (c carried, h = 0)
//   h        (L, B, D, d)     scalar_t
// acc_t is float for float/half/bfloat16 and double for double: state and arithmetic.
//
// Every column is an independent scan: the work is split into tasks, blocks of up to kBlock
// neighbouring hidden units of one (batch, direction) row, and ranges of tasks run in parallel.
// Time is sequential (direction 0 forwards, direction 1 backwards); a thread advances all its
// tasks by one step before the next, so a step reads neighbouring memory. Inside a step a
// block's columns are independent: the inner loops are plain vectorisable loops over the block
// (exp is computed inline for that, see vexp).
//
// The forward keeps only the running state. The backward recomputes the per-step states into a
// scratch buffer (about 1M values per group of tasks) and then walks time in reverse.
// Partial sums of the weight_c / bias gradients come back per batch row, (B, 2, D, d); the caller
// sums over B.

#include "sru_scan_kernel.h"
#include "../../torch/aten_parallel_for.h"

// RNNX_NO_PYTHON: built into librnnx_torch_ops (plugins/sru_scan/torch/sru_scan_torch_op.cpp) for libtorch programs
// without Python; otherwise the torch extension that op.py loads.
#ifdef RNNX_NO_PYTHON
#include <ATen/ATen.h>
#else
#include <torch/extension.h>
#endif

#include <ATen/Parallel.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <optional>
#include <vector>

namespace
{
using namespace rnnx::sru_cpu;

using rnnx::AtenParallelFor;

void check_common(const at::Tensor& U, const std::optional<at::Tensor>& x, const at::Tensor& w, const at::Tensor& bias,
    const at::Tensor& c0, const std::optional<at::Tensor>& mask, int64_t k, bool has_skip)
{
    TORCH_CHECK(U.device().is_cpu() && U.is_contiguous() && U.dim() == 3, "sru_scan_cpu: U");
    TORCH_CHECK(k == 3 || k == 4, "sru_scan_cpu: num_matrices must be 3 or 4");
    const auto acc = U.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    for (const at::Tensor* t : {&w, &bias, &c0})
    {
        TORCH_CHECK(t->is_contiguous() && t->scalar_type() == acc, "sru_scan_cpu: weight/bias/c0 dtype");
    }
    if (has_skip && k == 3)
    {
        TORCH_CHECK(x.has_value() && x->is_contiguous() && x->scalar_type() == acc, "sru_scan_cpu: x");
    }
    if (mask.has_value())
    {
        TORCH_CHECK(mask->is_contiguous() && mask->scalar_type() == at::kByte, "sru_scan_cpu: mask");
    }
}

Problem make_problem(const at::Tensor& U, int64_t d, int64_t D, int64_t k, double scale_x)
{
    Problem p{U.size(0), U.size(1), D, d, scale_x};
    TORCH_CHECK(U.size(2) == D * d * k, "sru_scan_cpu: U last dim");
    return p;
}

} // namespace

// Returns (h, c_last).
std::vector<at::Tensor> sru_scan_forward(const at::Tensor& U, const std::optional<at::Tensor>& x,
    const at::Tensor& weight_c, const at::Tensor& bias, const at::Tensor& c0, const std::optional<at::Tensor>& mask,
    int64_t hidden_size, int64_t num_directions, int64_t num_matrices, bool has_skip_term, bool use_tanh,
    double scale_x)
{
    check_common(U, x, weight_c, bias, c0, mask, num_matrices, has_skip_term);
    const Problem p = make_problem(U, hidden_size, num_directions, num_matrices, scale_x);
    auto h = at::empty({p.L, p.B, p.D * p.d}, U.options());
    auto c_last = at::empty({p.B, p.D * p.d}, c0.options());
    const uint8_t* mp = mask.has_value() ? mask->data_ptr<uint8_t>() : nullptr;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, U.scalar_type(), "sru_scan_forward",
        [&]
        {
            using acc_t = at::opmath_type<scalar_t>;
            const acc_t* xp = (has_skip_term && num_matrices == 3) ? x->data_ptr<acc_t>() : nullptr;
            dispatch_variant(num_matrices, has_skip_term, use_tanh,
                [&](auto K, auto SKIP, auto TANH)
                {
                    forward_impl<scalar_t, acc_t, decltype(K)::value, decltype(SKIP)::value, decltype(TANH)::value>(
                        AtenParallelFor{}, p, U.data_ptr<scalar_t>(), xp, weight_c.data_ptr<acc_t>(),
                        bias.data_ptr<acc_t>(), c0.data_ptr<acc_t>(), mp, h.data_ptr<scalar_t>(),
                        c_last.data_ptr<acc_t>());
                });
        });
    return {h, c_last};
}

// Returns (dU, dx, dweight_c per batch row (B, 2*D*d), dbias per batch row (B, 2*D*d), dc0).
// dx is an empty tensor unless k == 3 with the skip term.
std::vector<at::Tensor> sru_scan_backward(const at::Tensor& grad_h, const at::Tensor& grad_c, const at::Tensor& U,
    const std::optional<at::Tensor>& x, const at::Tensor& weight_c, const at::Tensor& bias, const at::Tensor& c0,
    const std::optional<at::Tensor>& mask, int64_t hidden_size, int64_t num_directions, int64_t num_matrices,
    bool has_skip_term, bool use_tanh, double scale_x)
{
    check_common(U, x, weight_c, bias, c0, mask, num_matrices, has_skip_term);
    const Problem p = make_problem(U, hidden_size, num_directions, num_matrices, scale_x);
    TORCH_CHECK(grad_h.is_contiguous() && grad_h.scalar_type() == U.scalar_type()
            && grad_h.sizes() == at::IntArrayRef({p.L, p.B, p.D * p.d}),
        "sru_scan_cpu: grad_h");
    TORCH_CHECK(grad_c.is_contiguous() && grad_c.scalar_type() == c0.scalar_type() && grad_c.sizes() == c0.sizes(),
        "sru_scan_cpu: grad_c");
    const bool x_grad = has_skip_term && num_matrices == 3;
    auto dU = at::empty_like(U);
    auto dx = x_grad ? at::empty({p.L, p.B, p.D * p.d}, c0.options()) : at::empty({0}, c0.options());
    auto dw = at::empty({p.B, 2 * p.D * p.d}, c0.options());
    auto db = at::empty({p.B, 2 * p.D * p.d}, c0.options());
    auto dc0 = at::empty_like(c0);
    const uint8_t* mp = mask.has_value() ? mask->data_ptr<uint8_t>() : nullptr;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, U.scalar_type(), "sru_scan_backward",
        [&]
        {
            using acc_t = at::opmath_type<scalar_t>;
            const acc_t* xp = x_grad ? x->data_ptr<acc_t>() : nullptr;
            acc_t* dxp = x_grad ? dx.data_ptr<acc_t>() : nullptr;
            dispatch_variant(num_matrices, has_skip_term, use_tanh,
                [&](auto K, auto SKIP, auto TANH)
                {
                    backward_impl<scalar_t, acc_t, decltype(K)::value, decltype(SKIP)::value, decltype(TANH)::value>(
                        AtenParallelFor{}, p, grad_h.data_ptr<scalar_t>(), grad_c.data_ptr<acc_t>(),
                        U.data_ptr<scalar_t>(), xp, weight_c.data_ptr<acc_t>(), bias.data_ptr<acc_t>(),
                        c0.data_ptr<acc_t>(), mp, dU.data_ptr<scalar_t>(), dxp, dw.data_ptr<acc_t>(),
                        db.data_ptr<acc_t>(), dc0.data_ptr<acc_t>());
                });
        });
    return {dU, dx, dw, db, dc0};
}

#ifndef RNNX_NO_PYTHON
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.doc() = "rnnx SRU scan, CPU kernel (forward and backward); registered as rnnx::sru_scan by op.py";
    m.def("forward", &sru_scan_forward, "SRU scan forward: (h, c_last)");
    m.def("backward", &sru_scan_backward, "SRU scan backward: (dU, dx, dweight_c_rows, dbias_rows, dc0)");
}
#endif
