// rnnx custom-op library for ONNX Runtime (CPU execution provider): domain "rnnx", with every rnnx op (docs/ops.md),
// each registering itself (op_registry.h) from its folder's plugins/<op>/ort/<op>_op.cpp, with a kernel per
// activation dtype the exporter writes (fp32, fp16, bf16, fp64), so registering the library never makes a graph
// invalid. What the ops share is in ort_op_support.h. This file names no op.
//
// Built on ONNX Runtime's C++ custom-op API (headers only: the library links no libonnxruntime and takes
// the API table from the host process), registered with SessionOptions.register_custom_ops_library. The
// kernels are host-independent headers shared with rnnx's torch CPU op (plugins/*/cpu), built per
// instruction set (plugins/<op>/ort/<op>_isa.cpp, isa_kernels.h).
#include "op_registry.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

rnnx_ort::OpRegistry& rnnx_ort::op_registry()
{
    static OpRegistry registry;
    return registry;
}

namespace
{
std::once_flag g_once;
std::unique_ptr<Ort::CustomOpDomain> g_domain;

// The "rnnx" domain with every registered op, sorted by op name (the load order of the ops' files is the linker's).
std::unique_ptr<Ort::CustomOpDomain> make_domain()
{
    rnnx_ort::OpRegistry& registry = rnnx_ort::op_registry();
    if (!registry.error.empty())
        throw std::runtime_error("librnnx_ort_ops: registering an op failed: " + registry.error);
    std::vector<rnnx_ort::RegisteredOp*> ops;
    for (const auto& op : registry.ops)
        ops.push_back(op.get());
    std::sort(ops.begin(), ops.end(), [](const rnnx_ort::RegisteredOp* a, const rnnx_ort::RegisteredOp* b)
        { return std::strcmp(a->name(), b->name()) < 0; });
    for (size_t i = 1; i < ops.size(); ++i)
        if (std::strcmp(ops[i - 1]->name(), ops[i]->name()) == 0)
            throw std::runtime_error(std::string("librnnx_ort_ops: op ") + ops[i]->name() + " registered twice");
    auto domain = std::make_unique<Ort::CustomOpDomain>("rnnx");
    for (rnnx_ort::RegisteredOp* op : ops)
        op->add_to(*domain);
    return domain;
}
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
        std::call_once(g_once, [] { g_domain = make_domain(); });
        Ort::UnownedSessionOptions(options).Add(*g_domain);
    }
    catch (const std::exception& e) // Ort::Exception included: nothing may unwind into ORT's C API
    {
        return api->CreateStatus(ORT_FAIL, e.what());
    }
    return nullptr;
}
