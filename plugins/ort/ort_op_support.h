// What the library's ops share: the op itself (CpuOp: name, I/O types by role, kernel creation, exceptions as
// statuses), attributes with defaults, error statuses, ORT's thread pool as the kernels' parallel-for, fp16 <-> fp32
// staging of I/O and the pad mask in any element type. Uses ORT's C++ API with ORT_API_MANUAL_INIT in every file of
// the library (they must agree; the API table comes from the host process, RegisterCustomOps).
#pragma once

#ifndef ORT_API_MANUAL_INIT
#define ORT_API_MANUAL_INIT
#endif
#include "onnxruntime_cxx_api.h"
#include "isa_kernels.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace rnnx_ort
{
template <typename T> T attribute_or(const OrtKernelInfo* info, const char* name, T fallback)
{
    try
    {
        return Ort::ConstKernelInfo(info).GetAttribute<T>(name);
    }
    catch (const Ort::Exception&)
    {
        return fallback;
    }
}

inline OrtStatusPtr invalid(const char* op, const std::string& message)
{
    return Ort::GetApi().CreateStatus(ORT_INVALID_ARGUMENT, (std::string("rnnx ") + op + ": " + message).c_str());
}

// Runs a kernel's compute, turning exceptions into statuses (none may cross into ORT).
template <typename Fn> OrtStatusPtr guarded(Fn&& fn)
{
    try
    {
        return fn();
    }
    catch (const Ort::Exception& e)
    {
        return Ort::GetApi().CreateStatus(e.GetOrtErrorCode(), e.what());
    }
    catch (const std::exception& e)
    {
        return Ort::GetApi().CreateStatus(ORT_FAIL, e.what());
    }
}

// Input i of a kernel call, or null when the node has fewer inputs (an optional input left out at the end).
inline Ort::ConstValue optional_input(Ort::KernelContext& ctx, size_t i)
{
    return i < ctx.GetInputCount() ? ctx.GetInput(i) : Ort::ConstValue{nullptr};
}

// The kernels' parallel-for on ORT's intra-op thread pool: at most 256 chunks of at least `grain` items. An
// exception in a chunk (e.g. bad_alloc) is caught on its pool thread, never unwinding through ORT's C
// callback, and the first one is rethrown here once every chunk has run.
inline ParallelFor ort_parallel_for(Ort::KernelContext& ctx)
{
    return [&ctx](int64_t begin, int64_t end, int64_t grain, const RangeFn& fn)
    {
        const int64_t n = end - begin;
        if (n <= 0)
            return;
        const int64_t chunks = std::clamp<int64_t>((n + grain - 1) / std::max<int64_t>(grain, 1), 1, 256);
        if (chunks == 1)
        {
            fn(begin, end);
            return;
        }
        struct Job
        {
            int64_t begin, n, chunks;
            const RangeFn* fn;
            std::mutex mutex;
            std::exception_ptr error;
        } job{begin, n, chunks, &fn, {}, nullptr};
        ctx.ParallelFor(
            [](void* data, size_t i)
            {
                auto* j = static_cast<Job*>(data);
                const int64_t ii = static_cast<int64_t>(i);
                try
                {
                    (*j->fn)(j->begin + j->n * ii / j->chunks, j->begin + j->n * (ii + 1) / j->chunks);
                }
                catch (...)
                {
                    const std::lock_guard<std::mutex> lock(j->mutex);
                    if (!j->error)
                        j->error = std::current_exception();
                }
            },
            static_cast<size_t>(chunks), 0, &job);
        if (job.error)
            std::rethrow_exception(job.error);
    };
}

// The role of an op's input or output, which fixes its element type for an activation type T (element_type_of).
enum class Role
{
    activation, // T
    state,      // acc_type<T>
    mask,       // any of mask_bytes()' types
};

// One input of an op: its role and whether a node may leave it out.
struct Input
{
    Role role;
    bool optional;
};

// What an op registers with ORT, whatever its activation type: `name` (the ONNX op type), `since_version` (the first
// rnnx domain version whose layout the kernel reads: a node of an older export gets no kernel here and ONNX Runtime
// runs its function body instead), its `inputs` by position and the roles of its `outputs`.
template <size_t NbInputs, size_t NbOutputs> struct OpSignature
{
    const char* name;
    int since_version;
    std::array<Input, NbInputs> inputs;
    std::array<Role, NbOutputs> outputs;
};

// An activation type T (float, double, Ort::Float16_t, Ort::BFloat16_t) computes, and keeps its state, in
// acc_type<T>: double for double, else float. fp16 / bf16 tensors are staged to fp32 around the kernels.
template <typename T> using acc_type = std::conditional_t<std::is_same_v<T, double>, double, float>;
template <typename T> constexpr bool is_staged = !std::is_same_v<T, acc_type<T>>;

template <typename T> constexpr ONNXTensorElementDataType element_type()
{
    if constexpr (std::is_same_v<T, float>)
        return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    else if constexpr (std::is_same_v<T, double>)
        return ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
    else if constexpr (std::is_same_v<T, Ort::Float16_t>)
        return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
    else
        return ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
}

// The element type of a tensor with `role` in an op for activation type T (undefined: a mask takes any).
template <typename T> constexpr ONNXTensorElementDataType element_type_of(Role role)
{
    switch (role)
    {
    case Role::activation: return element_type<T>();
    case Role::state: return element_type<acc_type<T>>();
    case Role::mask: break;
    }
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

// An activation input in acc_type<T>: its own data, or for fp16 / bf16 converted into `staging`.
template <typename T> const acc_type<T>* as_acc(const Ort::ConstValue& value, std::vector<float>& staging)
{
    if (value == nullptr)
        return nullptr;
    if constexpr (!is_staged<T>)
    {
        return value.GetTensorData<T>();
    }
    else
    {
        const size_t n = value.GetTensorTypeAndShapeInfo().GetElementCount();
        const T* src = value.GetTensorData<T>();
        staging.resize(n);
        for (size_t i = 0; i < n; ++i)
            staging[i] = src[i].ToFloat();
        return staging.data();
    }
}

// Where a kernel writes an activation output: the output itself, or for fp16 / bf16 `staging` (see store()).
template <typename T> acc_type<T>* output_acc(Ort::UnownedValue& out, size_t n, std::vector<float>& staging)
{
    if constexpr (!is_staged<T>)
    {
        return out.GetTensorMutableData<T>();
    }
    else
    {
        staging.resize(n);
        return staging.data();
    }
}

// Copies `staging` into an fp16 / bf16 activation output (no-op otherwise).
template <typename T> void store(Ort::UnownedValue& out, const std::vector<float>& staging)
{
    if constexpr (is_staged<T>)
    {
        T* dst = out.GetTensorMutableData<T>();
        for (size_t i = 0; i < staging.size(); ++i)
            dst[i] = T(staging[i]);
    }
}

// The pad mask as one byte per step (non-zero = pad) from a tensor of any of the schemas' mask types
// (rnnx.export.onnx_ops.schemas.MASK_TYPES: bool, uint8, int32, int64, float, float16, bfloat16, double; int8
// too); null when absent or empty. Error text in `error` for another element type.
inline const uint8_t* mask_bytes(const Ort::ConstValue& mask, std::vector<uint8_t>& staging, std::string& error)
{
    if (mask == nullptr)
        return nullptr;
    const auto info = mask.GetTensorTypeAndShapeInfo();
    const size_t n = info.GetElementCount();
    if (n == 0)
        return nullptr;
    auto convert = [&](const auto* src, auto nonzero)
    {
        staging.resize(n);
        for (size_t i = 0; i < n; ++i)
            staging[i] = nonzero(src[i]) ? 1 : 0;
        return staging.data();
    };
    auto number = [](auto v) { return v != 0; };
    auto half = [](auto v) { return v.ToFloat() != 0.0f; };
    switch (info.GetElementType())
    {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return reinterpret_cast<const uint8_t*>(mask.GetTensorData<bool>());
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return mask.GetTensorData<uint8_t>();
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return convert(mask.GetTensorData<int8_t>(), number);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return convert(mask.GetTensorData<int32_t>(), number);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return convert(mask.GetTensorData<int64_t>(), number);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return convert(mask.GetTensorData<float>(), number);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return convert(mask.GetTensorData<double>(), number);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return convert(mask.GetTensorData<Ort::Float16_t>(), half);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return convert(mask.GetTensorData<Ort::BFloat16_t>(), half);
    default:
        error = "mask_pad must be bool, uint8, int8, int32, int64, float, float16, bfloat16 or double";
        return nullptr;
    }
}

inline size_t count(const Ort::ConstValue& value)
{
    return value == nullptr ? 0 : value.GetTensorTypeAndShapeInfo().GetElementCount();
}

// "(2, 5, 64)".
inline std::string shape_text(const std::vector<int64_t>& shape)
{
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + ")";
}

inline std::vector<int64_t> shape_of(const Ort::ConstValue& value)
{
    return value.GetTensorTypeAndShapeInfo().GetShape();
}

// A kernel call's pad mask, one byte per step (non-zero = pad): `bytes` null when the node gives none or an empty
// one, else the mask's own data or `staging` (mask_bytes).
struct PadMask
{
    const uint8_t* bytes = nullptr;
    std::vector<uint8_t> staging;

    // Reads `mask`: an error status naming `op` for an element type mask_bytes does not take, or for a mask of
    // another shape than `shape` ("mask_pad must be <axes>", then " = <shape>" when `show_shape`); the text is
    // built on that error only.
    OrtStatusPtr read(const char* op, const Ort::ConstValue& mask, const std::vector<int64_t>& shape, const char* axes,
        bool show_shape = false)
    {
        return read_fitting(
            op, mask, [&] { return shape_of(mask) == shape; },
            [&] { return std::string(axes) + (show_shape ? " = " + shape_text(shape) : std::string()); });
    }

    // The same, for a mask checked by its number of elements only.
    OrtStatusPtr read(const char* op, const Ort::ConstValue& mask, size_t elements, const char* expected)
    {
        return read_fitting(op, mask, [&] { return count(mask) == elements; }, [&] { return std::string(expected); });
    }

private:
    template <typename Fits, typename Expected>
    OrtStatusPtr read_fitting(const char* op, const Ort::ConstValue& mask, Fits fits, Expected expected)
    {
        std::string error;
        bytes = mask_bytes(mask, staging, error);
        if (!error.empty())
            return invalid(op, error);
        if (bytes != nullptr && !fits())
            return invalid(op, "mask_pad must be " + expected());
        return nullptr;
    }
};

// Runs a kernel's entry point (RNNX_ISA_ENTRY, isa_kernels.h) on ORT's intra-op thread pool, then copies the activation
// output `out` from `staging` when it is fp16 / bf16 (store()).
template <typename T, typename Args>
OrtStatusPtr run(Ort::KernelContext& ctx, void (*forward)(const ParallelFor&, const Args&), const Args& args,
    Ort::UnownedValue& out, const std::vector<float>& staging)
{
    forward(ort_parallel_for(ctx), args);
    store<T>(out, staging);
    return nullptr;
}

// What ORT runs for a kernel K: K's compute(Ort::KernelContext) behind ComputeV2, exceptions turned into statuses.
template <typename K> struct GuardedKernel : K
{
    using K::K;
    OrtStatusPtr ComputeV2(OrtKernelContext* context) const
    {
        return guarded([&] { return this->compute(Ort::KernelContext(context)); });
    }
};

// An op of the library for activation type T: a CPU-EP op of the C++ API whose status-returning kernel is
// Kernel<T>, built from its KernelInfo (its constructor reads the attributes). Kernel<T> says the rest: its
// `signature` (an OpSignature) and compute.
template <template <typename> class Kernel, typename T>
struct CpuOp : Ort::CustomOpBase<CpuOp<Kernel, T>, GuardedKernel<Kernel<T>>, true>
{
    using Impl = Kernel<T>;
    static constexpr auto& signature = Impl::signature;

    CpuOp()
    {
        this->start_ver_ = signature.since_version;
    }

    OrtStatusPtr CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const
    {
        return guarded(
            [&]() -> OrtStatusPtr
            {
                *kernel = new GuardedKernel<Impl>(info);
                return nullptr;
            });
    }
    const char* GetExecutionProviderType() const
    {
        return "CPUExecutionProvider";
    }
    const char* GetName() const
    {
        return signature.name;
    }
    size_t GetInputTypeCount() const
    {
        return signature.inputs.size();
    }
    ONNXTensorElementDataType GetInputType(size_t index) const
    {
        return element_type_of<T>(signature.inputs[index].role);
    }
    OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t index) const
    {
        return signature.inputs[index].optional ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
    }
    size_t GetOutputTypeCount() const
    {
        return signature.outputs.size();
    }
    ONNXTensorElementDataType GetOutputType(size_t index) const
    {
        return element_type_of<T>(signature.outputs[index]);
    }
};
} // namespace rnnx_ort
