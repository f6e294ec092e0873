// PyTorch binding of the rnnx CUDA kernels: thin wrappers that pass tensors to the launchers of
// plugins/kernels/include/rnnx/kernels.h (the same launchers the TensorRT plugins call).
//
// Every function takes its outputs preallocated (so a caller may pass the same tensor as initial
// and final state to update it in place) and the CUDA stream as an integer handle
// (torch.cuda.current_stream().cuda_stream). Inputs must be contiguous CUDA tensors in the dtypes
// of the launcher API: activations fp32 / fp16 / bf16, state fp32, mask uint8.
#include <torch/extension.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "rnnx/kernels.h"

namespace
{

using rnnx::kernels::DataType;

DataType dataType(const at::Tensor& t)
{
    switch (t.scalar_type())
    {
    case at::kFloat: return DataType::kFLOAT;
    case at::kHalf: return DataType::kHALF;
    case at::kBFloat16: return DataType::kBF16;
    default: TORCH_CHECK(false, "rnnx CUDA kernels: unsupported activation dtype ", t.scalar_type());
    }
    return DataType::kFLOAT;
}

void checkTensor(const at::Tensor& t, const char* name, at::ScalarType dtype)
{
    TORCH_CHECK(t.is_cuda(), "rnnx CUDA kernels: ", name, " must be a CUDA tensor");
    TORCH_CHECK(t.is_contiguous(), "rnnx CUDA kernels: ", name, " must be contiguous");
    TORCH_CHECK(t.scalar_type() == dtype, "rnnx CUDA kernels: ", name, " must be ", dtype, ", got ", t.scalar_type());
}

//! checkTensor for each of `tensors`, a tensor and its name, all in `dtype`.
void checkTensors(at::ScalarType dtype, std::initializer_list<std::pair<const at::Tensor&, const char*>> tensors)
{
    for (const auto& [tensor, name] : tensors)
        checkTensor(tensor, name, dtype);
}

template <typename T> const T* optionalPtr(const c10::optional<at::Tensor>& t, const char* name, at::ScalarType dtype)
{
    if (!t.has_value())
        return nullptr;
    checkTensor(*t, name, dtype);
    return static_cast<const T*>(t->data_ptr());
}

void checkStatus(cudaError_t status, const char* what)
{
    TORCH_CHECK(status == cudaSuccess, "rnnx CUDA kernels: ", what, " failed: ", cudaGetErrorName(status), " (",
        cudaGetErrorString(status), ")");
}

void sruScan(const at::Tensor& U, const c10::optional<at::Tensor>& x, const at::Tensor& weight_c,
    const at::Tensor& bias, const c10::optional<at::Tensor>& c0, const c10::optional<at::Tensor>& mask_pad,
    at::Tensor h, at::Tensor c_last, int64_t hidden_size, int64_t num_directions, int64_t num_matrices,
    bool has_skip_term, bool use_tanh, double scale_x, int64_t stream)
{
    const auto act = U.scalar_type();
    checkTensors(act, {{U, "U"}, {weight_c, "weight_c"}, {bias, "bias"}, {h, "h"}});
    checkTensor(c_last, "c_last", at::kFloat);
    TORCH_CHECK(U.dim() == 3, "rnnx CUDA kernels: U must be (L, B, D*d*k)");
    const int64_t width = num_directions * hidden_size;
    TORCH_CHECK(U.size(2) == width * num_matrices, "rnnx CUDA kernels: U width mismatch");
    TORCH_CHECK(h.numel() == U.size(0) * U.size(1) * width, "rnnx CUDA kernels: h size mismatch");
    TORCH_CHECK(c_last.numel() == U.size(1) * width, "rnnx CUDA kernels: c_last size mismatch");
    rnnx::kernels::SruScanParams p{};
    p.length = static_cast<int>(U.size(0));
    p.batch = static_cast<int>(U.size(1));
    p.hidden_size = static_cast<int>(hidden_size);
    p.num_directions = static_cast<int>(num_directions);
    p.num_matrices = static_cast<int>(num_matrices);
    p.has_skip_term = has_skip_term;
    p.use_tanh = use_tanh;
    p.scale_x = static_cast<float>(scale_x);
    checkStatus(rnnx::kernels::sruScanForward(p, dataType(U), U.data_ptr(), optionalPtr<void>(x, "x", act),
                    weight_c.data_ptr(), bias.data_ptr(), optionalPtr<float>(c0, "c0", at::kFloat),
                    optionalPtr<uint8_t>(mask_pad, "mask_pad", at::kByte), h.data_ptr(), c_last.data_ptr<float>(),
                    reinterpret_cast<cudaStream_t>(stream)),
        "sruScanForward");
}

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
    const DataType type = dataType(q);
    const size_t ws_bytes = rnnx::kernels::causalLinearAttentionWorkspaceSize(p, type);
    at::Tensor workspace = at::empty({static_cast<int64_t>(ws_bytes)}, q.options().dtype(at::kByte));
    checkStatus(rnnx::kernels::causalLinearAttentionForward(p, type, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                    optionalPtr<float>(S0, "S0", at::kFloat), optionalPtr<float>(z0, "z0", at::kFloat), mask,
                    out.data_ptr(), S_last.data_ptr<float>(), z_last.data_ptr<float>(), workspace.data_ptr(),
                    reinterpret_cast<cudaStream_t>(stream)),
        "causalLinearAttentionForward");
}

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.def("sru_scan", &sruScan, "SRU scan forward (rnnx::kernels::sruScanForward)", py::arg("U"), py::arg("x"),
        py::arg("weight_c"), py::arg("bias"), py::arg("c0"), py::arg("mask_pad"), py::arg("h"), py::arg("c_last"),
        py::arg("hidden_size"), py::arg("num_directions"), py::arg("num_matrices"), py::arg("has_skip_term"),
        py::arg("use_tanh"), py::arg("scale_x"), py::arg("stream"));
    m.def("causal_linear_attention", &causalLinearAttention,
        "Causal linear attention forward, heads packed (rnnx::kernels::causalLinearAttentionForward)", py::arg("q"),
        py::arg("k"), py::arg("v"), py::arg("S0"), py::arg("z0"), py::arg("mask_pad"), py::arg("out"),
        py::arg("S_last"), py::arg("z_last"), py::arg("eps"), py::arg("num_heads"), py::arg("time_major"),
        py::arg("stream"));
}
