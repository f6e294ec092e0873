// rnnx custom-op library for ONNX Runtime (CPU execution provider): domain "rnnx", ops SRUScan
// (plugins/sru_scan/ort/sru_scan_op.h), CausalLinearAttention, LinearRecurrence and CausalConvWithState
// (plugins/<op>/ort/<op>_op.h, all on the include path), each with a kernel per
// activation dtype the exporter writes (fp32, fp16, bf16, fp64), so registering the library never makes a graph
// invalid. What the ops share is in ort_op_support.h.
//
// Built on ONNX Runtime's C++ custom-op API (headers only: the library links no libonnxruntime and takes
// the API table from the host process), registered with SessionOptions.register_custom_ops_library. The
// kernels are host-independent headers shared with rnnx's torch CPU op (plugins/*/cpu), built per
// instruction set (isa_kernels.cpp).
#define ORT_API_MANUAL_INIT // the API table comes from the host process (RegisterCustomOps)
#include "causal_conv_with_state_op.h"
#include "causal_linear_attention_op.h"
#include "linear_recurrence_op.h"
#include "sru_scan_op.h"

#include <memory>
#include <exception>
#include <mutex>
#include <string>

namespace
{
std::once_flag g_once;
std::unique_ptr<Ort::CustomOpDomain> g_domain;
template <template <typename> class Op> struct EveryDtype
{
    Op<float> fp32;
    Op<Ort::Float16_t> fp16;
    Op<Ort::BFloat16_t> bf16;
    Op<double> fp64;
    void add_to(Ort::CustomOpDomain& domain)
    {
        domain.Add(&fp32);
        domain.Add(&fp16);
        domain.Add(&bf16);
        domain.Add(&fp64);
    }
};
EveryDtype<rnnx_ort::SruScanOp> g_sru_scan;
EveryDtype<rnnx_ort::CausalLinearAttentionOp> g_attention;
EveryDtype<rnnx_ort::LinearRecurrenceOp> g_linear_recurrence;
EveryDtype<rnnx_ort::CausalConvWithStateOp> g_causal_conv;
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
                g_sru_scan.add_to(*g_domain);
                g_attention.add_to(*g_domain);
                g_linear_recurrence.add_to(*g_domain);
                g_causal_conv.add_to(*g_domain);
            });
        Ort::UnownedSessionOptions(options).Add(*g_domain);
    }
    catch (const std::exception& e) // Ort::Exception included: nothing may unwind into ORT's C API
    {
        return api->CreateStatus(ORT_FAIL, e.what());
    }
    return nullptr;
}
