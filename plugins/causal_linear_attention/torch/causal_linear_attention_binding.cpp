// rnnx::causal_linear_attention's part of the PyTorch CUDA binding (plugins/torch/binding.cpp; conventions in
// binding_support.h): causal_linear_attention, a thin wrapper of causalLinearAttentionForward
// (../cuda/causal_linear_attention.h) that allocates the launcher's workspace.
#include "binding_support.h"
#include "causal_linear_attention/cuda/causal_linear_attention.h"

namespace
{
using namespace rnnx::torch_binding;

//! q, k (B, L, H*E), v (B, L, H*M), mask_pad (B, L) uint8 or None, out (B, L, H*M); (L, B, ...) when time_major.
//! S0 / S_last (B, H, E, M), z0 / z_last (B, H, E) fp32.
void causalLinearAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const c10::optional<at::Tensor>& S0, const c10::optional<at::Tensor>& z0, const c10::optional<at::Tensor>& mask_pad,
    at::Tensor out, at::Tensor S_last, at::Tensor z_last, double eps, int64_t num_heads, bool time_major,
    int64_t stream)
{
    const auto act = q.scalar_type();
    checkTensors(act, {{q, "q"}, {k, "k"}, {v, "v"}, {out, "out"}});
    checkTensors(at::kFloat, {{S_last, "S_last"}, {z_last, "z_last"}});
    TORCH_CHECK(num_heads > 0, "rnnx CUDA kernels: num_heads must be positive, got ", num_heads);
    TORCH_CHECK(
        q.dim() == 3 && k.sizes() == q.sizes() && v.dim() == 3 && v.size(0) == q.size(0) && v.size(1) == q.size(1),
        "rnnx CUDA kernels: q, k must be (B, L, H*E) and v (B, L, H*M), or (L, B, ...) when time_major");
    TORCH_CHECK(q.size(2) % num_heads == 0 && v.size(2) % num_heads == 0,
        "rnnx CUDA kernels: the last axes of q and v must be multiples of num_heads");
    rnnx::kernels::LinearAttentionParams p{};
    p.batch = static_cast<int>(q.size(time_major ? 1 : 0));
    p.heads = static_cast<int>(num_heads);
    p.length = static_cast<int>(q.size(time_major ? 0 : 1));
    p.dim_k = static_cast<int>(q.size(2) / num_heads);
    p.dim_v = static_cast<int>(v.size(2) / num_heads);
    p.eps = static_cast<float>(eps);
    p.time_major = time_major;
    TORCH_CHECK(out.sizes() == v.sizes(), "rnnx CUDA kernels: out must have v's shape");
    TORCH_CHECK(S_last.numel() == int64_t(p.batch) * p.heads * p.dim_k * p.dim_v
            && z_last.numel() == int64_t(p.batch) * p.heads * p.dim_k,
        "rnnx CUDA kernels: state size mismatch");
    TORCH_CHECK(
        (!S0.has_value() || S0->numel() == S_last.numel()) && (!z0.has_value() || z0->numel() == z_last.numel()),
        "rnnx CUDA kernels: S0 / z0 must have S_last's / z_last's size");
    const uint8_t* mask = optionalPtr<uint8_t>(mask_pad, "mask_pad", at::kByte);
    TORCH_CHECK(mask == nullptr || mask_pad->numel() == int64_t(p.batch) * p.length,
        "rnnx CUDA kernels: mask_pad must have q's two leading axes");
    const rnnx::kernels::DataType type = dataType(q);
    const size_t ws_bytes = rnnx::kernels::causalLinearAttentionWorkspaceSize(p, type);
    at::Tensor workspace = at::empty({static_cast<int64_t>(ws_bytes)}, q.options().dtype(at::kByte));
    checkStatus(
        rnnx::kernels::causalLinearAttentionForward(p, type, q.data_ptr(), k.data_ptr(), v.data_ptr(),
            optionalPtr<float>(S0, "S0", at::kFloat), optionalPtr<float>(z0, "z0", at::kFloat), mask, out.data_ptr(),
            S_last.data_ptr<float>(), z_last.data_ptr<float>(), workspace.data_ptr(), toStream(stream)),
        "causalLinearAttentionForward");
}
} // namespace

RNNX_TORCH_FUNCTION(causal_linear_attention, causalLinearAttention,
    "Causal linear attention forward, heads packed (rnnx::kernels::causalLinearAttentionForward)", py::arg("q"),
    py::arg("k"), py::arg("v"), py::arg("S0"), py::arg("z0"), py::arg("mask_pad"), py::arg("out"), py::arg("S_last"),
    py::arg("z_last"), py::arg("eps"), py::arg("num_heads"), py::arg("time_major"), py::arg("stream"));
