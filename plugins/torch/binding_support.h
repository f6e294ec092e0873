// What the PyTorch CUDA binding's op files share (plugins/<op>/torch/<op>_binding.cpp, compiled with binding.cpp
// into the extension rnnx.models.ops.cuda builds): the tensor checks, the dtype mapping, the launch status check,
// and the registry through which each op file adds its functions to the module without an edit here:
//
//     RNNX_TORCH_BINDING(<op>, bind); // void bind(pybind11::module_& m) { m.def("<op>", ...); }
//     RNNX_TORCH_FUNCTION(<op>, function, "doc", py::arg(...), ...); // the same for one function named <op>
//
// Conventions of every function: outputs are preallocated by the caller (so the same tensor may be passed as
// initial and final state to update it in place), the CUDA stream is an integer handle
// (torch.cuda.current_stream().cuda_stream), inputs are contiguous CUDA tensors in the dtypes of the launchers
// (rnnx/kernel_types.h): activations fp32 / fp16 / bf16, state fp32.
#pragma once

#include <torch/extension.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "rnnx/kernel_types.h"

namespace rnnx
{
namespace torch_binding
{

//! The launchers' DataType of an activation tensor; a c10::Error for other dtypes.
inline kernels::DataType dataType(const at::Tensor& t)
{
    switch (t.scalar_type())
    {
    case at::kFloat: return kernels::DataType::kFLOAT;
    case at::kHalf: return kernels::DataType::kHALF;
    case at::kBFloat16: return kernels::DataType::kBF16;
    default: TORCH_CHECK(false, "rnnx CUDA kernels: unsupported activation dtype ", t.scalar_type());
    }
    return kernels::DataType::kFLOAT;
}

//! `t` (called `name` in errors) is a contiguous CUDA tensor of `dtype`.
inline void checkTensor(const at::Tensor& t, const char* name, at::ScalarType dtype)
{
    TORCH_CHECK(t.is_cuda(), "rnnx CUDA kernels: ", name, " must be a CUDA tensor");
    TORCH_CHECK(t.is_contiguous(), "rnnx CUDA kernels: ", name, " must be contiguous");
    TORCH_CHECK(t.scalar_type() == dtype, "rnnx CUDA kernels: ", name, " must be ", dtype, ", got ", t.scalar_type());
}

//! checkTensor for each of `tensors`, a tensor and its name, all in `dtype`.
inline void checkTensors(at::ScalarType dtype, std::initializer_list<std::pair<const at::Tensor&, const char*>> tensors)
{
    for (const auto& [tensor, name] : tensors)
        checkTensor(tensor, name, dtype);
}

//! The data of an optional tensor, checked as checkTensor does; nullptr when absent.
template <typename T> const T* optionalPtr(const c10::optional<at::Tensor>& t, const char* name, at::ScalarType dtype)
{
    if (!t.has_value())
        return nullptr;
    checkTensor(*t, name, dtype);
    return static_cast<const T*>(t->data_ptr());
}

//! The data of an optional pad mask, checked as checkTensor does, and its MaskType in `type`: uint8 or bool as
//! kUINT8, int32 as kINT32. nullptr (and kUINT8) when absent.
inline const void* maskPtr(const c10::optional<at::Tensor>& mask, const char* name, kernels::MaskType* type)
{
    *type = kernels::MaskType::kUINT8;
    if (!mask.has_value())
        return nullptr;
    const auto dtype = mask->scalar_type();
    TORCH_CHECK(dtype == at::kByte || dtype == at::kBool || dtype == at::kInt, "rnnx CUDA kernels: ", name,
        " must be uint8, bool or int32, got ", dtype);
    checkTensor(*mask, name, dtype);
    if (dtype == at::kInt)
        *type = kernels::MaskType::kINT32;
    return mask->data_ptr();
}

//! A c10::Error "<name> must be <shape...>" unless the optional tensor `t` is absent or has `sizes`; `shape` is the
//! expected shape as its parts, e.g. "(B=", B, ", T=", T, ")".
template <typename... Shape>
void checkOptionalSizes(
    const c10::optional<at::Tensor>& t, const char* name, at::IntArrayRef sizes, const Shape&... shape)
{
    TORCH_CHECK(!t.has_value() || t->sizes() == sizes, "rnnx CUDA kernels: ", name, " must be ", shape...);
}

//! maskPtr for a pad mask that is absent or (B, T), its shape checked as checkOptionalSizes does.
inline const void* batchTimeMaskPtr(
    const c10::optional<at::Tensor>& mask_pad, int64_t B, int64_t T, kernels::MaskType* type)
{
    checkOptionalSizes(mask_pad, "mask_pad", {B, T}, "(B=", B, ", T=", T, ")");
    return maskPtr(mask_pad, "mask_pad", type);
}

//! A c10::Error "past_state / present_state must be <shape...>" unless present_state, and past_state when given,
//! hold `numel` elements (past_state may be present_state, to update the state in place).
template <typename... Shape>
void checkStates(
    const c10::optional<at::Tensor>& past_state, const at::Tensor& present_state, int64_t numel, const Shape&... shape)
{
    TORCH_CHECK(present_state.numel() == numel && (!past_state.has_value() || past_state->numel() == numel),
        "rnnx CUDA kernels: past_state / present_state must be ", shape...);
}

//! A c10::Error naming `what` and the CUDA error unless `status` is cudaSuccess.
inline void checkStatus(cudaError_t status, const char* what)
{
    TORCH_CHECK(status == cudaSuccess, "rnnx CUDA kernels: ", what, " failed: ", cudaGetErrorName(status), " (",
        cudaGetErrorString(status), ")");
}

//! The stream of an integer handle (torch.cuda.current_stream().cuda_stream).
inline cudaStream_t toStream(int64_t stream)
{
    return reinterpret_cast<cudaStream_t>(stream);
}

//! Adds an op's functions to the extension module.
using BindFunction = void (*)(pybind11::module_&);

//! The op files' bind functions with their op names, in registration order (static initialisation, before the
//! module is created); binding.cpp's PYBIND11_MODULE calls them sorted by name.
inline std::vector<std::pair<std::string, BindFunction>>& registeredBindings()
{
    static std::vector<std::pair<std::string, BindFunction>> bindings;
    return bindings;
}

//! Registers `bind` under `name` when constructed (a static object of the op's file: RNNX_TORCH_BINDING).
struct BindingRegistrar
{
    BindingRegistrar(const char* name, BindFunction bind)
    {
        registeredBindings().emplace_back(name, bind);
    }
};

} // namespace torch_binding
} // namespace rnnx

//! Registers `bind` (void(pybind11::module_&)) as op `name`'s part of the extension module; one line per op file.
#define RNNX_TORCH_BINDING(name, bind)                                                                                 \
    static const ::rnnx::torch_binding::BindingRegistrar rnnxTorchBinding_##name                                       \
    {                                                                                                                  \
        #name, bind                                                                                                    \
    }

//! RNNX_TORCH_BINDING for an op whose part is one function, `function`, named `name` in the module; the rest are
//! m.def's arguments after it: the doc string, then the pybind11::arg of each parameter (written py::arg).
#define RNNX_TORCH_FUNCTION(name, function, ...)                                                                       \
    RNNX_TORCH_BINDING(name,                                                                                           \
        [](pybind11::module_& m)                                                                                       \
        {                                                                                                              \
            namespace py = pybind11;                                                                                   \
            m.def(#name, &function, __VA_ARGS__);                                                                      \
        })
