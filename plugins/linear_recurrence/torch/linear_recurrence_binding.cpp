// rnnx::linear_recurrence's part of the PyTorch CUDA binding (plugins/torch/binding.cpp; conventions in
// binding_support.h): linear_recurrence, a thin wrapper of linearRecurrenceForward (../cuda/linear_recurrence.h).
// Not called by the Python op yet (models/ops/linear_recurrence runs its torch implementations).
#include "binding_support.h"
#include "linear_recurrence/cuda/linear_recurrence.h"

#include <algorithm>

namespace
{
using namespace rnnx::torch_binding;

//! query (B, T, H_q*d_k), key (B, T, H_k*d_k), value (B, T, H_kv*d_v), decay (B, T, H_kv) or (B, T, H_kv*d_k)
//! (log space) or None, beta (B, T, H_kv) or (B, T, 1) or None, output (B, T, H_o*d_v), all in query's dtype, with
//! H_k = min(H_q, H_kv), H_o = max(H_q, H_kv) (one a multiple of the other); past_state (B, H_kv, d_k, d_v) fp32 or
//! None, present_state the same (may be past_state); mask_pad (B, T) uint8 / bool / int32 or None. update_rule:
//! LinearRecurrenceRule (0 linear, 1 gated, 2 delta, 3 gated_delta); kernel: LinearRecurrenceKernel (0 auto,
//! 1 recurrent, 2 chunked, 3 chunked_mma); scale 0 means 1/sqrt(d_k); qk_l2_norm: each query / key head divided by its
//! L2 norm.
void linearRecurrence(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const c10::optional<at::Tensor>& past_state, const c10::optional<at::Tensor>& decay,
    const c10::optional<at::Tensor>& beta, const c10::optional<at::Tensor>& mask_pad, at::Tensor output,
    at::Tensor present_state, int64_t q_num_heads, int64_t kv_num_heads, int64_t update_rule, double scale,
    int64_t kernel, int64_t stream, bool qk_l2_norm)
{
    const auto act = query.scalar_type();
    checkTensors(act, {{query, "query"}, {key, "key"}, {value, "value"}, {output, "output"}});
    checkTensor(present_state, "present_state", at::kFloat);
    TORCH_CHECK(
        q_num_heads > 0 && kv_num_heads > 0 && (q_num_heads % kv_num_heads == 0 || kv_num_heads % q_num_heads == 0),
        "rnnx CUDA kernels: q_num_heads and kv_num_heads must be positive, one a multiple of the other, got ",
        q_num_heads, " and ", kv_num_heads);
    const int64_t key_heads = std::min(q_num_heads, kv_num_heads), out_heads = std::max(q_num_heads, kv_num_heads);
    TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3 && query.size(2) % q_num_heads == 0
            && value.size(2) % kv_num_heads == 0,
        "rnnx CUDA kernels: query must be (B, T, H_q*d_k), key (B, T, H_k*d_k) and value (B, T, H_kv*d_v); got ",
        query.sizes(), ", ", key.sizes(), ", ", value.sizes());
    const int64_t B = query.size(0), T = query.size(1), dk = query.size(2) / q_num_heads;
    const int64_t dv = value.size(2) / kv_num_heads;
    TORCH_CHECK(key.sizes() == at::IntArrayRef({B, T, key_heads * dk}), "rnnx CUDA kernels: key has shape ",
        key.sizes(), " but expected (B=", B, ", T=", T, ", min(H_q, H_kv)*d_k=", key_heads * dk, ")");
    TORCH_CHECK(value.size(0) == B && value.size(1) == T, "rnnx CUDA kernels: value has shape ", value.sizes(),
        " but expected (B=", B, ", T=", T, ", H_kv*d_v)");
    TORCH_CHECK(output.sizes() == at::IntArrayRef({B, T, out_heads * dv}), "rnnx CUDA kernels: output has shape ",
        output.sizes(), " but expected (B=", B, ", T=", T, ", max(H_q, H_kv)*d_v=", out_heads * dv, ")");
    checkStates(past_state, present_state, B * kv_num_heads * dk * dv, "(B=", B, ", H_kv=", kv_num_heads, ", d_k=", dk,
        ", d_v=", dv, ")");
    TORCH_CHECK(!decay.has_value()
            || (decay->dim() == 3 && decay->size(0) == B && decay->size(1) == T
                && (decay->size(2) == kv_num_heads || decay->size(2) == kv_num_heads * dk)),
        "rnnx CUDA kernels: decay must be (B, T, H_kv) or (B, T, H_kv*d_k)");
    TORCH_CHECK(!beta.has_value()
            || (beta->dim() == 3 && beta->size(0) == B && beta->size(1) == T
                && (beta->size(2) == kv_num_heads || beta->size(2) == 1)),
        "rnnx CUDA kernels: beta must be (B, T, H_kv) or (B, T, 1)");
    rnnx::kernels::LinearRecurrenceParams p{};
    p.batch = static_cast<int>(B);
    p.length = static_cast<int>(T);
    p.q_heads = static_cast<int>(q_num_heads);
    p.kv_heads = static_cast<int>(kv_num_heads);
    p.dim_k = static_cast<int>(dk);
    p.dim_v = static_cast<int>(dv);
    p.rule = static_cast<rnnx::kernels::LinearRecurrenceRule>(update_rule);
    p.decay_per_key = decay.has_value() && decay->size(2) == kv_num_heads * dk;
    p.beta_per_head = beta.has_value() && beta->size(2) == kv_num_heads;
    p.scale = static_cast<float>(scale);
    p.kernel = static_cast<rnnx::kernels::LinearRecurrenceKernel>(kernel);
    p.qk_l2_norm = qk_l2_norm;
    const void* mask = batchTimeMaskPtr(mask_pad, B, T, &p.mask_type);
    checkStatus(rnnx::kernels::linearRecurrenceForward(p, dataType(query), query.data_ptr(), key.data_ptr(),
                    value.data_ptr(), optionalPtr<float>(past_state, "past_state", at::kFloat),
                    optionalPtr<void>(decay, "decay", act), optionalPtr<void>(beta, "beta", act), mask,
                    output.data_ptr(), present_state.data_ptr<float>(), toStream(stream)),
        "linearRecurrenceForward");
}
} // namespace

RNNX_TORCH_FUNCTION(linear_recurrence, linearRecurrence,
    "Linear recurrence forward, heads packed (rnnx::kernels::linearRecurrenceForward)", py::arg("query"),
    py::arg("key"), py::arg("value"), py::arg("past_state"), py::arg("decay"), py::arg("beta"), py::arg("mask_pad"),
    py::arg("output"), py::arg("present_state"), py::arg("q_num_heads"), py::arg("kv_num_heads"),
    py::arg("update_rule"), py::arg("scale"), py::arg("kernel"), py::arg("stream"), py::arg("qk_l2_norm") = false);
