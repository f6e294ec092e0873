// rnnx::sru_scan's part of the PyTorch CUDA binding (plugins/torch/binding.cpp; conventions in
// binding_support.h): sru_scan, a thin wrapper of sruScanForward (../cuda/sru_scan.h).
#include "binding_support.h"
#include "sru_scan/cuda/sru_scan.h"

namespace
{
using namespace rnnx::torch_binding;

//! U (L, B, D*d*k), x (L, B, D*d) or None, weight_c / bias (2*D*d) in U's dtype; c0 (B, D*d) fp32 or None;
//! mask_pad (L, B) uint8 or None; h (L, B, D*d) in U's dtype, c_last (B, D*d) fp32.
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
                    toStream(stream)),
        "sruScanForward");
}
} // namespace

RNNX_TORCH_FUNCTION(sru_scan, sruScan, "SRU scan forward (rnnx::kernels::sruScanForward)", py::arg("U"), py::arg("x"),
    py::arg("weight_c"), py::arg("bias"), py::arg("c0"), py::arg("mask_pad"), py::arg("h"), py::arg("c_last"),
    py::arg("hidden_size"), py::arg("num_directions"), py::arg("num_matrices"), py::arg("has_skip_term"),
    py::arg("use_tanh"), py::arg("scale_x"), py::arg("stream"));
