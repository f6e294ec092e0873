// Types shared by the launch APIs of the rnnx CUDA kernels. Each op declares its own launcher (parameter struct,
// launch function, workspace size) in its folder, plugins/<op>/cuda/<op>.h, included as
// "<op>/cuda/<op>.h" (the kernel library puts plugins/ on its public include path); there is no umbrella header,
// so a new op edits no shared file.
//
// The TensorRT plugins (plugins/) and the PyTorch CUDA binding (plugins/torch/) both call these
// launchers, so the same kernels run in TensorRT, in PyTorch and in the tests and benchmarks.
// The maths, layouts and mask semantics are those of docs/ops.md; every tensor is dense and
// contiguous (row-major in the shape order its launcher gives). Activations are fp32, fp16 or bf16
// (DataType); recurrent state is fp32 in every precision and all arithmetic is fp32.
//
// Every launcher only enqueues work on `stream` (no synchronisation, no allocation) and returns
// the launch status: cudaErrorInvalidValue for arguments it does not support, else the result of
// cudaGetLastError() after the launch. Sizes of zero are valid and launch nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace rnnx
{
namespace kernels
{

//! Element type of the activation tensors (inputs and outputs other than the state).
enum class DataType
{
    kFLOAT,
    kHALF,
    kBF16
};

//! Element type of a pad mask (mask_pad). Either way an element is a pad step when it is non-zero; the kernels
//! read it in this type. The PyTorch binding passes uint8 (torch.bool / torch.uint8 storage); the TensorRT
//! plugins pass what TensorRT gives them, which is int32: TensorRT does not support kBOOL or kUINT8 plugin
//! tensors (PluginTensorDesc::type, NvInferRuntimePlugin.h), so the TensorRT export casts every mask to int32.
enum class MaskType
{
    kUINT8, //!< one byte per element: uint8 or bool
    kINT32  //!< int32
};

} // namespace kernels
} // namespace rnnx
