// rnnx custom-op library for ONNX Runtime (CPU execution provider): domain "rnnx", op SRUScan.
//
// Built on ONNX Runtime's C++ custom-op API (headers only: the library links no libonnxruntime and takes
// the API table from the host process), registered with SessionOptions.register_custom_ops_library.
// SRUScan reads the node layout the exporter writes for both targets: U, x?, weight_c, bias, c0, mask_pad?
// (the tensorrt target's 1-element dummy x and all-false mask are accepted too) with the attributes of
// rnnx.models.ops.spec.SRU_SCAN, fp32. The arithmetic is rnnx's torch CPU kernel
// (models/ops/sru/csrc/sru_scan_kernel.h), in an AVX2/FMA build and a baseline build chosen by the CPU's
// features, parallel over (batch, direction, block of hidden units) on ORT's intra-op thread pool.
#define ORT_API_MANUAL_INIT // the API table comes from the host process (RegisterCustomOps)
#include "onnxruntime_cxx_api.h"
#include "sru_scan_entry.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>
#include <string>

namespace
{
using rnnx_ort::RangeFn;
using rnnx_ort::SruArgs;

bool cpu_has_avx2_fma()
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

int64_t attribute_or(const OrtKernelInfo* info, const char* name, int64_t fallback)
{
    try
    {
        return Ort::ConstKernelInfo(info).GetAttribute<int64_t>(name);
    }
    catch (const Ort::Exception&)
    {
        return fallback;
    }
}

float float_attribute_or(const OrtKernelInfo* info, const char* name, float fallback)
{
    try
    {
        return Ort::ConstKernelInfo(info).GetAttribute<float>(name);
    }
    catch (const Ort::Exception&)
    {
        return fallback;
    }
}

// The kernel: attributes read once, Compute reads the inputs by position (an absent optional input is null).
struct SruScanKernel
{
    int64_t d, D, k;
    bool has_skip, use_tanh;
    double scale_x;

    explicit SruScanKernel(const OrtKernelInfo* info)
        : d(attribute_or(info, "hidden_size", 0))
        , D(attribute_or(info, "num_directions", 1))
        , k(attribute_or(info, "num_matrices", 3))
        , has_skip(attribute_or(info, "has_skip_term", 1) != 0)
        , use_tanh(attribute_or(info, "use_tanh", 0) != 0)
        , scale_x(float_attribute_or(info, "scale_x", 1.0f))
    {
    }

    static OrtStatusPtr error(const std::string& message)
    {
        return Ort::GetApi().CreateStatus(ORT_INVALID_ARGUMENT, ("rnnx SRUScan: " + message).c_str());
    }

    OrtStatusPtr ComputeV2(OrtKernelContext* context)
    {
        try
        {
            return compute(Ort::KernelContext(context));
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

    OrtStatusPtr compute(Ort::KernelContext ctx)
    {
        const size_t n_inputs = ctx.GetInputCount();
        auto input = [&](size_t i) { return i < n_inputs ? ctx.GetInput(i) : Ort::ConstValue{nullptr}; };
        const Ort::ConstValue U = input(0), x = input(1), w = input(2), bias = input(3), c0 = input(4), mask = input(5);
        if (d <= 0 || (D != 1 && D != 2) || (k != 3 && k != 4))
            return error("attributes hidden_size > 0, num_directions 1|2, num_matrices 3|4 expected");
        if (U == nullptr || w == nullptr || bias == nullptr || c0 == nullptr)
            return error("U, weight_c, bias and c0 are required");
        const auto shape = U.GetTensorTypeAndShapeInfo().GetShape();
        if (shape.size() != 3 || shape[2] != D * d * k)
            return error("U must be (L, B, num_directions * hidden_size * num_matrices)");
        const int64_t L = shape[0], B = shape[1], N = B * D * d;
        if (w.GetTensorTypeAndShapeInfo().GetElementCount() != static_cast<size_t>(2 * D * d)
            || bias.GetTensorTypeAndShapeInfo().GetElementCount() != static_cast<size_t>(2 * D * d)
            || c0.GetTensorTypeAndShapeInfo().GetElementCount() != static_cast<size_t>(N))
            return error("weight_c and bias must hold 2*D*d values, c0 B*D*d");
        const float* xp = nullptr;
        if (has_skip && k == 3)
        {
            if (x == nullptr || x.GetTensorTypeAndShapeInfo().GetElementCount() != static_cast<size_t>(L * N))
                return error("x must be (L, B, D*d) when num_matrices is 3 with the skip term");
            xp = x.GetTensorData<float>();
        }
        const uint8_t* mp = nullptr;
        if (mask != nullptr && mask.GetTensorTypeAndShapeInfo().GetElementCount() > 0)
        {
            if (mask.GetTensorTypeAndShapeInfo().GetElementCount() != static_cast<size_t>(L * B))
                return error("mask_pad must be (L, B)");
            mp = reinterpret_cast<const uint8_t*>(mask.GetTensorData<bool>());
        }
        const std::vector<int64_t> h_shape{L, B, D * d}, c_shape{B, D * d};
        float* hp = ctx.GetOutput(0, h_shape).GetTensorMutableData<float>();
        float* cp = ctx.GetOutput(1, c_shape).GetTensorMutableData<float>();
        const SruArgs args{L, B, D, d, k, has_skip, use_tanh, scale_x, U.GetTensorData<float>(), xp,
            w.GetTensorData<float>(), bias.GetTensorData<float>(), c0.GetTensorData<float>(), mp, hp, cp};
        const rnnx_ort::ParallelFor parallel_for = [&ctx](int64_t begin, int64_t end, int64_t grain, const RangeFn& fn)
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
            } job{begin, n, chunks, &fn};
            ctx.ParallelFor(
                [](void* data, size_t i)
                {
                    const auto* j = static_cast<const Job*>(data);
                    const int64_t ii = static_cast<int64_t>(i);
                    (*j->fn)(j->begin + j->n * ii / j->chunks, j->begin + j->n * (ii + 1) / j->chunks);
                },
                static_cast<size_t>(chunks), 0, &job);
        };
        if (cpu_has_avx2_fma())
            rnnx_ort::sru_forward_avx2(parallel_for, args);
        else
            rnnx_ort::sru_forward_base(parallel_for, args);
        return nullptr;
    }
};

// The op: 6 inputs (x and mask_pad optional), 2 outputs, fp32 except the bool mask.
struct SruScanOp : Ort::CustomOpBase<SruScanOp, SruScanKernel, true>
{
    OrtStatusPtr CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const
    {
        try
        {
            *kernel = new SruScanKernel(info);
            return nullptr;
        }
        catch (const std::exception& e)
        {
            return Ort::GetApi().CreateStatus(ORT_FAIL, e.what());
        }
    }
    const char* GetName() const
    {
        return "SRUScan";
    }
    const char* GetExecutionProviderType() const
    {
        return "CPUExecutionProvider";
    }
    size_t GetInputTypeCount() const
    {
        return 6;
    }
    ONNXTensorElementDataType GetInputType(size_t index) const
    {
        return index == 5 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    }
    OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t index) const
    {
        return index == 1 || index == 5 ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
    }
    size_t GetOutputTypeCount() const
    {
        return 2;
    }
    ONNXTensorElementDataType GetOutputType(size_t) const
    {
        return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    }
};

std::once_flag g_once;
std::unique_ptr<Ort::CustomOpDomain> g_domain;
SruScanOp g_sru_scan;
} // namespace

extern "C" __attribute__((visibility("default"))) OrtStatus* ORT_API_CALL RegisterCustomOps(
    OrtSessionOptions* options, const OrtApiBase* api_base)
{
    const OrtApi* api = api_base->GetApi(ORT_API_VERSION);
    if (api == nullptr)
    {
        const std::string message = "librnnx_ort_ops needs ONNX Runtime API version " + std::to_string(ORT_API_VERSION)
            + " (onnxruntime >= 1." + std::to_string(ORT_API_VERSION) + "); this onnxruntime is "
            + api_base->GetVersionString();
        return api_base->GetApi(1)->CreateStatus(ORT_FAIL, message.c_str());
    }
    Ort::InitApi(api);
    try
    {
        std::call_once(g_once,
            []
            {
                g_domain = std::make_unique<Ort::CustomOpDomain>("rnnx");
                g_domain->Add(&g_sru_scan);
            });
        Ort::UnownedSessionOptions(options).Add(*g_domain);
    }
    catch (const Ort::Exception& e)
    {
        return api->CreateStatus(ORT_FAIL, e.what());
    }
    return nullptr;
}
